#include "bus/host/time/reorder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace cepbus::plugin {
namespace {

EventPtr at(Timestamp ts, const char* type = "A") { return EventBuilder(type).at(ts).build(); }

std::vector<Timestamp> drainReady(ReorderBuffer& b) {
  std::vector<Timestamp> out;
  while (EventPtr e = b.popReady()) out.push_back(e->ts());
  return out;
}

TEST(ReorderBufferTest, ReleasesInTimestampOrderOnceTheSlackHasPassed) {
  ReorderBuffer b(3);
  ASSERT_TRUE(b.push(at(5)).isOk());
  ASSERT_TRUE(b.push(at(3)).isOk());
  ASSERT_TRUE(b.push(at(4)).isOk());
  EXPECT_TRUE(drainReady(b).empty());  // newest 5: only ts <= 2 is safe
  ASSERT_TRUE(b.push(at(7)).isOk());
  EXPECT_EQ(drainReady(b), (std::vector<Timestamp>{3, 4}));
  EXPECT_EQ(b.size(), 2u);
  std::vector<Timestamp> rest;
  while (EventPtr e = b.popAny()) rest.push_back(e->ts());
  EXPECT_EQ(rest, (std::vector<Timestamp>{5, 7}));
}

TEST(ReorderBufferTest, EqualTimestampsKeepArrivalOrder) {
  ReorderBuffer b(1);
  for (const char* type : {"A", "B", "C", "D"}) ASSERT_TRUE(b.push(at(4, type)).isOk());
  ASSERT_TRUE(b.push(at(9)).isOk());
  std::string order;
  while (EventPtr e = b.popReady()) order += e->type().name();
  EXPECT_EQ(order, "ABCD");
}

TEST(ReorderBufferTest, RejectsEventsLaterThanTheMaxDelay) {
  ReorderBuffer b(2);
  ASSERT_TRUE(b.push(at(10)).isOk());
  EXPECT_TRUE(b.push(at(8)).isOk());  // exactly the delay
  Status s = b.push(at(7, "Late"));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "out-of-order event: type Late at ts 7 arrived after ts 10, 3 time units late; the "
            "maximum delay is 2");
}

TEST(ReorderBufferTest, TheWatermarkIsTheNewestTimestampMinusTheDelay) {
  ReorderBuffer b(4);
  EXPECT_EQ(b.watermark(), INT64_MIN);
  EXPECT_FALSE(b.isLate(INT64_MIN + 1));
  ASSERT_TRUE(b.push(at(10)).isOk());
  EXPECT_EQ(b.watermark(), 6);
  ASSERT_TRUE(b.push(at(7)).isOk());  // behind the newest: the watermark stays
  EXPECT_EQ(b.watermark(), 6);
  EXPECT_FALSE(b.isLate(6));
  EXPECT_TRUE(b.isLate(5));
  ASSERT_TRUE(b.push(at(12)).isOk());
  EXPECT_EQ(b.watermark(), 8);
}

TEST(ReorderBufferTest, TheDelayOptionsTakeANonNegativeIntegerAndNameThemselves) {
  EXPECT_EQ(*parseMaxDelay(kMaxDelayOption, "250"), 250);
  EXPECT_EQ(*parseMaxDelay(kSlackOption, "0"), 0);
  for (const char* bad : {"-1", "", "1.5", "10ms", "99999999999999999999"}) {
    auto parsed = parseMaxDelay(kMaxDelayOption, bad);
    ASSERT_FALSE(parsed) << bad;
    EXPECT_EQ(parsed.status().message(),
              std::string("option max_delay=") + bad + ": expected a non-negative integer");
  }
  EXPECT_EQ(parseMaxDelay(kSlackOption, "x").status().message(),
            "option slack=x: expected a non-negative integer");
}

