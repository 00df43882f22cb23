#pragma once

// The bus's numbers in the Prometheus text exposition format (0.0.4).
//
// renderPrometheus() renders any stats store (bus/base/stats/): every
// declared family gets `# HELP` and `# TYPE` lines, even when it has no
// samples, so a scraper sees the same set of families from the first scrape
// on; then a sample per live scope that has the metric, labelled with the
// scope's labels. A metric `what` of component `c` is the family
// cepbus_<c>_<what>: a counter with `_total`, a gauge as it is, a histogram
// as a summary `_seconds` (quantiles 0.5, 0.9 and 0.99, `_sum`, `_count`).
//
// renderMetrics() is one scrape of a bus: its registry's store.

#include <string>
#include <string_view>

#include "bus/base/stats/store.h"
#include "router/registry.h"

namespace cepbus::services::http {

// The Content-Type of the rendered text.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// A label value escaped as the exposition format asks: backslash, double
// quote and line feed become \\, \" and \n.
std::string escapeLabelValue(std::string_view value);

// Thread-safety: may be called from any thread (it reads the store).
std::string renderPrometheus(const stats::Store& store);

// One scrape of the bus. Thread-safety: may be called from any thread; the
// registry must outlive the call.
std::string renderMetrics(const router::Registry& registry);

}  // namespace cepbus::services::http
