#pragma once

// The `cepbus` command line: `cepbus [--version] [--help] COMMAND [ARGS]`,
// commands run, validate, match, join (docs/operations.md, "Command line").
// Every command takes --help. Exit status: 0 success, 1 failure (an invalid
// descriptor, query or event file, a bus that fails to start), 2 a bad command
// line.

namespace cepbus::app {

int runCli(int argc, char** argv);

}  // namespace cepbus::app