// Random arrivals, most within the delay and some beyond it, for delays with
// a bucket per timestamp and with wider buckets: what comes out is exactly
// the accepted events sorted by ts (equal ts in arrival order), and an event
// is refused exactly when it is more than the delay behind the newest.
TEST(ReorderBufferTest, ReleasesTheAcceptedEventsAsAStableSortWouldForAnyDelay) {
  for (Timestamp delay : {1, 3, 1000, 10000, 50000}) {
    std::mt19937_64 rng(static_cast<uint64_t>(delay));
    ReorderBuffer b(delay);
    std::vector<std::pair<Timestamp, int>> accepted;
    std::vector<std::pair<Timestamp, int>> out;
    Timestamp newest = INT64_MIN;
    auto pop = [&](EventPtr e) {
      out.emplace_back(e->ts(), std::stoi(std::string(e->type().name().substr(1))));
    };
    for (int n = 0; n < 20000; ++n) {
      const Timestamp base = n / 2;
      const Timestamp ts = rng() % 20 == 0 ? base - static_cast<Timestamp>(rng() % (3 * delay))
                                           : base + static_cast<Timestamp>(rng() % (delay + 1));
      const bool late = newest != INT64_MIN && ts < newest - delay;
      Status s = b.push(EventBuilder("e" + std::to_string(n)).at(ts).build());
      ASSERT_EQ(s.isOk(), !late) << "delay " << delay << " ts " << ts << " newest " << newest;
      if (late) continue;
      newest = std::max(newest, ts);
      accepted.emplace_back(ts, n);
      while (EventPtr e = b.popReady()) {
        ASSERT_LE(e->ts(), newest - delay);
        pop(std::move(e));
      }
    }
    while (EventPtr e = b.popAny()) pop(std::move(e));
    std::stable_sort(accepted.begin(), accepted.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    EXPECT_EQ(out, accepted) << "delay " << delay;
  }
}

TEST(ReorderBufferTest, ZeroSlackAdmitsOnlyNonDecreasingTimestamps) {
  ReorderBuffer b(0);
  EXPECT_TRUE(b.admit(*at(1)).isOk());
  EXPECT_TRUE(b.admit(*at(1)).isOk());
  EXPECT_TRUE(b.admit(*at(2)).isOk());
  EXPECT_FALSE(b.admit(*at(1)).isOk());
  EXPECT_EQ(b.size(), 0u);
}

class Recording : public Detector {
 public:
  Status onEvent(const EventPtr& e) override {
    seen.push_back(e->ts());
    return e->ts() == 13 ? Status::invalidArgument("unlucky") : Status::ok();
  }
  Status flush() override {
    ++flushes;
    return Status::ok();
  }
  std::vector<Timestamp> seen;
  int flushes = 0;
};

// With the owner keeping time, events spread far wider than D (a fast
// source ahead of a slow one) come out as a stable sort would, each once the
// owner's time is D past it; lateness is against the owner's time.
TEST(ReorderBufferTest, OwnerKeptTimeReleasesAsAStableSortWouldPastAnySpread) {
  for (Timestamp delay : {0, 2, 50}) {
    std::mt19937_64 rng(static_cast<uint64_t>(delay) + 7);
    ReorderBuffer b(delay, EventTime::kOwner);
    std::vector<std::pair<Timestamp, int>> accepted;
    std::vector<std::pair<Timestamp, int>> out;
    Timestamp time = INT64_MIN;
    auto pop = [&](EventPtr e) {
      out.emplace_back(e->ts(), std::stoi(std::string(e->type().name().substr(1))));
    };
    for (int n = 0; n < 5000; ++n) {
      // Two sources: one near the owner's time, one up to 20 * D + 40 ahead.
      const Timestamp base = n / 4;
      const Timestamp ts = n % 2 == 0 ? base + static_cast<Timestamp>(rng() % (delay + 1))
                                      : base + static_cast<Timestamp>(rng() % (20 * delay + 40));
      const bool late = time != INT64_MIN && ts < time - delay;
      Status s = b.push(EventBuilder("e" + std::to_string(n)).at(ts).build());
      ASSERT_EQ(s.isOk(), !late) << "delay " << delay << " ts " << ts << " time " << time;
      if (!late) accepted.emplace_back(ts, n);
      // Pushing never moves the owner's time.
      EXPECT_EQ(b.newest(), time);
      if (n % 7 == 0) {
        time = std::max(time, base - 1);
        b.advanceTo(base - 1);
        while (EventPtr e = b.popReady()) {
          ASSERT_LE(e->ts(), time - delay);
          pop(std::move(e));
        }
      }
    }
    while (EventPtr e = b.popAny()) pop(std::move(e));
    std::stable_sort(accepted.begin(), accepted.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    EXPECT_EQ(out, accepted) << "delay " << delay;
  }
}

TEST(ReorderBufferTest, AdvanceToNeverMovesTimeBack) {
  ReorderBuffer b(1);
  ASSERT_TRUE(b.push(at(10)).isOk());
  b.advanceTo(5);
  EXPECT_EQ(b.newest(), 10);
  b.advanceTo(20);  // as if an event at 20 came: 10 is ready
  EXPECT_EQ(b.watermark(), 19);
  EXPECT_EQ(drainReady(b), (std::vector<Timestamp>{10}));
  EXPECT_TRUE(b.isLate(18));
}

TEST(ReorderingDetectorTest, FeedsTheInnerDetectorInOrderAndPassesItsErrors) {
  auto inner = std::make_unique<Recording>();
  Recording* rec = inner.get();
  ReorderingDetector d(std::move(inner), 2);
  for (Timestamp ts : {3, 1, 2, 5, 4, 8}) ASSERT_TRUE(d.onEvent(at(ts)).isOk()) << ts;
  EXPECT_EQ(rec->seen, (std::vector<Timestamp>{1, 2, 3, 4, 5}));  // 8 - 2 = 6 releases <= 6
  EXPECT_TRUE(d.onEvent(at(15)).isOk());                          // releases 8
  // 13 is within the slack of 15, so it is released at once, and the inner
  // detector's refusal comes back from this call.
  EXPECT_EQ(d.onEvent(at(13)).message(), "unlucky");
  EXPECT_TRUE(d.onEvent(at(16)).isOk());
  EXPECT_TRUE(d.flush().isOk());
  EXPECT_EQ(rec->seen, (std::vector<Timestamp>{1, 2, 3, 4, 5, 8, 13, 15, 16}));
  EXPECT_EQ(rec->flushes, 1);
}

// Records, in one list, the events it is given (their ts), the watermarks
// (as "w" and the time) and the flushes ("f").
class TimeRecording : public Detector {
 public:
  Status onEvent(const EventPtr& e) override {
    log.push_back(std::to_string(e->ts()));
    return Status::ok();
  }
  Status onWatermark(Timestamp t) override {
    log.push_back(t == kEndOfTime ? "w end" : "w" + std::to_string(t));
    return Status::ok();
  }
  Status flush() override {
    log.push_back("f");
    return Status::ok();
  }
  std::vector<std::string> log;
};

TEST(ReorderingDetectorTest, TheInnerDetectorHearsTheWatermarkAfterTheEventsItCovers) {
  for (const bool batches : {false, true}) {
    auto inner = std::make_unique<TimeRecording>();
    TimeRecording* rec = inner.get();
    ReorderingDetector d(std::move(inner), 2);
    auto offer = [&](std::vector<EventPtr> events) {
      if (batches) {
        ASSERT_TRUE(d.onEvents(events).isOk());
      } else {
        for (const EventPtr& e : events) ASSERT_TRUE(d.onEvent(e).isOk());
      }
    };
    // 5 then 4: watermark 3, so time passed 2; 4 does not move it (no call).
    // 8: watermark 6 releases 4 and 5, time passed 5. A pause moves nothing;
    // the end releases 8 and lets time pass to the end before the flush.
    offer({at(5), at(4)});
    offer({at(8)});
    ASSERT_TRUE(d.flushReleased().isOk());
    ASSERT_TRUE(d.flush().isOk());
    EXPECT_EQ(rec->log, (std::vector<std::string>{"w2", "4", "5", "w5", "f", "8", "w end", "f"}))
        << (batches ? "batches" : "one at a time");
  }
  // Without a delay each event moves time to just before it.
  auto inner = std::make_unique<TimeRecording>();
  TimeRecording* rec = inner.get();
  ReorderingDetector d(std::move(inner), 0);
  for (Timestamp ts : {3, 3, 7}) ASSERT_TRUE(d.onEvent(at(ts)).isOk());
  EXPECT_EQ(rec->log, (std::vector<std::string>{"3", "w2", "3", "7", "w6"}));
}

TEST(ReorderingDetectorTest, AdvanceToFiresTimersWithNoEvent) {
  auto inner = std::make_unique<TimeRecording>();
  TimeRecording* rec = inner.get();
  ReorderingDetector d(std::move(inner), 0, nullptr, EventTime::kOwner);
  // Held until the owner's time passes them, even with D = 0.
  ASSERT_TRUE(d.onEvents(std::vector<EventPtr>{at(5), at(3)}).isOk());
  EXPECT_TRUE(rec->log.empty());
  ASSERT_TRUE(d.advanceTo(4).isOk());
  EXPECT_EQ(rec->log, (std::vector<std::string>{"3", "w3"}));
  // No event at all: time alone passes 5 and then 100.
  ASSERT_TRUE(d.advanceTo(100).isOk());
  ASSERT_TRUE(d.advanceTo(100).isOk());  // nothing moved: nothing said
  EXPECT_EQ(rec->log, (std::vector<std::string>{"3", "w3", "5", "w99"}));
  // Behind the owner's time: late, rejected without a late sink.
  EXPECT_FALSE(d.onEvent(at(99)).isOk());
  ASSERT_TRUE(d.onEvent(at(100)).isOk());
  EXPECT_EQ(rec->log.back(), "100");
}

// Records the batches it is given.
class BatchRecording : public Recording {
 public:
  Status onEvents(std::span<const EventPtr> events) override {
    batches.push_back(events.size());
    return Detector::onEvents(events);
  }
  std::vector<size_t> batches;
};

std::vector<EventPtr> atAll(std::initializer_list<Timestamp> ts) {
  std::vector<EventPtr> out;
  for (Timestamp t : ts) out.push_back(at(t));
  return out;
}

TEST(ReorderingDetectorTest, ZeroSlackForwardsABatchWholeAndRejectsLateEventsInside) {
  auto inner = std::make_unique<BatchRecording>();
  BatchRecording* rec = inner.get();
  ReorderingDetector d(std::move(inner), 0);
  ASSERT_TRUE(d.onEvents(atAll({1, 2, 2, 5})));
  EXPECT_EQ(rec->batches, (std::vector<size_t>{4}));
  // 3 and 4 are late (after 5); the runs around them go through.
  Status s = d.onEvents(atAll({6, 3, 7, 8, 4, 9}));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("at ts 3 arrived after ts 6"), std::string::npos) << s.message();
  EXPECT_EQ(rec->seen, (std::vector<Timestamp>{1, 2, 2, 5, 6, 7, 8, 9}));
  EXPECT_EQ(rec->batches, (std::vector<size_t>{4, 1, 2, 1}));
  // The first error in batch order: the inner detector's refusal of 13
  // comes before the lateness of 10.
  EXPECT_EQ(d.onEvents(atAll({13, 10})).message(), "unlucky");
}

TEST(ReorderingDetectorTest, SlackReleasesWhatABatchMakesReadyAsOneBatch) {
  auto inner = std::make_unique<BatchRecording>();
  BatchRecording* rec = inner.get();
  ReorderingDetector d(std::move(inner), 2);
  ASSERT_TRUE(d.onEvents(atAll({3, 1, 2, 5, 4, 8})));
  EXPECT_EQ(rec->seen, (std::vector<Timestamp>{1, 2, 3, 4, 5}));  // as one event at a time
  EXPECT_EQ(rec->batches, (std::vector<size_t>{5}));
  // 5 is late (newest 8); the others go through, and 13's refusal comes back too.
  Status s = d.onEvents(atAll({15, 5, 13, 16}));
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("at ts 5 arrived after ts 15"), std::string::npos) << s.message();
  ASSERT_TRUE(d.flush());
  EXPECT_EQ(rec->seen, (std::vector<Timestamp>{1, 2, 3, 4, 5, 8, 13, 15, 16}));
  EXPECT_TRUE(d.onEvents({}));
}

