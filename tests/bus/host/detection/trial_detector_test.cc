#include "bus/host/detection/trial_detector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tests/testing/snapshot_bytes.h"

namespace cepbus::plugin {
namespace {

using cepbus::testing::restoreBytes;
using cepbus::testing::snapshotBytes;

// The trial's clock: only the fake engines below advance it, by the cost
// each is given per event, so what the trial measures is what a test says.
struct FakeClock {
  double now = 0;
  std::vector<double> calls;  // the cost of each engine call, in call order
  TrialDetector::CpuClock clock() {
    return [this] { return now; };
  }
};

class NoComposer final : public MatchComposer {
 public:
  EventPtr compose(const Match&) const override { return nullptr; }
};

// A fake engine: one match per event whose x is even, made of that event
// alone, reported `lag` events later (or at flush), as an engine with
// batched construction does; `cost` seconds of the fake clock per event
// (cost_of_, when set, gives the n-th event's). `skip`: an event of this ts
// never matches (an engine that disagrees).
class FakeEngine final : public Detector {
 public:
  FakeEngine(MatchSink* one, MultiMatchSink* many, FakeClock& clock, double cost, size_t lag,
             Timestamp skip = -1)
      : one_(one), many_(many), clock_(clock), cost_(cost), lag_(lag), skip_(skip) {}

  Status onEvents(std::span<const EventPtr> events) override {
    clock_.calls.push_back(cost_);
    return Detector::onEvents(events);
  }
  Status onEvent(const EventPtr& event) override {
    ++events_;
    clock_.now += cost_of_ ? cost_of_(events_) : cost_;
    if (fail_at_ != 0 && events_ == fail_at_) return Status::internal("fake failure");
    if (event->ts() != skip_ && event->find(Symbol::intern("x"))->asInt() % 2 == 0) {
      pending_.push_back(event);
    }
    while (pending_.size() > lag_) report();
    return Status::ok();
  }
  Status flush() override {
    while (!pending_.empty()) report();
    return Status::ok();
  }
  std::optional<DetectorState> state() const override {
    return DetectorState{pending_.size() + state_offset_, 0, 0, 0};
  }
  Result<std::string> exportModel(std::string_view) const override { return model_; }
  uint32_t snapshotVersion() const override { return 1; }
  Status snapshot(SnapshotWriter& out) const override {
    out.varint(events_);
    out.varint(pending_.size());
    for (const EventPtr& e : pending_) out.event(e);
    return Status::ok();
  }
  Status restore(SnapshotReader& in) override {
    events_ = in.varint();
    const uint64_t n = in.count();
    for (uint64_t i = 0; i < n && in.ok(); ++i) {
      pending_.push_back(in.event());
      if (pending_.back() == nullptr) in.fail("a pending event is missing");
    }
    return in.status();
  }

  std::function<double(uint64_t)> cost_of_;  // of the n-th event (1-based)
  uint64_t fail_at_ = 0;                     // the event (1-based) whose call fails
  uint64_t state_offset_ = 0;
  std::string model_;

 private:
  void report() {
    const EventPtr* events[] = {&pending_.front()};
    const uint32_t ends[] = {1};
    const Match match(events, ends, &composer_);
    // Each event belongs to pattern ts % 2 of a two-query detector.
    if (many_ != nullptr) {
      many_->onMatch(static_cast<size_t>(pending_.front()->ts() % 2), match);
    } else {
      one_->onMatch(match);
    }
    pending_.erase(pending_.begin());
  }

