#include "bus/base/stats/histogram.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace cepbus::stats {
namespace {

TEST(HistogramTest, SmallValuesHaveExactBuckets) {
  for (uint64_t v = 0; v < 32; ++v) {
    EXPECT_EQ(Histogram::bucketOf(v), v);
    EXPECT_EQ(Histogram::bucketUpperBound(v), v);
  }
}

TEST(HistogramTest, BucketsAreContiguousWithBoundedRelativeWidth) {
  std::vector<uint64_t> values;
  for (int bit = 5; bit < 64; ++bit) {
    const uint64_t p = uint64_t{1} << bit;
    for (uint64_t v : {p - 1, p, p + 1, p + p / 3, p + p / 2 + 7}) values.push_back(v);
  }
  values.push_back(std::numeric_limits<uint64_t>::max());
  for (uint64_t v : values) {
    const size_t b = Histogram::bucketOf(v);
    ASSERT_LT(b, Histogram::kBucketCount) << v;
    const uint64_t upper = Histogram::bucketUpperBound(b);
    const uint64_t lower = Histogram::bucketUpperBound(b - 1) + 1;
    EXPECT_LE(lower, v) << v;
    EXPECT_GE(upper, v) << v;
    EXPECT_LE(static_cast<double>(upper - lower + 1), static_cast<double>(lower) / 16.0 + 1) << v;
  }
  EXPECT_EQ(Histogram::bucketOf(std::numeric_limits<uint64_t>::max()), Histogram::kBucketCount - 1);
}

TEST(HistogramTest, PercentilesWithinOneBucketOfTruth) {
  Histogram h;
  for (uint64_t v = 1; v <= 1000; ++v) h.record(v);
  const HistogramSummary s = h.summary();
  EXPECT_EQ(s.count, 1000u);
  EXPECT_EQ(s.max_ns, 1000u);
  EXPECT_DOUBLE_EQ(s.mean_ns, 500.5);
  EXPECT_GE(s.p50_ns, 500u);
  EXPECT_LE(s.p50_ns, 500u + 500u / 16);
  EXPECT_GE(s.p90_ns, 900u);
  EXPECT_LE(s.p90_ns, 900u + 900u / 16);
  EXPECT_GE(s.p99_ns, 990u);
  EXPECT_LE(s.p99_ns, 1000u);  // clamped to the exact max
  EXPECT_EQ(h.percentile(1.0), 1000u);
}

TEST(HistogramTest, SkewedDistribution) {
  Histogram h;
  for (int i = 0; i < 98; ++i) h.record(100);
  h.record(1'000'000);
  h.record(5'000'000);
  // 100 lies in the bucket [100, 103]; percentiles report its upper bound.
  EXPECT_EQ(h.percentile(0.5), 103u);
  EXPECT_EQ(h.percentile(0.98), 103u);
  EXPECT_GE(h.percentile(0.99), 1'000'000u);
  EXPECT_LE(h.percentile(0.99), 1'000'000u + 1'000'000u / 16);
  EXPECT_EQ(h.max(), 5'000'000u);
}

TEST(HistogramTest, EmptyAndReset) {
  Histogram h;
  EXPECT_EQ(h.percentile(0.5), 0u);
  EXPECT_EQ(h.summary().count, 0u);
  h.recordDuration(std::chrono::microseconds(3));
  h.recordDuration(std::chrono::nanoseconds(-5));  // clock skew is recorded as 0
  EXPECT_EQ(h.count(), 2u);
  EXPECT_EQ(h.max(), 3000u);
  EXPECT_EQ(h.percentile(0.5), 0u);
  h.reset();
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_EQ(h.percentile(0.99), 0u);
}

}  // namespace
}  // namespace cepbus::stats