// `n` events, A and B in turn, whose newest ts climbs by less than `step`
// each time, each `behind(rng)` behind it.
template <typename Behind>
std::vector<EventPtr> outOfOrder(uint64_t seed, int n, uint64_t step, Behind behind) {
  std::mt19937_64 rng(seed);
  std::vector<EventPtr> events;
  Timestamp base = 0;
  for (int i = 0; i < n; ++i) {
    base += static_cast<Timestamp>(rng() % step);
    events.push_back(at(base - static_cast<Timestamp>(behind(rng)), i % 2 ? "A" : "B"));
  }
  return events;
}

TEST(ReorderingDetectorTest, BatchesGiveTheOrderOfOneEventAtATime) {
  const std::vector<EventPtr> events =
      outOfOrder(41, 500, 3, [](std::mt19937_64& rng) { return rng() % 6; });
  for (Timestamp slack : {0, 3, 10}) {
    auto one = std::make_unique<Recording>();
    Recording* one_rec = one.get();
    ReorderingDetector single(std::move(one), slack);
    size_t single_errors = 0;
    for (const EventPtr& e : events) single_errors += single.onEvent(e) ? 0 : 1;
    ASSERT_TRUE(single.flush());
    for (size_t chunk : {1, 7, 64}) {
      auto many = std::make_unique<Recording>();
      Recording* many_rec = many.get();
      ReorderingDetector batched(std::move(many), slack);
      for (size_t i = 0; i < events.size(); i += chunk) {
        (void)batched.onEvents(
            std::span<const EventPtr>(events).subspan(i, std::min(chunk, events.size() - i)));
      }
      ASSERT_TRUE(batched.flush());
      EXPECT_EQ(many_rec->seen, one_rec->seen) << "slack " << slack << ", chunk " << chunk;
    }
    if (slack == 0) {
      EXPECT_GT(single_errors, 0u);
    }
  }
}

