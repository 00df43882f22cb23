#include "bus/host/time/source_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <optional>
#include <random>

namespace cepbus::plugin {
namespace {

using std::chrono::milliseconds;

// A fake steady clock: the tests say what time it is.
const SourceClock::TimePoint kStart{std::chrono::hours(1)};
SourceClock::TimePoint at(int ms) { return kStart + milliseconds(ms); }

TEST(SourceClockTest, NoSourceHasNoEventTime) {
  SourceClock clock(milliseconds(100));
  EXPECT_EQ(clock.eventTime(at(0)), std::nullopt);
  EXPECT_TRUE(clock.allIdle(at(0)));
}

TEST(SourceClockTest, EventTimeIsTheSlowestLiveSource) {
  SourceClock clock(milliseconds(100));
  clock.heard(1, 50, at(0));
  clock.heard(2, 80, at(0));
  clock.heard(1, 60, at(10));
  clock.heard(1, 55, at(20));  // behind its own newest: the newest stays
  EXPECT_EQ(clock.eventTime(at(20)), 60);
  clock.heard(2, 90, at(30));
  EXPECT_EQ(clock.eventTime(at(30)), 60);
  EXPECT_EQ(clock.idleSources(at(30)), 0u);
}

TEST(SourceClockTest, AQuietSourceStopsHoldingBackAfterTheIdleTimeout) {
  SourceClock clock(milliseconds(100));
  clock.heard(1, 10, at(0));
  clock.heard(2, 500, at(0));
  clock.heard(2, 900, at(100));
  EXPECT_EQ(clock.eventTime(at(100)), 10);  // source 1 silent exactly the timeout: still live
  EXPECT_EQ(clock.eventTime(at(101)), 900);
  EXPECT_EQ(clock.idleSources(at(101)), 1u);
  // Heard again, it holds time back again.
  clock.heard(1, 700, at(150));
  EXPECT_EQ(clock.eventTime(at(150)), 700);
}

TEST(SourceClockTest, WhenAllAreIdleTheNewestOfAnyCounts) {
  SourceClock clock(milliseconds(100));
  clock.heard(1, 10, at(0));
  clock.heard(2, 40, at(0));
  EXPECT_EQ(clock.eventTime(at(50)), 10);
  EXPECT_FALSE(clock.allIdle(at(50)));
  EXPECT_EQ(clock.eventTime(at(101)), 40);
  EXPECT_TRUE(clock.allIdle(at(101)));
}

// A restarted host: the saved clock holds the time at the slowest source's
// ts for an idle timeout (what is redelivered from before is not late), then
// lets it go to the newest ts though nothing more comes.
TEST(SourceClockTest, ARestoredClockHoldsItsTimeForAnIdleTimeoutThenMovesToTheNewest) {
  SourceClock before(milliseconds(100));
  EXPECT_FALSE(before.save(at(0)).has_value());
  before.heard(1, 2000, at(0));
  before.heard(2, 6000, at(10));
  const std::optional<SourceClock::Saved> saved = before.save(at(20));
  ASSERT_TRUE(saved.has_value());
  EXPECT_EQ(saved->time, 2000);
  EXPECT_EQ(saved->newest, 6000);

  SourceClock after(milliseconds(100));
  after.restore(7, *saved, at(1000));
  EXPECT_EQ(after.eventTime(at(1000)), 2000);
  EXPECT_EQ(after.eventTime(at(1100)), 2000);
  EXPECT_EQ(after.eventTime(at(1101)), 6000);
  // A source of the new run that is behind holds the time back as any live one.
  after.heard(3, 3000, at(1150));
  EXPECT_EQ(after.eventTime(at(1150)), 3000);
}

TEST(SourceClockTest, LongIdleSourcesAreForgottenWhenANewOneComes) {
  SourceClock clock(milliseconds(10));
  clock.heard(1, 100, at(0));
  clock.heard(2, 5, at(SourceClock::kForgetAfter * 10 + 1));
  EXPECT_EQ(clock.sources(), 1u);
  // Source 2 is live, the forgotten one held at 100 no longer matters...
  EXPECT_EQ(clock.eventTime(at(SourceClock::kForgetAfter * 10 + 1)), 5);
  // ...and once all are idle its newest still counts.
  EXPECT_EQ(clock.eventTime(at(SourceClock::kForgetAfter * 10 + 100)), 100);
}

// A source that ended stops holding back at once, long before its idle
// timeout, and an event of it resent after the end does not bring it back.
TEST(SourceClockTest, AnEndedSourceStopsHoldingBackAtOnce) {
  SourceClock clock(milliseconds(60'000));
  clock.heard(1, 10, at(0));
  clock.heard(2, 50, at(0));
  ASSERT_EQ(clock.eventTime(at(1)), 10);
  clock.ended(1, at(2));
  EXPECT_EQ(clock.sources(), 1u);
  EXPECT_EQ(clock.eventTime(at(2)), 50);
  clock.heard(1, 12, at(3));
  EXPECT_EQ(clock.sources(), 1u);
  EXPECT_EQ(clock.eventTime(at(3)), 50);
  // Its events still count towards the newest ts of any.
  clock.heard(1, 70, at(4));
  EXPECT_EQ(clock.eventTime(at(4)), 50);
  EXPECT_EQ(clock.eventTime(at(60'010)), 70);  // all idle
  // Ending a source never heard of is remembered too.
  clock.ended(5, at(5));
  clock.heard(5, 1, at(6));
  EXPECT_EQ(clock.sources(), 1u);
}

// The clock keeps its minimum instead of recomputing it after every event;
// against the definition (a pass over every source at every step), on
// random sources that speak, pause, share timestamps and fall behind.
TEST(SourceClockTest, TheKeptTimeIsTheDefinitionsOnRandomSources) {
  struct Model {
    struct Source {
      Timestamp newest;
      int last_heard;
    };
    std::map<SourceClock::SourceId, Source> sources;
    Timestamp newest = INT64_MIN;
    std::optional<Timestamp> time(int now, int timeout) const {
      std::optional<Timestamp> live;
      for (const auto& [id, s] : sources) {
        if (now - s.last_heard <= timeout) live = std::min(live.value_or(s.newest), s.newest);
      }
      if (live) return live;
      if (newest == INT64_MIN) return std::nullopt;
      return newest;
    }
  };
  std::mt19937 rng(20261206);
  for (int round = 0; round < 200; ++round) {
    constexpr int kTimeout = 50;
    SourceClock clock{milliseconds{kTimeout}};
    Model model;
    const int sources = 1 + static_cast<int>(rng() % 8);
    int now = 0;
    for (int step = 0; step < 400; ++step) {
      now += static_cast<int>(rng() % 3 == 0 ? rng() % 40 : 0);
      const auto id = static_cast<SourceClock::SourceId>(rng() % sources);
      // Few distinct timestamps, so that sources often share the slowest one.
      const Timestamp ts = step / 4 + static_cast<Timestamp>(rng() % 3);
      clock.heard(id, ts, at(now));
      auto [it, added] = model.sources.try_emplace(id, Model::Source{ts, now});
      if (!added) {
        it->second = {std::max(it->second.newest, ts), now};
      } else {
        std::erase_if(model.sources, [&](const auto& entry) {
          return now - entry.second.last_heard > SourceClock::kForgetAfter * kTimeout;
        });
      }
      model.newest = std::max(model.newest, ts);
      const int asked = now + static_cast<int>(rng() % 60);
      ASSERT_EQ(clock.eventTime(at(asked)), model.time(asked, kTimeout))
          << "round " << round << " step " << step;
      size_t idle = 0;
      for (const auto& [sid, s] : model.sources) idle += asked - s.last_heard > kTimeout ? 1 : 0;
      ASSERT_EQ(clock.idleSources(at(asked)), idle) << "round " << round << " step " << step;
      now = asked;  // the bus's clock is steady: never back
    }
  }
}

TEST(SourceClockTest, WallTimeCountsInTheDeclaredUnit) {
  const std::chrono::system_clock::time_point t{std::chrono::seconds(1'700'000'000) +
                                                milliseconds(250)};
  EXPECT_EQ(wallTime(pattern::TimeUnit::kSeconds, t), 1'700'000'000);
  EXPECT_EQ(wallTime(pattern::TimeUnit::kMilliseconds, t), 1'700'000'000'250);
  EXPECT_EQ(wallTime(pattern::TimeUnit::kMicroseconds, t), 1'700'000'000'250'000);
  EXPECT_EQ(wallTime(pattern::TimeUnit::kNone, t), std::nullopt);
}

// The wall clock moves the time only while every source is idle and the
// unit is declared, and never back.
TEST(WallClockAdvanceTest, FollowsTheWallClockOnlyWhenEverySourceIsIdle) {
  auto wall = [](Timestamp ms) { return std::chrono::system_clock::time_point(milliseconds(ms)); };
  SourceClock clock(milliseconds(100));
  WallClockAdvance ms(pattern::TimeUnit::kMilliseconds);
  EXPECT_TRUE(ms.follows());
  EXPECT_EQ(ms.eventTime(clock, at(0), wall(5000)), std::nullopt) << "no source: no time";
  clock.heard(1, 1000, at(0));
  EXPECT_EQ(ms.eventTime(clock, at(50), wall(5000)), 1000) << "live: the source's time";
  EXPECT_EQ(ms.eventTime(clock, at(101), wall(5000)), 5000);
  EXPECT_EQ(ms.eventTime(clock, at(102), wall(3000)), 5000) << "a wall clock set back";
  EXPECT_EQ(ms.eventTime(clock, at(103), wall(500)), 5000);
  clock.heard(1, 7000, at(200));
  EXPECT_EQ(ms.eventTime(clock, at(301), wall(6000)), 7000) << "ahead of the wall clock";

  WallClockAdvance none(pattern::TimeUnit::kNone);
  EXPECT_FALSE(none.follows());
  EXPECT_EQ(none.eventTime(clock, at(1000), wall(9000)), 7000);
}

}  // namespace
}  // namespace cepbus::plugin
