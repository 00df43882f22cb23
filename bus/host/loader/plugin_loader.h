#pragma once

// Finding, loading and checking detector plugins (STYLE.md, "Plugin ABI").
//
// PluginLoader looks for `libcepbus_plugin_<name>.so` in its search paths, in
// order, dlopens the first it finds, calls `cepbus_plugin_info()` and checks
// the ABI version and the build tag exactly before anything else is called,
// then lets the plugin register its detector factories by engine name. Every
// failure is a Status naming the plugin, the file and the reason: no file in
// any search path (listing them), not loadable, a missing entry point, a
// wrong ABI version or build tag, a registration that failed.
//
// A Plugin is shared: each detector it creates holds a reference, so the
// library stays loaded while any of them is alive, even after the loader and
// every other reference are gone.

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/core/pattern/ast.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"
#include "bus/host/loader/guarded_detector.h"

namespace cepbus::plugin {

// The build tag the host was compiled with (CEPBUS_PLUGIN_BUILD_TAG).
const char* hostBuildTag();

// Why a plugin built with `plugin_tag` cannot be loaded by this host: both
// tags, the first part that differs, and what to rebuild it with.
std::string explainTagMismatch(std::string_view plugin_tag);

// A loaded plugin library and the factories it registered. Immutable after
// loading; safe to use from any thread (factories' create() is thread-safe).
class Plugin : public std::enable_shared_from_this<Plugin> {
 public:
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  const std::string& name() const { return name_; }
  const std::string& version() const { return version_; }
  const std::string& buildTag() const { return build_tag_; }
  const std::string& path() const { return path_; }
  // The engines it registered, sorted.
  std::vector<std::string> engines() const;
  // What `engine` says about its options (empty for an unknown engine).
  std::span<const OptionInfo> engineOptions(std::string_view engine) const;

  // DetectorFactory::notices() of `engine` for `query`; an exception from
  // the plugin becomes a notice saying so (none for an unknown engine).
  std::vector<std::string> notices(std::string_view engine, const pattern::Query& query) const;

  // A detector of `engine` for `query`, reporting to `sink` (which must
  // outlive it), behind the host's guard against exceptions (the guard
  // keeps this plugin loaded). Every option goes to the engine as it is:
  // the host's own, such as slack, are taken out before by the detection
  // host (bus/host/detection/), the one place that makes detectors for the
  // bus.
  Result<std::unique_ptr<GuardedDetector>> createDetector(std::string_view engine,
                                                          const pattern::Query& query,
                                                          const DetectorOptions& options,
                                                          MatchSink& sink) const;
  // A detector of `engine` running every query of `queries` at once (see
  // DetectorFactory::createMany), each match reported to `sink` with its
  // query's index. Options and guarding as for createDetector().
  Result<std::unique_ptr<GuardedDetector>> createManyDetectors(std::string_view engine,
                                                               std::span<const NamedQuery> queries,
                                                               const DetectorOptions& options,
                                                               MultiMatchSink& sink) const;

 private:
  friend class PluginLoader;
  struct Library;  // hides Poco::SharedLibrary from plugin authors
  Plugin();
  Result<std::unique_ptr<GuardedDetector>> createGuarded(
      std::string_view engine,
      const std::function<Result<std::unique_ptr<Detector>>(const DetectorFactory&)>& make) const;

  std::string name_;
  std::string version_;
  std::string build_tag_;
  std::string path_;
  std::unique_ptr<Library> library_;  // declared before factories_: unloaded after them
  std::map<std::string, std::unique_ptr<DetectorFactory>, std::less<>> factories_;
};

using PluginPtr = std::shared_ptr<const Plugin>;

// Thread-safe: load() may be called concurrently; a plugin is loaded once per
// loader and later calls return the same Plugin.
class PluginLoader {
 public:
  explicit PluginLoader(std::vector<std::string> search_paths);

  // The directories in $CEPBUS_PLUGIN_PATH (colon-separated), then
  // `<executable dir>/../lib/cepbus/plugins` (the install layout:
  // PREFIX/bin/cepbus), `<executable dir>/../plugins` and
  // `<executable dir>/../../plugins` (the build tree's `build/plugins` seen
  // from `build/bus/app/cepbus`).
  static std::vector<std::string> defaultSearchPaths();
  // "libcepbus_plugin_<name>.so".
  static std::string fileNameFor(std::string_view name);

  // Loads plugin `name` from the first search path that has its file, or the
  // library at `name` itself when it contains a '/'. NotFound when no search
  // path has it; InvalidArgument for a library that is not a usable plugin;
  // AlreadyExists when it registers an engine another loaded plugin provides.
  Result<PluginPtr> load(std::string_view name) EXCLUDES(mu_);

  const std::vector<std::string>& searchPaths() const { return search_paths_; }
  // Every plugin loaded so far, once each (a plugin reached by two names or
  // paths is one), whether the descriptor named it or a query's engine
  // needed it; ordered by library path.
  std::vector<PluginPtr> loaded() const EXCLUDES(mu_);

 private:
  // Called by load() with mu_ held: the engines of the plugins loaded
  // before are checked against the new one's.
  Result<PluginPtr> loadPath(const std::string& name, const std::string& path) REQUIRES(mu_);

  const std::vector<std::string> search_paths_;
  mutable Mutex mu_;
  std::map<std::string, PluginPtr, std::less<>> by_name_ GUARDED_BY(mu_);
  std::map<std::string, PluginPtr, std::less<>> by_path_ GUARDED_BY(mu_);
  std::map<std::string, PluginPtr, std::less<>> by_engine_ GUARDED_BY(mu_);
};

}  // namespace cepbus::plugin
