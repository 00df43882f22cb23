#pragma once

// The numbers a component keeps — Counter and Gauge here, Histogram in
// histogram.h — and the text that names them (MetricSpec, Schema).
//
// A component gets its metrics from a stats::Scope (store.h) once, when it is
// built, and keeps the references: counting is then one relaxed atomic add,
// with no lookup, no lock and no allocation. Each metric sits on a cache
// line of its own, so metrics bumped by different threads never share one.
//
// Names: one scheme for every family. A metric `what` of a scope of
// component `c` is the Prometheus family cepbus_<c>_<what>, with `_total`
// for a counter and `_seconds` for a histogram, and the key <what> (a
// histogram: <what>_ms) in the admin API's JSON.
//
// Thread-safety: every member of Counter and Gauge may be called from any
// thread; values are relaxed atomics, exact each, not a consistent set.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cepbus::stats {

inline constexpr size_t kCacheLine = 64;

enum class MetricKind : uint8_t {
  kCounter,    // only goes up (events, refusals)
  kGauge,      // goes up and down, or is set (a queue's length, a flag)
  kHistogram,  // a distribution of durations, in nanoseconds
};

// A metric's name, kind and help text: compile-time text (string literals).
// `name` is lower_snake_case; `help` is one sentence, shown as # HELP.
struct MetricSpec {
  std::string_view name;
  MetricKind kind = MetricKind::kCounter;
  std::string_view help;

  static constexpr MetricSpec counter(std::string_view name, std::string_view help) {
    return {name, MetricKind::kCounter, help};
  }
  static constexpr MetricSpec gauge(std::string_view name, std::string_view help) {
    return {name, MetricKind::kGauge, help};
  }
  static constexpr MetricSpec histogram(std::string_view name, std::string_view help) {
    return {name, MetricKind::kHistogram, help};
  }
};

// Every metric one kind of component reports: the families cepbus_<component>_*.
// Declared once, as constants beside the component (`metrics` views a
// static array).
struct Schema {
  std::string_view component;
  std::span<const MetricSpec> metrics;
};

// A scope's labels, in the order they are rendered: {{"flow", "st"}, ...}.
using Labels = std::vector<std::pair<std::string, std::string>>;

class alignas(kCacheLine) Counter {
 public:
  void inc() { add(1); }
  void add(uint64_t n) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class alignas(kCacheLine) Gauge {
 public:
  void set(int64_t v) { value_.store(v, std::memory_order_relaxed); }
  void add(int64_t n) { value_.fetch_add(n, std::memory_order_relaxed); }
  void sub(int64_t n) { value_.fetch_sub(n, std::memory_order_relaxed); }
  void inc() { add(1); }
  void dec() { sub(1); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

}  // namespace cepbus::stats