// Records the events it is given, and the late ones.
class Sequence : public Detector, public LateSink {
 public:
  Status onEvent(const EventPtr& e) override {
    seen.push_back(e);
    return Status::ok();
  }
  Status flush() override { return Status::ok(); }
  void onLate(const EventPtr& e, Timestamp newest) override {
    late.push_back(e);
    late_behind.push_back(newest);
  }
  std::vector<EventPtr> seen;
  std::vector<EventPtr> late;
  std::vector<Timestamp> late_behind;
};

TEST(ReorderingDetectorTest, LateEventsGoToTheLateSinkAndAreNoError) {
  auto inner = std::make_unique<Sequence>();
  Sequence* rec = inner.get();
  Sequence late;
  ReorderingDetector d(std::move(inner), 2, &late);
  const std::vector<EventPtr> events = {at(10), at(8), at(7, "L1"), at(11), at(8, "L2"), at(9)};
  for (const EventPtr& e : events) EXPECT_TRUE(d.onEvent(e)) << e->ts();
  EXPECT_EQ(d.watermark(), 9);
  ASSERT_TRUE(d.flush());
  EXPECT_EQ(late.late, (std::vector<EventPtr>{events[2], events[4]}));
  EXPECT_EQ(late.late_behind, (std::vector<Timestamp>{10, 11}));
  EXPECT_EQ(rec->seen, (std::vector<EventPtr>{events[1], events[5], events[0], events[3]}));
}

