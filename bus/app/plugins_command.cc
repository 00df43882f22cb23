#include "bus/app/plugins_command.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "bus/core/plugin/plugin_abi.h"
#include "bus/host/loader/plugin_loader.h"

namespace cepbus::app {
namespace fs = std::filesystem;

const CommandSpec& pluginsSpec() {
  static const CommandSpec spec = [] {
    CommandSpec s;
    s.name = "plugins";
    s.usage = "cepbus plugins [--plugin-path DIR]...";
    s.summary = "list the plugins in the search path with their engines and options";
    s.description =
        "Lists every plugin in the search path with its version, its engines and\n"
        "the options each takes (--option key=value in cepbus match, <option> in a\n"
        "descriptor), or why it cannot be loaded (an ABI version or build tag that\n"
        "differs, a missing entry point). A file an earlier folder also has is\n"
        "listed as shadowed: loading by name takes the first.\n";
    s.options = {{"--plugin-path", "DIR", "search DIR first (repeatable)"},
                 {"--help", "", "show this help and exit"}};
    s.examples = {{"cepbus plugins", "", "what this cepbus can load"},
                  {"cepbus plugins --plugin-path build/plugins", "",
                   "a plugin built out of tree, before the bundled ones"}};
    s.environment = {
        {"CEPBUS_PLUGIN_PATH", "", "folders (colon-separated) searched after --plugin-path"}};
    s.files = {{"PREFIX/lib/cepbus/plugins, BUILD/plugins", "",
                "the plugins beside an installed or a built cepbus, searched last"}};
    s.exit_status = "0 every plugin found is usable, 1 one is not, 2 bad command line.";
    return s;
  }();
  return spec;
}

Result<PluginsCommandOptions> parsePluginsArguments(std::span<const std::string> args) {
  auto parsed = pluginsSpec().parse(args);
  if (!parsed) return parsed.status();
  if (!parsed->positional.empty()) {
    return Status::invalidArgument("unexpected argument '" + parsed->positional[0] + "'");
  }
  return PluginsCommandOptions{parsed->values("--plugin-path")};
}

namespace {

// The plugin files of `dir`, sorted; none when it is not a readable folder.
std::vector<fs::path> pluginFiles(const std::string& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    if (file.starts_with("libcepbus_plugin_") && file.ends_with(".so") && it->is_regular_file(ec)) {
      out.push_back(it->path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

void printPlugin(const plugin::Plugin& p, std::ostream& out) {
  // Options as `--option key=value` (cepbus match) or <option name value>.
  for (const std::string& engine : p.engines()) {
    out << "    engine " << engine << " (options: key=VALUE: meaning)\n";
    for (const plugin::OptionInfo& o : p.engineOptions(engine)) {
      out << "      " << o.name << "=" << o.help << "\n";
    }
    out << "      max_delay=D >= 0 (or slack=D): (every engine; the host's) reorder events up to "
           "D time units behind the newest; later ones are late (default 0)\n";
  }
}

}  // namespace

int runPluginsCommand(const PluginsCommandOptions& options, std::ostream& out) {
  std::vector<std::string> paths = options.plugin_paths;
  for (std::string& p : plugin::PluginLoader::defaultSearchPaths()) paths.push_back(std::move(p));
  out << "plugin ABI " << CEPBUS_PLUGIN_ABI_VERSION << ", build tag " << plugin::hostBuildTag()
      << "\nsearch path:\n";
  for (const std::string& dir : paths) {
    std::error_code ec;
    out << "  " << dir << (fs::is_directory(dir, ec) ? "" : " (missing)") << "\n";
  }
  bool all_usable = true;
  size_t found = 0;
  std::map<std::string, std::string> first_by_file;  // file name -> the path loaded by name
  for (const std::string& dir : paths) {
    for (const fs::path& file : pluginFiles(dir)) {
      ++found;
      const std::string name = file.filename().string();
      out << "\n" << file.string() << "\n";
      if (auto it = first_by_file.find(name); it != first_by_file.end()) {
        out << "  shadowed by " << it->second << " (found first)\n";
        continue;
      }
      first_by_file.emplace(name, file.string());
      // One loader per file: engines of two plugins may clash, and this
      // command reports each plugin on its own.
      plugin::PluginLoader loader({});
      auto loaded = loader.load(file.string());
      if (!loaded) {
        all_usable = false;
        out << "  NOT USABLE: " << loaded.status().message() << "\n";
        continue;
      }
      out << "  plugin " << (*loaded)->name() << " " << (*loaded)->version() << "\n";
      printPlugin(**loaded, out);
    }
  }
  if (found == 0) out << "\nno plugin found\n";
  return all_usable ? 0 : 1;
}

}  // namespace cepbus::app
