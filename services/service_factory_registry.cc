#include "services/service_factory_registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace cepbus::services {

Status ServiceFactoryRegistry::add(std::unique_ptr<ServiceFactory> factory) {
  std::string type(factory->type());
  if (factories_.contains(type)) {
    return Status::alreadyExists("a service factory of type \"" + type +
                                 "\" is already registered");
  }
  factories_.emplace(std::move(type), std::move(factory));
  return Status::ok();
}

const ServiceFactory* ServiceFactoryRegistry::find(std::string_view type) const {
  auto it = factories_.find(type);
  return it == factories_.end() ? nullptr : it->second.get();
}

std::vector<std::string> ServiceFactoryRegistry::types() const {
  std::vector<std::string> out;
  for (const auto& [type, factory] : factories_) out.push_back(type);
  return out;
}

Status checkParamNames(const descriptor::ServiceUnit& unit, std::string_view type,
                       std::initializer_list<std::string_view> known) {
  for (const auto& p : unit.params) {
    if (std::find(known.begin(), known.end(), p.name) != known.end()) continue;
    std::string expected;
    for (std::string_view k : known) expected += (expected.empty() ? "" : ", ") + std::string(k);
    return Status::invalidArgument(p.where
                                       .error(std::string(type) + ": unknown param \"" + p.name +
                                              "\" (expected " + expected + ")")
                                       .toString());
  }
  return Status::ok();
}

Result<const descriptor::Param*> requiredParam(const descriptor::ServiceUnit& unit,
                                               std::string_view type, std::string_view name) {
  if (const descriptor::Param* p = unit.param(name)) return p;
  return Status::invalidArgument(unit.where
                                     .error(std::string(type) + " \"" + unit.name +
                                            "\": missing <param name=\"" + std::string(name) +
                                            "\">")
                                     .toString());
}

Result<double> numberParam(const descriptor::ServiceUnit& unit, std::string_view name,
                           double default_value, double min, double max) {
  const descriptor::Param* p = unit.param(name);
  if (p == nullptr) return default_value;
  double v = 0;
  const char* first = p->value.data();
  const char* last = first + p->value.size();
  auto [end, ec] = std::from_chars(first, last, v);
  if (ec != std::errc() || end != last || !std::isfinite(v) || v < min || v > max) {
    return Status::invalidArgument(
        p->where
            .error("<param name=\"" + p->name + "\">: expected a number in [" +
                   std::to_string(min) + ", " + std::to_string(max) + "], got \"" + p->value + "\"")
            .toString());
  }
  return v;
}

}  // namespace cepbus::services
