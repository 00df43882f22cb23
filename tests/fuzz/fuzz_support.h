#pragma once

// What the libFuzzer targets share: the engine plugins, loaded once per
// process through the real loader (ABI and build-tag checks included), and a
// private temp folder for the targets whose input is a file.
//
// The plugins stay loaded for the whole run on purpose: libFuzzer keeps
// pointers to each module's coverage counters, so a plugin unloaded between
// two inputs would leave it reading unmapped memory.

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "bus/host/loader/plugin_loader.h"

namespace cepbus::fuzz {

// The engines that run the pattern language; join has its own target.
inline constexpr std::string_view kPatternEngines[] = {"nfa", "algebra", "petri"};

inline plugin::PluginLoader& loader() {
  static plugin::PluginLoader* instance =
      new plugin::PluginLoader({CEPBUS_FUZZ_PLUGIN_DIR});  // never freed: see above
  return *instance;
}

// The plugin of `engine`; aborts when it cannot be loaded, since a harness
// without its engines would fuzz nothing and report success.
inline const plugin::Plugin& enginePlugin(std::string_view engine) {
  static std::vector<plugin::PluginPtr>* keep = new std::vector<plugin::PluginPtr>();
  Result<plugin::PluginPtr> p = loader().load(engine);
  if (!p) {
    std::fprintf(stderr, "fuzz: cannot load plugin %.*s: %s\n", static_cast<int>(engine.size()),
                 engine.data(), p.status().message().c_str());
    std::abort();
  }
  keep->push_back(*p);
  return **p;
}

struct Engine {
  std::string_view name;
  const plugin::Plugin* plugin;
};

// nfa, algebra and petri, loaded on first use.
inline const std::vector<Engine>& patternEngines() {
  static const std::vector<Engine>* engines = [] {
    auto* e = new std::vector<Engine>();
    for (std::string_view name : kPatternEngines) e->push_back({name, &enginePlugin(name)});
    return e;
  }();
  return *engines;
}

// A folder of this process, made on first use: in /dev/shm when there is
// one, since the journal target syncs files thousands of times a second and
// the disk is shared; else under the temp dir.
inline const std::filesystem::path& tempDir() {
  static const std::filesystem::path* dir = [] {
    std::error_code ec;
    const std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec)
                                           ? std::filesystem::path("/dev/shm")
                                           : std::filesystem::temp_directory_path();
    auto* d = new std::filesystem::path(base / ("cepbus-fuzz-" + std::to_string(::getpid())));
    std::filesystem::create_directories(*d);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(tempDir(), ignored);
    });
    return d;
  }();
  return *dir;
}

// Aborts with `what` when `ok` is false: a broken invariant is a crash the
// fuzzer records, with its input.
inline void check(bool ok, const char* what, std::string_view detail = {}) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant broken: %s %.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

}  // namespace cepbus::fuzz
