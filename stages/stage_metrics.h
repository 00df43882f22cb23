#pragma once

// Per-stage metrics: monotonic counters and an HDR-style latency histogram.
//
// Recording is lock-free (relaxed atomics) because it happens on the data
// path of every item; reading is a snapshot that may be slightly torn across
// counters (each counter is exact, their sum at one instant is not), which
// is what an admin API or a Prometheus scrape needs.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "stages/stage_types.h"

namespace cepbus::stages {

// Percentiles of a latency distribution, in nanoseconds. Each percentile is
// the upper bound of the histogram bucket holding it (at most 1/16 = 6.25%
// above the true value); max and mean are exact.
struct LatencySummary {
  uint64_t count = 0;
  uint64_t p50_ns = 0;
  uint64_t p90_ns = 0;
  uint64_t p99_ns = 0;
  uint64_t max_ns = 0;
  double mean_ns = 0;
};

// A log-bucketed histogram of non-negative integers (nanoseconds here):
// values below 32 have exact buckets; above, each power of two is split into
// 16 linear sub-buckets, so the relative error is bounded by 1/16 over the
// whole 64-bit range with a fixed 976-bucket array.
//
// Thread-safety: record() may run concurrently from any number of threads
// (relaxed atomics: one bucket increment and one sum per value); readers
// concurrent with record() see each value either fully or partly counted
// (bucket before sum), never lost.
class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 4;
  static constexpr uint64_t kSubBuckets = uint64_t{1} << kSubBucketBits;
  static constexpr size_t kBucketCount = (64 - kSubBucketBits + 1) * kSubBuckets;

  void record(uint64_t value);
  void recordDuration(std::chrono::nanoseconds d) { record(d.count() < 0 ? 0 : d.count()); }

  // Sums the buckets: the count is not kept apart to spare record() an atomic.
  uint64_t count() const;
  uint64_t max() const { return max_.load(std::memory_order_relaxed); }
  // The smallest bucket upper bound below which at least `q` (0..1] of the
  // recorded values lie; 0 when nothing was recorded.
  uint64_t percentile(double q) const;
  LatencySummary summary() const;
  void reset();

  // Exposed for tests: the bucket a value falls in and the largest value of a bucket.
  static size_t bucketOf(uint64_t value);
  static uint64_t bucketUpperBound(size_t bucket);

 private:
  std::array<std::atomic<uint64_t>, kBucketCount> buckets_{};
  std::atomic<uint64_t> sum_{0};
  std::atomic<uint64_t> max_{0};
};

// What a stage reports to the registry and the admin API.
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
  LatencySummary latency;
};

// The live counters a stage updates. Thread-safety: every member is an
// atomic updated with relaxed ordering; nothing here orders other memory.
// Producer-side and worker-side counters live on separate cache lines, so a
// producer thread and a worker thread do not bounce one line per item.
struct StageMetrics {
  static constexpr size_t kCacheLine = 64;

  // Updated by offer(), off its fast path (the queue counts what it accepts).
  alignas(kCacheLine) std::atomic<uint64_t> rejected{0};
  std::atomic<uint64_t> degraded{0};
  std::atomic<uint64_t> ran_inline{0};
  // Updated by workers.
  alignas(kCacheLine) std::atomic<uint64_t> processed{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> backpressure_waits{0};
  std::atomic<uint64_t> busy_ns{0};  // handler time summed over workers (resource controller)
  alignas(kCacheLine) LatencyHistogram latency;

  static void add(std::atomic<uint64_t>& counter, uint64_t n) {
    counter.fetch_add(n, std::memory_order_relaxed);
  }
  static uint64_t read(const std::atomic<uint64_t>& counter) {
    return counter.load(std::memory_order_relaxed);
  }
};

}  // namespace cepbus::stages
