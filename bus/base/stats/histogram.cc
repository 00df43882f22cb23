#include "bus/base/stats/histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace cepbus::stats {

size_t Histogram::bucketOf(uint64_t value) {
  // Values below 2 * kSubBuckets index themselves; above, the bucket is
  // (magnitude, top kSubBucketBits bits below the leading one).
  if (value < 2 * kSubBuckets) return static_cast<size_t>(value);
  const int msb = 63 - std::countl_zero(value);
  const int shift = msb - kSubBucketBits;
  const uint64_t sub = (value >> shift) & (kSubBuckets - 1);
  return static_cast<size_t>((static_cast<uint64_t>(shift) + 1) * kSubBuckets + sub);
}

uint64_t Histogram::bucketUpperBound(size_t bucket) {
  if (bucket < 2 * kSubBuckets) return bucket;
  const uint64_t shift = bucket / kSubBuckets - 1;
  const uint64_t sub = bucket % kSubBuckets;
  const uint64_t low = (kSubBuckets + sub) << shift;
  return low + ((uint64_t{1} << shift) - 1);
}

void Histogram::record(uint64_t value) {
  buckets_[bucketOf(value)].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(value, std::memory_order_relaxed);
  uint64_t seen = max_.load(std::memory_order_relaxed);
  while (value > seen && !max_.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

uint64_t Histogram::count() const {
  uint64_t total = 0;
  for (const auto& b : buckets_) total += b.load(std::memory_order_relaxed);
  return total;
}

namespace {

using Buckets = std::array<uint64_t, Histogram::kBucketCount>;

// The bucket counts at one moment and their total, so that ranks and walks agree.
uint64_t snapshotOf(const std::array<std::atomic<uint64_t>, Histogram::kBucketCount>& from,
                    Buckets& to) {
  uint64_t total = 0;
  for (size_t b = 0; b < to.size(); ++b) {
    to[b] = from[b].load(std::memory_order_relaxed);
    total += to[b];
  }
  return total;
}

uint64_t percentileOf(const Buckets& buckets, uint64_t total, double q, uint64_t max) {
  if (total == 0) return 0;
  q = std::min(std::max(q, 0.0), 1.0);
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * total)));
  uint64_t seen = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    seen += buckets[b];
    if (seen >= rank) return std::min(Histogram::bucketUpperBound(b), max);
  }
  return max;
}

}  // namespace

uint64_t Histogram::percentile(double q) const {
  Buckets buckets;
  const uint64_t total = snapshotOf(buckets_, buckets);
  return percentileOf(buckets, total, q, max());
}

HistogramSummary Histogram::summary() const {
  Buckets buckets;
  HistogramSummary s;
  s.count = snapshotOf(buckets_, buckets);
  if (s.count == 0) return s;
  s.max_ns = max();
  s.p50_ns = percentileOf(buckets, s.count, 0.50, s.max_ns);
  s.p90_ns = percentileOf(buckets, s.count, 0.90, s.max_ns);
  s.p99_ns = percentileOf(buckets, s.count, 0.99, s.max_ns);
  s.mean_ns = static_cast<double>(sum_.load(std::memory_order_relaxed)) / s.count;
  return s;
}

void Histogram::reset() {
  for (auto& b : buckets_) b.store(0, std::memory_order_relaxed);
  sum_.store(0, std::memory_order_relaxed);
  max_.store(0, std::memory_order_relaxed);
}

}  // namespace cepbus::stats
