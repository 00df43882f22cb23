#include "bus/host/descriptor/descriptor.h"

#include <algorithm>

namespace cepbus::descriptor {
namespace {

template <typename T>
const T* findByName(const std::vector<T>& items, std::string_view name) {
  auto it = std::find_if(items.begin(), items.end(), [&](const T& t) { return t.name == name; });
  return it == items.end() ? nullptr : &*it;
}

}  // namespace

std::string DescriptorError::toString() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line);
  return out + ": " + message;
}

std::string Location::toString() const {
  return line > 0 ? file + ":" + std::to_string(line) : file;
}

DescriptorError Location::error(std::string message) const {
  return DescriptorError{file, line, std::move(message)};
}

std::string_view logLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInformation:
      return "information";
    case LogLevel::kNotice:
      return "notice";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

std::string_view flowName(FlowKind flow) {
  switch (flow) {
    case FlowKind::kSt:
      return "st";
    case FlowKind::kSeda:
      return "seda";
    case FlowKind::kReliable:
      return "reliable";
  }
  return "?";
}

std::string_view qosName(Qos qos) {
  switch (qos) {
    case Qos::kBestEffort:
      return "best-effort";
    case Qos::kReliable:
      return "reliable";
  }
  return "?";
}

const Param* QuerySpec::option(std::string_view name) const { return findByName(options, name); }

const Param* ServiceUnit::param(std::string_view name) const { return findByName(params, name); }

const ServiceUnit* ServiceAssembly::unit(std::string_view name) const {
  return findByName(units, name);
}

std::filesystem::path ServiceAssembly::resolvePath(std::string_view path) const {
  std::filesystem::path p(path);
  if (p.is_absolute() || base_dir.empty()) return p;
  return base_dir / p;
}

const StageSpec* Descriptor::stage(std::string_view name) const { return findByName(stages, name); }

const ServiceAssembly* Descriptor::assembly(std::string_view name) const {
  return findByName(assemblies, name);
}

}  // namespace cepbus::descriptor
