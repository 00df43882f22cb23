#pragma once

// Reading one number of a stats store (bus/base/stats/store.h) in a test.

#include <optional>
#include <string_view>

#include "bus/base/stats/store.h"

namespace cepbus::testing {

// The value of metric `name` in the oldest live scope of `component` that
// carries every label of `labels`; nullopt when there is no such scope or
// metric.
inline std::optional<double> statValue(const stats::Store& store, std::string_view component,
                                       const stats::Labels& labels, std::string_view name) {
  for (const stats::ScopeSnapshot& scope : store.scopes(component)) {
    bool matches = true;
    for (const auto& [key, value] : labels) matches = matches && scope.label(key) == value;
    if (!matches) continue;
    const stats::MetricValue* metric = scope.find(name);
    if (metric == nullptr) return std::nullopt;
    return metric->value;
  }
  return std::nullopt;
}

}  // namespace cepbus::testing
