#include "bus/host/time/time_buckets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

namespace cepbus::plugin {
namespace {

// An event at `ts` whose type names its arrival, so order can be checked.
EventPtr arrival(Timestamp ts, int n) {
  return EventBuilder("e" + std::to_string(n)).at(ts).build();
}

using Seen = std::vector<std::pair<Timestamp, std::string>>;

Seen seen(const std::vector<EventPtr>& events) {
  Seen out;
  for (const EventPtr& e : events) out.emplace_back(e->ts(), std::string(e->type().name()));
  return out;
}

TEST(TimeBucketsTest, ReleasesUpToATimeInTimestampThenArrivalOrder) {
  TimeBuckets b(10);
  b.push(arrival(7, 0));
  b.push(arrival(3, 1));
  b.push(arrival(7, 2));
  b.push(arrival(5, 3));
  std::vector<EventPtr> out;
  b.releaseUpTo(6, out);
  EXPECT_EQ(seen(out), (Seen{{3, "e1"}, {5, "e3"}}));
  EXPECT_EQ(b.size(), 2u);
  b.push(arrival(12, 4));
  out.clear();
  b.releaseAll(out);
  EXPECT_EQ(seen(out), (Seen{{7, "e0"}, {7, "e2"}, {12, "e4"}}));
  EXPECT_EQ(b.size(), 0u);
}

// Events pushed and released as the reorder buffer does (each within the
// span after the last release, releases moving up), against a stable sort of
// the same events: for spans with a bucket per timestamp and wider buckets,
// negative timestamps, and jumps far beyond the ring.
TEST(TimeBucketsTest, MatchesAStableSortForEverySpanAndJump) {
  for (Timestamp span : {0, 1, 5, 63, 64, 100, 8191, 8192, 100000, 10000000}) {
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      std::mt19937_64 rng(seed * 7919 + static_cast<uint64_t>(span));
      TimeBuckets b(span);
      Timestamp newest = -5000;
      // What b holds, in timestamp then arrival order (a stable sort, kept
      // by inserting after the equal ones).
      std::vector<std::pair<Timestamp, int>> pending;
      const auto release = [&](auto end) {
        Seen expected;
        for (auto it = pending.begin(); it != end; ++it) {
          expected.emplace_back(it->first, "e" + std::to_string(it->second));
        }
        pending.erase(pending.begin(), end);
        return expected;
      };
      std::vector<EventPtr> out;
      for (int n = 0; n < 3000; ++n) {
        if (rng() % 50 == 0) newest += static_cast<Timestamp>(rng() % 1000000);  // a jump
        newest += static_cast<Timestamp>(rng() % 3);
        const Timestamp floor = newest - span;
        // Release up to the watermark first, as the reorder buffer does.
        const Seen expected = release(std::find_if(
            pending.begin(), pending.end(), [&](const auto& p) { return p.first > floor - 1; }));
        out.clear();
        b.releaseUpTo(floor - 1, out);
        ASSERT_EQ(seen(out), expected) << "span " << span << " seed " << seed << " n " << n;
        const Timestamp ts = floor + static_cast<Timestamp>(rng() % (span + 1));
        b.push(arrival(ts, n));
        pending.insert(std::upper_bound(pending.begin(), pending.end(), ts,
                                        [](Timestamp t, const auto& p) { return t < p.first; }),
                       {ts, n});
        ASSERT_EQ(b.size(), pending.size());
      }
      const Seen rest = release(pending.end());
      out.clear();
      b.releaseAll(out);
      EXPECT_EQ(seen(out), rest) << "span " << span << " seed " << seed;
      EXPECT_EQ(b.size(), 0u);
    }
  }
}

}  // namespace
}  // namespace cepbus::plugin
