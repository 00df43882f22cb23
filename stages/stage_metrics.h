#pragma once

// A stage's numbers (P1: a stage is a named, measured object): the families
// it reports into its stats scope, the live metrics it counts into, and the
// plain copy Stage::metrics() returns.
//
// Recording is lock-free (relaxed atomics, each metric on its own cache
// line) because it happens on the data path of every item; reading is a
// snapshot that may be slightly torn across counters (each counter is exact,
// their sum at one instant is not), which is what an admin API or a
// Prometheus scrape needs.

#include <cstddef>
#include <cstdint>
#include <string>

#include "bus/base/stats/store.h"
#include "stages/stage_types.h"

namespace cepbus::stages {

// The families of the scope "stage", labels {flow, stage} (a stage outside a
// flow: {stage}).
namespace stage_stats {
using stats::MetricSpec;
inline constexpr MetricSpec kOffered =
    MetricSpec::counter("offered", "Items offered to the stage.");
inline constexpr MetricSpec kRanInline =
    MetricSpec::counter("ran_inline", "Items the idle stage handled on the offering thread.");
inline constexpr MetricSpec kProcessed =
    MetricSpec::counter("processed", "Items the stage's handler completed.");
inline constexpr MetricSpec kFailed =
    MetricSpec::counter("failed", "Items the handler failed or threw on.");
inline constexpr MetricSpec kRejected =
    MetricSpec::counter("rejected", "Items refused by admission control.");
inline constexpr MetricSpec kDegraded =
    MetricSpec::counter("degraded", "Items admitted while degraded.");
inline constexpr MetricSpec kBackpressureWaits = MetricSpec::counter(
    "backpressure_waits", "Times a worker paused its intake for a saturated downstream stage.");
inline constexpr MetricSpec kQueueLength =
    MetricSpec::gauge("queue_length", "Items waiting in the stage's queue.");
inline constexpr MetricSpec kCapacity =
    MetricSpec::gauge("capacity", "The stage queue's capacity.");
inline constexpr MetricSpec kThreads =
    MetricSpec::gauge("threads", "Worker threads the stage runs now.");
inline constexpr MetricSpec kMinThreads =
    MetricSpec::gauge("min_threads", "The fewest worker threads the stage runs.");
inline constexpr MetricSpec kMaxThreads =
    MetricSpec::gauge("max_threads", "The most worker threads the stage runs.");
inline constexpr MetricSpec kPressure = MetricSpec::gauge(
    "pressure", "What the stage shows upstream: 0 normal, 1 degraded, 2 saturated.");
inline constexpr MetricSpec kLatency =
    MetricSpec::histogram("latency", "Queueing plus service time of the items the stage handled.");
inline constexpr MetricSpec kAll[] = {
    kOffered,     kRanInline, kProcessed, kFailed,     kRejected,   kDegraded, kBackpressureWaits,
    kQueueLength, kCapacity,  kThreads,   kMinThreads, kMaxThreads, kPressure, kLatency};
}  // namespace stage_stats
inline constexpr stats::Schema kStageSchema{"stage", stage_stats::kAll};

// What a stage reports to the admin side.
// offered == enqueued + ran_inline + rejected; enqueued and ran_inline count
// degraded items too.
struct StageMetricsSnapshot {
  std::string name;
  uint64_t offered = 0;
  uint64_t enqueued = 0;
  uint64_t ran_inline = 0;  // handled on the offering thread (run_inline_when_idle)
  uint64_t processed = 0;   // handler returned OK
  uint64_t failed = 0;      // handler returned an error or threw
  uint64_t rejected = 0;
  uint64_t degraded = 0;
  uint64_t backpressure_waits = 0;  // times a worker paused for a saturated downstream
  size_t queue_length = 0;
  size_t capacity = 0;
  size_t threads = 0;
  size_t min_threads = 0;
  size_t max_threads = 0;
  Pressure pressure = Pressure::kNormal;
  // Queueing + service time of each handled item (offer to handler return).
  stats::HistogramSummary latency;
};

// The live metrics a stage counts into, taken from its scope. Thread-safety:
// as stats::Counter; nothing here orders other memory.
struct StageMetrics {
  explicit StageMetrics(stats::Scope& scope)
      : rejected(scope.counter(stage_stats::kRejected)),
        degraded(scope.counter(stage_stats::kDegraded)),
        ran_inline(scope.counter(stage_stats::kRanInline)),
        processed(scope.counter(stage_stats::kProcessed)),
        failed(scope.counter(stage_stats::kFailed)),
        backpressure_waits(scope.counter(stage_stats::kBackpressureWaits)),
        latency(scope.histogram(stage_stats::kLatency)) {}

  // Counted by offer() (the queue counts what it accepts).
  stats::Counter& rejected;
  stats::Counter& degraded;
  stats::Counter& ran_inline;
  // Counted by the workers.
  stats::Counter& processed;
  stats::Counter& failed;
  stats::Counter& backpressure_waits;
  stats::Histogram& latency;
};

}  // namespace cepbus::stages
