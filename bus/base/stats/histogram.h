#pragma once

// Histogram: a distribution of durations, in nanoseconds, and its summary
// (count, percentiles, max, mean) for the renderers and the components that
// act on it.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "bus/base/stats/metric.h"

namespace cepbus::stats {

// Percentiles of a distribution, in nanoseconds. Each percentile is the
// upper bound of the histogram bucket holding it (at most 1/16 = 6.25%
// above the true value); max and mean are exact.
struct HistogramSummary {
  uint64_t count = 0;
  uint64_t p50_ns = 0;
  uint64_t p90_ns = 0;
  uint64_t p99_ns = 0;
  uint64_t max_ns = 0;
  double mean_ns = 0;
};

// A log-bucketed histogram of non-negative integers: values below 32 have
// exact buckets; above, each power of two is split into 16 linear
// sub-buckets, so the relative error is bounded by 1/16 over the whole
// 64-bit range with a fixed 976-bucket array.
//
// Thread-safety: record() may run concurrently from any number of threads
// (relaxed atomics: one bucket increment and one sum per value); readers
// concurrent with record() see each value either fully or partly counted
// (bucket before sum), never lost.
class alignas(kCacheLine) Histogram {
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
  HistogramSummary summary() const;
  void reset();

  // Exposed for tests: the bucket a value falls in and the largest value of a bucket.
  static size_t bucketOf(uint64_t value);
  static uint64_t bucketUpperBound(size_t bucket);

 private:
  std::array<std::atomic<uint64_t>, kBucketCount> buckets_{};
  std::atomic<uint64_t> sum_{0};
  std::atomic<uint64_t> max_{0};
};

}  // namespace cepbus::stats