  MatchSink* one_;
  MultiMatchSink* many_;
  FakeClock& clock_;
  const double cost_;
  const size_t lag_;
  const Timestamp skip_;
  NoComposer composer_;
  std::vector<EventPtr> pending_;
  uint64_t events_ = 0;
};

// Records every match's (pattern, ts) it is handed; costs `cost` per match
// on the fake clock when given one (an expensive output), and `first_cost`
// more on the first (a cold one).
class RecordingSink final : public MatchSink, public MultiMatchSink {
 public:
  void onMatch(const Match& match) override { onMatch(0, match); }
  void onMatch(size_t pattern, const Match& match) override {
    if (clock != nullptr) clock->now += cost + (seen.empty() ? first_cost : 0);
    seen.emplace_back(pattern, match.ts(0));
  }
  std::vector<std::pair<size_t, Timestamp>> sorted() const {
    auto out = seen;
    std::sort(out.begin(), out.end());
    return out;
  }
  std::vector<std::pair<size_t, Timestamp>> seen;
  FakeClock* clock = nullptr;
  double cost = 0;
  double first_cost = 0;
};

std::vector<EventPtr> stream(int n) {
  std::vector<EventPtr> out;
  for (int i = 1; i <= n; ++i) {
    out.push_back(EventBuilder("A").at(i).set("x", Value(static_cast<int64_t>(i % 3))).build());
  }
  return out;
}

// What one engine alone would report for `events`: ts with an even x.
std::vector<std::pair<size_t, Timestamp>> expected(const std::vector<EventPtr>& events, bool many,
                                                   Timestamp skip = -1) {
  std::vector<std::pair<size_t, Timestamp>> out;
  for (const EventPtr& e : events) {
    if (e->ts() != skip && e->find(Symbol::intern("x"))->asInt() % 2 == 0) {
      out.emplace_back(many ? static_cast<size_t>(e->ts() % 2) : 0, e->ts());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct EngineSpec {
  std::string name;
  double cost;
  size_t lag;
  Timestamp skip = -1;
};

// A trial of `specs` (the prior first) reporting to `out`.
std::unique_ptr<TrialDetector> makeTrial(RecordingSink& out, bool many, FakeClock& clock,
                                         const std::vector<EngineSpec>& specs, TrialLimits limits,
                                         std::map<std::string, FakeEngine*>* engines = nullptr) {
  auto trial =
      many ? std::make_unique<TrialDetector>(static_cast<MultiMatchSink&>(out), limits,
                                             clock.clock())
           : std::make_unique<TrialDetector>(static_cast<MatchSink&>(out), limits, clock.clock());
  for (const EngineSpec& spec : specs) {
    EXPECT_TRUE(trial->addCandidate(
        spec.name, [&](MatchSink& one, MultiMatchSink& multi) -> Result<std::unique_ptr<Detector>> {
          auto engine = std::make_unique<FakeEngine>(many ? nullptr : &one, many ? &multi : nullptr,
                                                     clock, spec.cost, spec.lag, spec.skip);
          if (engines != nullptr) (*engines)[spec.name] = engine.get();
          return std::unique_ptr<Detector>(std::move(engine));
        }));
  }
  return trial;
}

// Feeds `events` in batches of `batch`, then flushes.
void run(Detector& d, const std::vector<EventPtr>& events, size_t batch) {
  for (size_t i = 0; i < events.size(); i += batch) {
    const size_t n = std::min(batch, events.size() - i);
    ASSERT_TRUE(d.onEvents(std::span<const EventPtr>(events).subspan(i, n)));
  }
  ASSERT_TRUE(d.flush());
}

TrialLimits limits(uint64_t events) {
  TrialLimits l;
  l.events = events;
  l.min_events = events;  // no early decision
  l.overwhelming_below = 0;
  l.agreeing_blocks = 0;
  l.warmup_events = 0;
  l.cpu_seconds = 1e9;  // the fake clock's seconds: only the event bound counts
  return l;
}

TEST(TrialDetectorTest, KeepsACheaperChallengerAndLosesOrDoublesNoMatchAtTheSwitch) {
  // Every combination of who reports late: the switch must be exact whether
  // the prior or the challenger lags at the decision.
  for (size_t prior_lag : {0u, 3u, 7u}) {
    for (size_t challenger_lag : {0u, 5u}) {
      for (bool many : {false, true}) {
        FakeClock clock;
        RecordingSink out;
        auto trial = makeTrial(out, many, clock,
                               {{"petri", 10, prior_lag}, {"nfa", 1, challenger_lag}}, limits(40));
        const auto events = stream(200);
        run(*trial, events, 8);
        const auto outcome = trial->outcome();
        ASSERT_TRUE(outcome.has_value());
        EXPECT_EQ(outcome->kept, "nfa");
        EXPECT_EQ(trial->running(), "nfa");
        EXPECT_EQ(outcome->events, 40u);
        ASSERT_EQ(outcome->measured.size(), 2u);
        EXPECT_EQ(outcome->measured[0].engine, "petri");
        EXPECT_DOUBLE_EQ(outcome->measured[0].cpu_seconds, 400);
        EXPECT_DOUBLE_EQ(outcome->measured[1].cpu_seconds, 40);
        EXPECT_EQ(outcome->describe(),
                  "kept nfa: petri 400000.00 ms, nfa 40000.00 ms CPU on 40 events");
        EXPECT_EQ(out.sorted(), expected(events, many))
            << "prior lag " << prior_lag << ", challenger lag " << challenger_lag;
      }
    }
  }
}

TEST(TrialDetectorTest, ACheckpointIsRefusedDuringTheTrialAndCarriesTheKeptEngineAfterIt) {
  const std::vector<EngineSpec> specs = {{"petri", 10, 3}, {"nfa", 1, 2}};
  const auto events = stream(120);
  const std::span<const EventPtr> all(events);
  FakeClock clock;
  RecordingSink out;
  auto trial = makeTrial(out, false, clock, specs, limits(40));
  EXPECT_EQ(trial->snapshotVersion(), 1u);
  // Before the first event: an empty trial, which a new one resumes as such.
  auto empty = snapshotBytes(*trial);
  ASSERT_TRUE(empty) << empty.status().message();
  {
    FakeClock c;
    RecordingSink o;
    auto fresh = makeTrial(o, false, c, specs, limits(40));
    ASSERT_TRUE(restoreBytes(*fresh, *empty));
    EXPECT_FALSE(fresh->outcome().has_value());
  }
  ASSERT_TRUE(trial->onEvents(all.first(16)));
  auto during = snapshotBytes(*trial);
  ASSERT_FALSE(during);
  EXPECT_NE(during.status().message().find("between petri, nfa is still running after 16 events"),
            std::string::npos)
      << during.status().message();
  ASSERT_TRUE(trial->onEvents(all.subspan(16, 64)));
  ASSERT_TRUE(trial->outcome().has_value());
  ASSERT_EQ(trial->outcome()->kept, "nfa");
  auto after = snapshotBytes(*trial);
  ASSERT_TRUE(after) << after.status().message();
  const auto before = out.seen;
  ASSERT_TRUE(trial->onEvents(all.subspan(80)));
  ASSERT_TRUE(trial->flush());

  FakeClock c;
  RecordingSink resumed;
  auto fresh = makeTrial(resumed, false, c, specs, limits(40));
  std::vector<std::string> heard;
  fresh->onDecided([&](const TrialOutcome& o) { heard.push_back(o.kept); });
  ASSERT_TRUE(restoreBytes(*fresh, *after));
  EXPECT_EQ(heard, std::vector<std::string>{"nfa"});
  ASSERT_TRUE(fresh->outcome().has_value());
  EXPECT_EQ(fresh->outcome()->describe(), trial->outcome()->describe());
  EXPECT_EQ(fresh->running(), "nfa");
  ASSERT_TRUE(fresh->onEvents(all.subspan(80)));
  ASSERT_TRUE(fresh->flush());
  auto got = before;
  got.insert(got.end(), resumed.seen.begin(), resumed.seen.end());
  EXPECT_EQ(got, out.seen);
  EXPECT_EQ(c.calls.size(), 1u);  // the kept engine alone: no trial after the restore

  FakeClock other_clock;
  RecordingSink other_out;
  auto other =
      makeTrial(other_out, false, other_clock, {{"petri", 10, 3}, {"algebra", 1, 2}}, limits(40));
  Status refused = restoreBytes(*other, *after);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("kept engine 'nfa', which is not a candidate"),
            std::string::npos)
      << refused.message();
}

TEST(TrialDetectorTest, KeepsThePriorWhenItIsCheaperOrTheChallengerNotClearlySo) {
  // 5 % cheaper is within switch_below (0.9): a tie, which the static rule breaks.
  const std::vector<std::vector<EngineSpec>> cases = {
      {{"petri", 1.0, 0}, {"nfa", 0.95, 2}},
      {{"nfa", 1, 3}, {"petri", 5, 0}},
  };
  for (const auto& specs : cases) {
    FakeClock clock;
    RecordingSink out;
    auto trial = makeTrial(out, false, clock, specs, limits(16));
    const auto events = stream(64);
    run(*trial, events, 5);
    ASSERT_TRUE(trial->outcome().has_value());
    EXPECT_EQ(trial->outcome()->kept, specs[0].name);
    EXPECT_EQ(out.sorted(), expected(events, false));
  }
}

TEST(TrialDetectorTest, ARunThatEndsDuringTheTrialGivesThePriorsMatchesOnly) {
  FakeClock clock;
  RecordingSink out;
  // The challenger, cheaper, would report ts 4 too: none of it may show.
  auto trial =
      makeTrial(out, false, clock, {{"petri", 10, 2, /*skip=*/4}, {"nfa", 1, 0}}, limits(1000));
  const auto events = stream(30);
  run(*trial, events, 7);
  EXPECT_FALSE(trial->outcome().has_value());
  EXPECT_EQ(trial->running(), "petri");
  EXPECT_EQ(out.sorted(), expected(events, false, 4));
}

TEST(TrialDetectorTest, MatchesThatDoNotLineUpKeepThePrior) {
  FakeClock clock;
  RecordingSink out;
  // The cheaper challenger misses ts 6: switching would lose or double it.
  auto trial =
      makeTrial(out, false, clock, {{"petri", 10, 0}, {"nfa", 1, 1, /*skip=*/6}}, limits(20));
  const auto events = stream(60);
  run(*trial, events, 4);
  ASSERT_TRUE(trial->outcome().has_value());
  EXPECT_EQ(trial->outcome()->kept, "petri");
  EXPECT_NE(trial->outcome()->note.find("did not line up"), std::string::npos);
  EXPECT_EQ(out.sorted(), expected(events, false));
}

TEST(TrialDetectorTest, TheOutputsCostIsNotCountedAsThePriors) {
  FakeClock clock;
  RecordingSink out;
  out.clock = &clock;
  out.cost = 50;  // far more than either engine: charged to the prior, it would lose
  auto trial = makeTrial(out, false, clock, {{"petri", 1, 0}, {"nfa", 1, 0}}, limits(64));
  const auto events = stream(128);
  // The prior's matches of a timed call reach the output before the call
  // returns, in the order it reported them.
  ASSERT_TRUE(trial->onEvents(std::span<const EventPtr>(events).first(8)));
  EXPECT_EQ(out.seen, expected(std::vector<EventPtr>(events.begin(), events.begin() + 8), false));
  run(*trial, std::vector<EventPtr>(events.begin() + 8, events.end()), 8);
  ASSERT_TRUE(trial->outcome().has_value());
  EXPECT_EQ(trial->outcome()->kept, "petri");
  EXPECT_DOUBLE_EQ(trial->outcome()->measured[0].cpu_seconds, 64);
  EXPECT_EQ(out.seen, expected(events, false));
}

TEST(TrialDetectorTest, AColdFirstForwardDoesNotStandForEveryForward) {
  // The output costs 0.5 a match, 20.5 the first: scaled to every forward,
  // that one sample would take the prior (1 an event) below the challenger
  // (0.8) and keep it.
  FakeClock clock;
  RecordingSink out;
  out.clock = &clock;
  out.cost = 0.5;
  out.first_cost = 20;
  auto trial = makeTrial(out, false, clock, {{"petri", 1, 0}, {"nfa", 0.8, 0}}, limits(64));
  run(*trial, stream(128), 8);
  ASSERT_TRUE(trial->outcome().has_value());
  EXPECT_EQ(trial->outcome()->kept, "nfa");
  // The median sample (0.5) taken off each forward: the cold one's extra 20 stays.
  EXPECT_DOUBLE_EQ(trial->outcome()->measured[0].cpu_seconds, 64 + 20);
}

TEST(TrialDetectorTest, AChallengerThatFailsIsDroppedAndThePriorsErrorsAreReturned) {
  FakeClock clock;
  RecordingSink out;
  std::map<std::string, FakeEngine*> engines;
  auto trial =
      makeTrial(out, false, clock, {{"petri", 10, 0}, {"nfa", 1, 0}}, limits(1000), &engines);
  engines["nfa"]->fail_at_ = 3;
  const auto events = stream(20);
  for (const EventPtr& e : events) ASSERT_TRUE(trial->onEvent(e));
  ASSERT_TRUE(trial->outcome().has_value());
  EXPECT_EQ(trial->outcome()->kept, "petri");
  EXPECT_EQ(trial->outcome()->note, "every other candidate failed");
  EXPECT_TRUE(trial->flush());
  EXPECT_EQ(out.sorted(), expected(events, false));

  FakeClock clock2;
  RecordingSink out2;
  std::map<std::string, FakeEngine*> engines2;
  auto trial2 =
      makeTrial(out2, false, clock2, {{"petri", 10, 0}, {"nfa", 1, 0}}, limits(1000), &engines2);
  engines2["petri"]->fail_at_ = 2;
  EXPECT_TRUE(trial2->onEvent(events[0]));
  EXPECT_FALSE(trial2->onEvent(events[1]));
}

TEST(TrialDetectorTest, StateAndModelAreTheRunningEngines) {
  FakeClock clock;
  RecordingSink out;
  std::map<std::string, FakeEngine*> engines;
  auto trial =
      makeTrial(out, false, clock, {{"petri", 10, 0}, {"nfa", 1, 100}}, limits(10), &engines);
  engines["petri"]->model_ = "the net";
  engines["nfa"]->model_ = "the nfa";
  engines["nfa"]->state_offset_ = 1000;
  const auto events = stream(9);
  ASSERT_TRUE(trial->onEvents(events));
  EXPECT_EQ(*trial->exportModel("dot"), "the net");
  EXPECT_EQ(trial->state()->partial_matches, 0u);
  ASSERT_TRUE(trial->onEvents(stream(2)));  // the 10th event ends the trial; the nfa is level
  ASSERT_TRUE(trial->outcome().has_value());
  EXPECT_EQ(trial->outcome()->kept, "nfa");
  EXPECT_EQ(*trial->exportModel("dot"), "the nfa");
  EXPECT_EQ(trial->state()->partial_matches, 1000u);
}

TEST(TrialDetectorTest, TheCpuBoundEndsTheTrialBeforeTheEventBound) {
  FakeClock clock;
  RecordingSink out;
  TrialLimits l;
  l.events = 1000;
  l.min_events = 1000;
  l.warmup_events = 0;
  l.cpu_seconds = 55;  // 11 per event between the two: the 5th event crosses it
  auto trial = makeTrial(out, false, clock, {{"petri", 10, 0}, {"nfa", 1, 0}}, l);
  const auto events = stream(10);
  for (const EventPtr& e : events) ASSERT_TRUE(trial->onEvent(e));
  ASSERT_TRUE(trial->outcome().has_value());
  EXPECT_EQ(trial->outcome()->events, 5u);
  EXPECT_EQ(trial->outcome()->kept, "nfa");
}

TEST(TrialDetectorTest, AClearWinnerEndsTheTrialEarlyAndACloseOneDoesNot) {
  for (const double challenger_cost : {4.0, 6.0}) {
    FakeClock clock;
    RecordingSink out;
    TrialLimits l = limits(100);
    l.min_events = 8;  // from then on, 0.4 of the prior's CPU is decisive (0.6 is not)
    auto trial = makeTrial(out, false, clock, {{"petri", 10, 0}, {"nfa", challenger_cost, 3}}, l);
    const auto events = stream(200);
    run(*trial, events, 4);
    ASSERT_TRUE(trial->outcome().has_value());
    EXPECT_EQ(trial->outcome()->kept, "nfa");
    EXPECT_EQ(trial->outcome()->events, challenger_cost == 4.0 ? 8u : 100u);
    EXPECT_EQ(out.sorted(), expected(events, false));
  }
}

TEST(TrialDetectorTest, AnOverwhelmingWinnerEndsTheTrialAtTheFirstBlock) {
  // Blocks of 16 events. At most 0.25 of the other's CPU on the first block
  // (the other's 160 past the floor of 100) ends the trial there; 0.3 waits
  // for min_events (32), where it is decisive (0.5). Either engine may be
  // the winner.
  for (const double cost : {2.0, 3.0}) {
    for (const bool challenger_wins : {true, false}) {
      FakeClock clock;
      RecordingSink out;
      TrialLimits l = limits(100);
      l.block_events = 16;
      l.min_events = 32;
      l.overwhelming_below = 0.25;
      l.overwhelming_cpu_seconds = 100;
      const std::vector<EngineSpec> specs =
          challenger_wins ? std::vector<EngineSpec>{{"petri", 10, 0}, {"nfa", cost, 3}}
                          : std::vector<EngineSpec>{{"petri", cost, 2}, {"nfa", 10, 0}};
      auto trial = makeTrial(out, false, clock, specs, l);
      const auto events = stream(200);
      run(*trial, events, 4);
      const auto outcome = trial->outcome();
      ASSERT_TRUE(outcome.has_value());
      EXPECT_EQ(outcome->kept, challenger_wins ? "nfa" : "petri");
      EXPECT_EQ(outcome->events, cost == 2.0 ? 16u : 32u);
      EXPECT_EQ(outcome->ended_early, cost == 2.0 ? "one took at most 0.25 of another's CPU"
                                                  : "one took at most 0.5 of another's CPU");
      EXPECT_EQ(out.sorted(), expected(events, false));
    }
  }
}

TEST(TrialDetectorTest, AnOverwhelmingWinnerOnATinyBlockWaitsForMoreEvents) {
  // 0.2 of the other's CPU from the first block on, but the other has taken
  // 320 by min_events (32), under the floor of 400: the trial ends there, on
  // the decisive share (0.5).
  FakeClock clock;
  RecordingSink out;
  TrialLimits l = limits(100);
  l.block_events = 16;
  l.min_events = 32;
  l.overwhelming_below = 0.25;
  l.overwhelming_cpu_seconds = 400;
  auto trial = makeTrial(out, false, clock, {{"petri", 10, 0}, {"nfa", 2, 0}}, l);
  run(*trial, stream(100), 4);
  ASSERT_TRUE(trial->outcome().has_value());
  EXPECT_EQ(trial->outcome()->kept, "nfa");
  EXPECT_EQ(trial->outcome()->events, 32u);
  EXPECT_EQ(trial->outcome()->ended_early, "one took at most 0.5 of another's CPU");
}

TEST(TrialDetectorTest, TheWarmUpIsNotTimedAndWhoGoesFirstTakesTurns) {
  // The prior costs 10 per event on its first 8, then 1: timed from the
  // 9th, it is the cheaper.
  FakeClock clock;
  RecordingSink out;
  TrialLimits l = limits(16);
  l.warmup_events = 8;
  std::map<std::string, FakeEngine*> engines;
  auto trial = makeTrial(out, false, clock, {{"petri", 1, 0}, {"nfa", 2, 0}}, l, &engines);
  std::vector<std::string> order;
  const auto events = stream(64);
  clock.now = 0;
  for (size_t i = 0; i < 8; ++i) {
    clock.now += 9;  // what the prior's first events would cost on top: untimed
    ASSERT_TRUE(trial->onEvent(events[i]));
  }
  run(*trial, std::vector<EventPtr>(events.begin() + 8, events.end()), 4);
  ASSERT_TRUE(trial->outcome().has_value());
  EXPECT_EQ(trial->outcome()->kept, "petri");
  EXPECT_EQ(trial->outcome()->events, 16u);
  EXPECT_EQ(trial->outcome()->warmup, 8u);
  EXPECT_DOUBLE_EQ(trial->outcome()->measured[0].cpu_seconds, 16);
  EXPECT_TRUE(trial->outcome()->describe().ends_with("CPU on 16 events after the first 8"));
  // Batch by batch, the prior (cost 1) and the challenger (cost 2) take turns going first.
  ASSERT_GE(clock.calls.size(), 4u);
  EXPECT_EQ(std::vector<double>(clock.calls.begin(), clock.calls.begin() + 4),
            (std::vector<double>{1, 2, 2, 1}));
}

// Blocks of 16 events (at the first call boundary past 16), three agreeing
// end the trial; no clear winner (min_events at the bound).
TrialLimits blocks(uint64_t events) {
  TrialLimits l = limits(events);
  l.block_events = 16;
  l.agreeing_blocks = 3;
  return l;
}

TEST(TrialDetectorTest, AWinnerBelowTheDecisiveShareEndsTheTrialOnceItsBlocksAgree) {
  // 0.7 of the other's CPU: not decisive (0.5), but on one side of
  // switch_below (0.9) block after block, whichever is the prior.
  for (const bool challenger_wins : {true, false}) {
    for (const bool many : {false, true}) {
      FakeClock clock;
      RecordingSink out;
      const std::vector<EngineSpec> specs =
          challenger_wins ? std::vector<EngineSpec>{{"petri", 10, 0}, {"nfa", 7, 3}}
                          : std::vector<EngineSpec>{{"petri", 7, 2}, {"nfa", 10, 0}};
      auto trial = makeTrial(out, many, clock, specs, blocks(1000));
      const auto events = stream(300);
      run(*trial, events, 5);  // blocks close at 20, 40, 60 events
      const auto outcome = trial->outcome();
      ASSERT_TRUE(outcome.has_value());
      EXPECT_EQ(outcome->kept, challenger_wins ? "nfa" : "petri");
      EXPECT_EQ(outcome->events, 60u);
      EXPECT_EQ(outcome->ended_early, "the last 3 blocks of 16 events agreed");
      EXPECT_TRUE(
          outcome->describe().ends_with("CPU on 60 events; the last 3 blocks of 16 "
                                        "events agreed"))
          << outcome->describe();
      EXPECT_EQ(out.sorted(), expected(events, many));
    }
  }
}

TEST(TrialDetectorTest, ATieEndsTheTrialOnceItsBlocksAgreeAndKeepsThePrior) {
  // Within 10 % either way: on the prior's side of switch_below every block.
  for (const double challenger_cost : {0.95, 1.05}) {
    FakeClock clock;
    RecordingSink out;
    auto trial =
        makeTrial(out, false, clock, {{"petri", 1, 0}, {"nfa", challenger_cost, 2}}, blocks(1000));
    const auto events = stream(200);
    run(*trial, events, 4);
    ASSERT_TRUE(trial->outcome().has_value());
    EXPECT_EQ(trial->outcome()->kept, "petri");
    EXPECT_EQ(trial->outcome()->events, 48u);
    EXPECT_FALSE(trial->outcome()->ended_early.empty());
    EXPECT_EQ(out.sorted(), expected(events, false));
  }
}

TEST(TrialDetectorTest, BlocksThatKeepChangingSidesRunTheTrialToItsBound) {
  // The challenger takes 0.6 and 1.4 of the prior's CPU in turn, block by
  // block: never three on one side, never decisive (0.5) over the whole.
  FakeClock clock;
  RecordingSink out;
  TrialLimits l = blocks(160);
  l.min_events = 16;
  std::map<std::string, FakeEngine*> engines;
  auto trial = makeTrial(out, false, clock, {{"petri", 1, 0}, {"nfa", 1, 1}}, l, &engines);
  engines["nfa"]->cost_of_ = [](uint64_t n) { return (n - 1) / 16 % 2 == 0 ? 0.6 : 1.4; };
  const auto events = stream(400);
  run(*trial, events, 4);
  ASSERT_TRUE(trial->outcome().has_value());
  EXPECT_EQ(trial->outcome()->kept, "petri");
  EXPECT_EQ(trial->outcome()->events, 160u);
  EXPECT_EQ(trial->outcome()->ended_early, "");
  EXPECT_EQ(out.sorted(), expected(events, false));
}

TEST(TrialDetectorTest, AgreeingBlocksDecideByThemselvesNotByTheWholeTrial) {
  // The challenger's first block costs 1.8 of the prior's, the next three
  // 0.7: over the whole trial 0.975 (the prior would stay), in the agreeing
  // blocks 0.7. What they say is how the engines run now.
  FakeClock clock;
  RecordingSink out;
  std::map<std::string, FakeEngine*> engines;
  auto trial =
      makeTrial(out, false, clock, {{"petri", 1, 0}, {"nfa", 1, 2}}, blocks(1000), &engines);
  engines["nfa"]->cost_of_ = [](uint64_t n) { return n <= 16 ? 1.8 : 0.7; };
  const auto events = stream(200);
  run(*trial, events, 4);
  ASSERT_TRUE(trial->outcome().has_value());
  EXPECT_EQ(trial->outcome()->kept, "nfa");
  EXPECT_EQ(trial->outcome()->events, 64u);
  EXPECT_NEAR(trial->outcome()->measured[1].cpu_seconds, 16 * 1.8 + 48 * 0.7, 1e-9);
  EXPECT_EQ(out.sorted(), expected(events, false));
}

TEST(TrialDetectorTest, ACallbackHearsTheOutcomeOnce) {
  FakeClock clock;
  RecordingSink out;
  auto trial = makeTrial(out, false, clock, {{"petri", 10, 0}, {"nfa", 1, 0}}, limits(4));
  std::vector<std::string> heard;
  trial->onDecided([&](const TrialOutcome& o) { heard.push_back(o.kept); });
  run(*trial, stream(40), 1);
  EXPECT_EQ(heard, std::vector<std::string>{"nfa"});
}

}  // namespace
}  // namespace cepbus::plugin
