#include "services/http/stats_json.h"

#include <cmath>
#include <cstdint>
#include <string>

namespace cepbus::services::http {

nlohmann::json jsonNumber(double value) {
  // Within ±2^53 a double holds every integer exactly.
  constexpr double kExact = 9007199254740992.0;
  if (std::trunc(value) == value && std::fabs(value) <= kExact) {
    return static_cast<int64_t>(value);
  }
  return value;
}

nlohmann::json metricsJson(const stats::ScopeSnapshot& scope) {
  nlohmann::json out = nlohmann::json::object();
  for (const stats::MetricValue& metric : scope.metrics) {
    if (metric.kind != stats::MetricKind::kHistogram) {
      out[metric.name] = jsonNumber(metric.value);
      continue;
    }
    const stats::HistogramSummary& s = metric.summary;
    auto ms = [](uint64_t ns) { return static_cast<double>(ns) / 1e6; };
    out[metric.name + "_ms"] = nlohmann::json{{"count", s.count},
                                              {"p50", ms(s.p50_ns)},
                                              {"p90", ms(s.p90_ns)},
                                              {"p99", ms(s.p99_ns)},
                                              {"max", ms(s.max_ns)}};
  }
  return out;
}

}  // namespace cepbus::services::http
