#include "bus/host/loader/plugin_loader.h"

#include <Poco/Exception.h>
#include <Poco/SharedLibrary.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <system_error>

#include "bus/core/plugin/plugin_abi.h"

namespace cepbus::plugin {
namespace fs = std::filesystem;

const char* hostBuildTag() { return CEPBUS_PLUGIN_BUILD_TAG; }

struct Plugin::Library {
  Poco::SharedLibrary lib;
};

Plugin::Plugin() : library_(std::make_unique<Library>()) {}

Plugin::~Plugin() {
  // The factories' code lives in the library: destroy them first.
  factories_.clear();
  if (library_->lib.isLoaded()) library_->lib.unload();
}

std::span<const OptionInfo> Plugin::engineOptions(std::string_view engine) const {
  auto it = factories_.find(engine);
  if (it == factories_.end()) return {};
  return it->second->options();
}

std::vector<std::string> Plugin::notices(std::string_view engine,
                                         const pattern::Query& query) const {
  auto it = factories_.find(engine);
  if (it == factories_.end()) return {};
  try {
    return it->second->notices(query);
  } catch (const std::exception& e) {
    return {"engine '" + std::string(engine) + "' failed to describe the query: " + e.what()};
  } catch (...) {
    return {"engine '" + std::string(engine) + "' failed to describe the query"};
  }
}

std::vector<std::string> Plugin::engines() const {
  std::vector<std::string> out;
  for (const auto& [engine, factory] : factories_) out.push_back(engine);
  return out;
}

namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

Result<std::unique_ptr<GuardedDetector>> Plugin::createDetector(std::string_view engine,
                                                                const pattern::Query& query,
                                                                const DetectorOptions& options,
                                                                MatchSink& sink) const {
  return createGuarded(
      engine, [&](const DetectorFactory& factory) { return factory.create(query, options, sink); });
}

Result<std::unique_ptr<GuardedDetector>> Plugin::createManyDetectors(
    std::string_view engine, std::span<const NamedQuery> queries, const DetectorOptions& options,
    MultiMatchSink& sink) const {
  return createGuarded(engine, [&](const DetectorFactory& factory) {
    return factory.createMany(queries, options, sink);
  });
}

Result<std::unique_ptr<GuardedDetector>> Plugin::createGuarded(
    std::string_view engine,
    const std::function<Result<std::unique_ptr<Detector>>(const DetectorFactory&)>& make) const {
  auto it = factories_.find(engine);
  if (it == factories_.end()) {
    return Status::notFound("plugin '" + name_ + "' (" + path_ + ") has no engine '" +
                            std::string(engine) + "'; it provides: " + joined(engines()));
  }
  std::unique_ptr<Detector> detector;
  try {
    auto made = make(*it->second);
    if (!made) return made.status();
    detector = std::move(made).value();
  } catch (const std::exception& e) {
    return Status::internal("engine '" + std::string(engine) +
                            "' threw while creating a detector: " + e.what());
  } catch (...) {
    return Status::internal("engine '" + std::string(engine) +
                            "' threw an unknown exception while creating a detector");
  }
  return std::make_unique<GuardedDetector>("engine '" + std::string(engine) + "' detector",
                                           shared_from_this(), std::move(detector));
}

PluginLoader::PluginLoader(std::vector<std::string> search_paths)
    : search_paths_(std::move(search_paths)) {}

std::vector<std::string> PluginLoader::defaultSearchPaths() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("CEPBUS_PLUGIN_PATH")) {
    std::string_view rest(env);
    while (!rest.empty()) {
      const size_t colon = rest.find(':');
      const std::string_view dir = rest.substr(0, colon);
      if (!dir.empty()) paths.emplace_back(dir);
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // An installed cepbus: PREFIX/bin/cepbus and PREFIX/lib/cepbus/plugins.
    paths.push_back(
        (exe.parent_path() / ".." / CEPBUS_INSTALL_PLUGIN_DIR).lexically_normal().string());
    paths.push_back((exe.parent_path() / ".." / "plugins").lexically_normal().string());
    paths.push_back((exe.parent_path() / ".." / ".." / "plugins").lexically_normal().string());
  }
  return paths;
}

