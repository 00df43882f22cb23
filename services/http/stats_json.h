#pragma once

// The stats store's numbers as the admin API's JSON: numbers are JSON
// numbers, keyed by the metric's name; a histogram (durations) is an object
// {count, p50, p90, p99, max} in milliseconds under "<name>_ms".

#include <nlohmann/json.hpp>

#include "bus/base/stats/store.h"

namespace cepbus::services::http {

// An integral value as a JSON integer, any other as a float.
nlohmann::json jsonNumber(double value);

// Every metric of `scope`, as one object: {"sent": 3, "latency_ms": {...}}.
nlohmann::json metricsJson(const stats::ScopeSnapshot& scope);

}  // namespace cepbus::services::http
