#pragma once

// `cepbus plugins [--plugin-path DIR]...`: what plugins this cepbus can find
// and load. Prints the search path (the --plugin-path folders, then the
// defaults of PluginLoader::defaultSearchPaths()), then every
// libcepbus_plugin_*.so in it, in search order: its name, version and file,
// its engines with the options each describes (DetectorFactory::options())
// and the options the host itself implements; or why it cannot be loaded
// (a wrong ABI version or build tag, a missing entry point). A file that an
// earlier folder also has is listed as shadowed and not loaded: loading by
// name takes the first.
//
// Exit status: 0 when every plugin found is usable, 1 when one is not, 2
// for a bad command line.

#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "bus/app/command_spec.h"
#include "bus/core/status.h"

namespace cepbus::app {

struct PluginsCommandOptions {
  std::vector<std::string> plugin_paths;  // --plugin-path DIR, searched before the defaults
};

const CommandSpec& pluginsSpec();
Result<PluginsCommandOptions> parsePluginsArguments(std::span<const std::string> args);
int runPluginsCommand(const PluginsCommandOptions& options, std::ostream& out);

}  // namespace cepbus::app