std::string PluginLoader::fileNameFor(std::string_view name) {
  return "libcepbus_plugin_" + std::string(name) + ".so";
}

Result<PluginPtr> PluginLoader::load(std::string_view name) {
  if (name.empty()) return Status::invalidArgument("empty plugin name");
  MutexLock lock(mu_);
  if (auto it = by_name_.find(name); it != by_name_.end()) return it->second;

  std::string path;
  if (name.find('/') != std::string_view::npos) {
    path = std::string(name);
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) {
      return Status::notFound("plugin library '" + path + "' does not exist");
    }
  } else {
    const std::string file = fileNameFor(name);
    for (const std::string& dir : search_paths_) {
      std::error_code ec;
      const fs::path candidate = fs::path(dir) / file;
      if (fs::is_regular_file(candidate, ec)) {
        path = candidate.string();
        break;
      }
    }
    if (path.empty()) {
      return Status::notFound("plugin '" + std::string(name) + "' not found: no " + file +
                              " in the search path [" + joined(search_paths_) + "]");
    }
  }
  std::error_code ec;
  const std::string canonical = fs::weakly_canonical(path, ec).string();
  const std::string key = ec ? path : canonical;
  if (auto it = by_path_.find(key); it != by_path_.end()) {
    by_name_.emplace(std::string(name), it->second);
    return it->second;
  }
  auto loaded = loadPath(std::string(name), path);
  if (!loaded) return loaded;
  by_name_.emplace(std::string(name), *loaded);
  by_path_.emplace(key, *loaded);
  for (const std::string& engine : (*loaded)->engines()) by_engine_.emplace(engine, *loaded);
  return loaded;
}

std::vector<PluginPtr> PluginLoader::loaded() const {
  MutexLock lock(mu_);
  std::vector<PluginPtr> out;
  out.reserve(by_path_.size());
  for (const auto& [path, plugin] : by_path_) out.push_back(plugin);
  return out;
}

namespace {

// What the host-side registrar callbacks fill in. The callbacks are called
// from plugin code, so they must not throw.
struct Registration {
  std::map<std::string, std::unique_ptr<DetectorFactory>, std::less<>> factories;
  std::string error;
};

int addFactory(void* host, const char* engine, void* factory) noexcept {
  auto* reg = static_cast<Registration*>(host);
  std::unique_ptr<DetectorFactory> owned(static_cast<DetectorFactory*>(factory));
  try {
    if (engine == nullptr || *engine == '\0' || owned == nullptr) {
      reg->error = "registered a factory without an engine name or object";
      return 1;
    }
    if (reg->factories.count(engine) != 0) {
      reg->error = "registered engine '" + std::string(engine) + "' twice";
      return 1;
    }
    reg->factories.emplace(engine, std::move(owned));
    return 0;
  } catch (...) {
    return 1;
  }
}

void setError(void* host, const char* message) noexcept {
  try {
    // A refusal the host recorded itself says more than the plugin's echo of it.
    auto* reg = static_cast<Registration*>(host);
    if (reg->error.empty()) reg->error = message != nullptr ? message : "";
  } catch (...) {
  }
}

}  // namespace

std::string explainTagMismatch(std::string_view plugin_tag) {
  // Tags are "compiler; stdlib; sanitizers: ...; cepbus X": naming the first
  // part that differs tells the author what to change.
  static constexpr const char* kParts[] = {"compiler", "C++ standard library", "sanitizers",
                                           "cepbus version"};
  auto split = [](std::string_view tag) {
    std::vector<std::string_view> parts;
    while (true) {
      const size_t semi = tag.find("; ");
      parts.push_back(tag.substr(0, semi));
      if (semi == std::string_view::npos) break;
      tag.remove_prefix(semi + 2);
    }
    return parts;
  };
  const std::string_view host_tag = hostBuildTag();
  const auto mine = split(host_tag);
  const auto theirs = split(plugin_tag);
  std::string which;
  for (size_t i = 0; i < mine.size() && i < std::size(kParts); ++i) {
    if (i >= theirs.size() || theirs[i] != mine[i]) {
      which = std::string(kParts[i]) + " differs: the plugin has '" +
              std::string(i < theirs.size() ? theirs[i] : "") + "', the host '" +
              std::string(mine[i]) + "'; ";
      break;
    }
  }
  return "built for another host: plugin build tag '" + std::string(plugin_tag) +
         "', host build tag '" + std::string(host_tag) + "'; " + which +
         "C++ objects cross the plugin boundary, so a plugin must be built with the host's "
         "compiler, standard library and sanitizers against the headers of its cepbus version: "
         "rebuild it against the cepbus " CEPBUS_VERSION " SDK (find_package(cepbus " CEPBUS_VERSION
         " EXACT)) with that compiler";
}

