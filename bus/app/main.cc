#include "bus/app/cli.h"

int main(int argc, char** argv) { return cepbus::app::runCli(argc, argv); }