// Against a reference computed from the definition: an event more than D
// behind the newest arrival before it is late; the inner detector sees the
// others sorted by ts, equal ts in arrival order. One event at a time and in
// batches, for D = 0 (the unbuffered path) and with a delay.
TEST(ReorderingDetectorTest, ExactlyTheLateEventsGoAsideAndTheRestComeSorted) {
  // Mostly within a few units; one in 20 far behind (a broken clock).
  const std::vector<EventPtr> events = outOfOrder(17, 800, 4, [](std::mt19937_64& rng) {
    return rng() % 20 == 0 ? 30 + rng() % 30 : rng() % 8;
  });
  for (Timestamp delay : {0, 5, 40}) {
    std::vector<EventPtr> expected_late;
    std::vector<EventPtr> expected_seen;
    Timestamp newest = INT64_MIN;
    for (const EventPtr& e : events) {
      if (newest != INT64_MIN && e->ts() < newest - delay) {
        expected_late.push_back(e);
      } else {
        expected_seen.push_back(e);
        newest = std::max(newest, e->ts());
      }
    }
    std::stable_sort(expected_seen.begin(), expected_seen.end(),
                     [](const EventPtr& a, const EventPtr& b) { return a->ts() < b->ts(); });
    ASSERT_FALSE(expected_late.empty()) << delay;
    for (size_t chunk : {0, 1, 7, 64}) {  // 0: onEvent()
      auto inner = std::make_unique<Sequence>();
      Sequence* rec = inner.get();
      Sequence late;
      ReorderingDetector d(std::move(inner), delay, &late);
      if (chunk == 0) {
        for (const EventPtr& e : events) ASSERT_TRUE(d.onEvent(e));
      } else {
        for (size_t i = 0; i < events.size(); i += chunk) {
          ASSERT_TRUE(d.onEvents(
              std::span<const EventPtr>(events).subspan(i, std::min(chunk, events.size() - i))));
        }
      }
      ASSERT_TRUE(d.flush());
      EXPECT_EQ(late.late, expected_late) << "delay " << delay << ", chunk " << chunk;
      EXPECT_EQ(rec->seen, expected_seen) << "delay " << delay << ", chunk " << chunk;
    }
  }
}

}  // namespace
}  // namespace cepbus::plugin