Result<PluginPtr> PluginLoader::loadPath(const std::string& name, const std::string& path) {
  std::shared_ptr<Plugin> plugin(new Plugin());
  plugin->path_ = path;
  Poco::SharedLibrary& lib = plugin->library_->lib;
  const std::string what = "plugin '" + name + "' (" + path + ")";
  try {
    lib.load(path, Poco::SharedLibrary::SHLIB_LOCAL);
  } catch (const Poco::Exception& e) {
    return Status::invalidArgument(what + ": cannot load the library: " + e.displayText());
  }
  if (!lib.hasSymbol(CEPBUS_PLUGIN_INFO_SYMBOL)) {
    return Status::invalidArgument(what + ": missing the entry point " CEPBUS_PLUGIN_INFO_SYMBOL
                                          "(); not a cepbus plugin");
  }
  auto info_fn = reinterpret_cast<CepbusPluginInfoFn>(lib.getSymbol(CEPBUS_PLUGIN_INFO_SYMBOL));
  const CepbusPluginInfo* info = info_fn();
  if (info == nullptr) {
    return Status::invalidArgument(what + ": " CEPBUS_PLUGIN_INFO_SYMBOL "() returned null");
  }
  if (info->abi_version != CEPBUS_PLUGIN_ABI_VERSION) {
    return Status::invalidArgument(what + ": plugin ABI version " +
                                   std::to_string(info->abi_version) + ", the host expects " +
                                   std::to_string(CEPBUS_PLUGIN_ABI_VERSION));
  }
  const std::string tag = info->build_tag != nullptr ? info->build_tag : "";
  if (tag != hostBuildTag()) return Status::invalidArgument(what + ": " + explainTagMismatch(tag));
  plugin->name_ = info->name != nullptr ? info->name : name;
  plugin->version_ = info->version != nullptr ? info->version : "";
  plugin->build_tag_ = tag;
  if (!lib.hasSymbol(CEPBUS_PLUGIN_REGISTER_SYMBOL)) {
    return Status::invalidArgument(what + ": missing the entry point " CEPBUS_PLUGIN_REGISTER_SYMBOL
                                          "()");
  }
  auto register_fn =
      reinterpret_cast<CepbusPluginRegisterFn>(lib.getSymbol(CEPBUS_PLUGIN_REGISTER_SYMBOL));
  Registration reg;
  CepbusPluginRegistrar registrar{&reg, &addFactory, &setError};
  int rc = 1;
  try {
    rc = register_fn(&registrar);
  } catch (const std::exception& e) {
    reg.error = std::string("exception escaped the entry point: ") + e.what();
  } catch (...) {
    reg.error = "an exception escaped the entry point";
  }
  if (rc != 0) {
    return Status::invalidArgument(
        what + ": registration failed: " + (reg.error.empty() ? "no reason given" : reg.error));
  }
  if (reg.factories.empty()) {
    return Status::invalidArgument(what + ": registered no detector factory");
  }
  for (const auto& [engine, factory] : reg.factories) {
    if (auto it = by_engine_.find(engine); it != by_engine_.end()) {
      return Status::alreadyExists(what + ": engine '" + engine + "' is already provided by " +
                                   it->second->path());
    }
  }
  plugin->factories_ = std::move(reg.factories);
  return PluginPtr(std::move(plugin));
}

}  // namespace cepbus::plugin
