#pragma once

// ServiceFactoryRegistry: service factories by unit type, as Envoy registers
// extensions by name. An unknown type is a lookup miss (nullptr), never a crash.
//
// Thread-safety: filled at start-up, then read-only and safe from any thread.

#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/status.h"
#include "services/service.h"

namespace cepbus::services {

class ServiceFactoryRegistry {
 public:
  // AlreadyExists when a factory of the same type is registered.
  Status add(std::unique_ptr<ServiceFactory> factory);
  const ServiceFactory* find(std::string_view type) const;
  std::vector<std::string> types() const;

 private:
  std::map<std::string, std::unique_ptr<ServiceFactory>, std::less<>> factories_;
};

// OK when every param of `unit` is one of `known`; else InvalidArgument
// naming the first other one's file:line and the params a `type` unit takes.
Status checkParamNames(const descriptor::ServiceUnit& unit, std::string_view type,
                       std::initializer_list<std::string_view> known);

// The param `name` of a `type` unit; InvalidArgument naming the unit's
// file:line when it is absent.
Result<const descriptor::Param*> requiredParam(const descriptor::ServiceUnit& unit,
                                               std::string_view type, std::string_view name);

// Reads a service unit's numeric param: the default when absent,
// InvalidArgument naming file:line when present but not a number in [min, max].
Result<double> numberParam(const descriptor::ServiceUnit& unit, std::string_view name,
                           double default_value, double min, double max);

}  // namespace cepbus::services
