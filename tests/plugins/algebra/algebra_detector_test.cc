// The detector's state under the recent semantics stays bounded on a long
// stream (P1: |Q|, |S| below k per subexpression), while the unrestricted
// semantics without a time bound keeps every pending instance. Compiled
// against the plugin's sources to read the retained state.

#include "plugins/algebra/algebra_detector.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "plugins/algebra/algebra_plan.h"

namespace cepbus::plugins::algebra {
namespace {

class CountingSink : public plugin::MatchSink {
 public:
  void onMatch(const plugin::Match&) override { ++matches; }
  size_t matches = 0;
};

struct StreamRun {
  size_t max_retained = 0;
  size_t matches = 0;
};

StreamRun runStream(const std::string& query, int events) {
  auto q = pattern::parseQuery(query);
  EXPECT_TRUE(q.isOk()) << q.status().message();
  auto plan = compilePlan(*q, plugin::DetectorOptions());
  EXPECT_TRUE(plan.isOk()) << plan.status().message();
  CountingSink sink;
  AlgebraDetector d(*plan, sink);
  std::mt19937 rng(3);
  StreamRun r;
  for (int i = 0; i < events; ++i) {
    const std::string type(1, static_cast<char>('A' + rng() % 6));
    EXPECT_TRUE(d.onEvent(EventBuilder(type).at(i).build()).isOk());
    r.max_retained = std::max(r.max_retained, d.retainedInstances());
  }
  EXPECT_TRUE(d.flush().isOk());
  r.matches = sink.matches;
  return r;
}

TEST(AlgebraDetectorState, RecentStateIsBoundedWithoutATimeBound) {
  const std::string expr = "((A ; B) + (C | D)) ; (((A ; E) ~ (E ; F)) - B) ; (C || C)";
  const StreamRun recent = runStream("PATTERN " + expr + " CONTEXT recent", 50000);
  EXPECT_GT(recent.matches, 100u);
  // 19 subexpressions; each keeps at most a few instances per operand.
  EXPECT_LE(recent.max_retained, 40u);
  // Unrestricted keeps every A for the B that may follow.
  const StreamRun all = runStream("PATTERN A ; B CONTEXT unrestricted", 3000);
  EXPECT_GT(all.max_retained, 300u);
}

TEST(AlgebraDetectorState, PredicateOverIterationKeepsItsRunInsideTheBound) {
  const StreamRun r =
      runStream("PATTERN SEQ(A a, AGG(B+ b[], count(b[]) >= 2), C c) WITHIN 30", 50000);
  EXPECT_GT(r.matches, 100u);
  EXPECT_LE(r.max_retained, 40u);
}

// A tick closes when a later timestamp arrives (or at flush), so every
// event of a timestamp is seen before the instances ending there are chosen.
TEST(AlgebraDetectorState, ReportsATickWhenItClosesAndRejectsOutOfOrderEvents) {
  auto q = pattern::parseQuery("PATTERN A ; B");
  ASSERT_TRUE(q.isOk());
  auto plan = compilePlan(*q, plugin::DetectorOptions());
  ASSERT_TRUE(plan.isOk());
  CountingSink sink;
  AlgebraDetector d(*plan, sink);
  ASSERT_TRUE(d.onEvent(EventBuilder("A").at(1).build()).isOk());
  ASSERT_TRUE(d.onEvent(EventBuilder("B").at(2).build()).isOk());
  EXPECT_EQ(sink.matches, 0u);
  ASSERT_TRUE(d.onEvent(EventBuilder("C").at(3).build()).isOk());
  EXPECT_EQ(sink.matches, 1u);
  ASSERT_TRUE(d.onEvent(EventBuilder("B").at(4).build()).isOk());
  EXPECT_FALSE(d.onEvent(EventBuilder("B").at(2).build()).isOk());
  ASSERT_TRUE(d.flush().isOk());
  EXPECT_EQ(sink.matches, 2u);
}

std::unique_ptr<AlgebraDetector> detector(const std::string& query, plugin::MatchSink& sink) {
  auto q = pattern::parseQuery(query);
  EXPECT_TRUE(q.isOk()) << q.status().message();
  auto plan = compilePlan(*q, plugin::DetectorOptions());
  EXPECT_TRUE(plan.isOk()) << plan.status().message();
  return std::make_unique<AlgebraDetector>(*plan, sink);
}

uint64_t kept(const AlgebraDetector& d) {
  const std::optional<plugin::DetectorState> s = d.state();
  EXPECT_TRUE(s.has_value());
  return s ? s->partial_matches : 0;
}

EventPtr at(const char* type, Timestamp ts, double prob = 1) {
  return EventBuilder(type).at(ts).probability(prob).build();
}

// SEQ(A, B, C) is (A ; B) ; C: the first operator keeps the A instances for a
// later B, the second the A;B instances for a later C.
TEST(AlgebraDetectorState, StateCountsTheOperandInstancesKeptBetweenTicks) {
  CountingSink sink;
  auto d = detector("PATTERN SEQ(A a, B b, C c) WITHIN 8 CONTEXT unrestricted", sink);
  EXPECT_EQ(kept(*d), 0u);
  ASSERT_TRUE(d->onEvent(at("A", 1)));
  ASSERT_TRUE(d->onEvent(at("A", 2)));
  // The tick of ts 2 is still open: only a1 is counted.
  EXPECT_EQ(kept(*d), 1u);
  ASSERT_TRUE(d->onEvent(at("B", 3)));
  ASSERT_TRUE(d->flush());
  // a1, a2; b3, one lazy instance standing for a1;b3 and a2;b3.
  EXPECT_EQ(kept(*d), 3u);
  EXPECT_EQ(kept(*d), d->retainedInstances());
  // Past the window the next B and C let go of all of them.
  ASSERT_TRUE(d->onEvent(at("B", 100)));
  ASSERT_TRUE(d->onEvent(at("C", 101)));
  ASSERT_TRUE(d->flush());
  EXPECT_EQ(sink.matches, 0u);
  EXPECT_EQ(kept(*d), 0u);
  EXPECT_EQ(d->state()->peak_partial_matches, 3u);
}

// Under unrestricted semantics an instance less likely than the bound never
// enters an operand's state.
TEST(AlgebraDetectorState, ProbabilityBoundKeepsFewerInstances) {
  const std::vector<EventPtr> events = {at("A", 1, 0.5), at("A", 2, 0.95), at("B", 3, 0.95)};
  CountingSink all_sink, likely_sink;
  auto all = detector("PATTERN SEQ(A a, B b, C c) WITHIN 8 CONTEXT unrestricted", all_sink);
  auto likely = detector(
      "PATTERN SEQ(A a, B b, C c) WITHIN 8 PROBABILITY >= 0.9 CONTEXT unrestricted", likely_sink);
  ASSERT_TRUE(all->onEvents(events));
  ASSERT_TRUE(all->flush());
  ASSERT_TRUE(likely->onEvents(events));
  ASSERT_TRUE(likely->flush());
  EXPECT_EQ(kept(*all), 3u);     // a1, a2 and b3 (standing for a1;b3 and a2;b3)
  EXPECT_EQ(kept(*likely), 2u);  // a2 and b3 (a2;b3 0.9025)
}

// CORE's pile-up: instances of (A ; B) pile up and none completes. The
// state holds an instance per event in the window, not one per combination
// (about 250,000 pairs here); the combinations are built when the last
// element comes, nested sequences included.
TEST(AlgebraDetectorState, PileUpKeepsAnInstancePerEventNotPerCombination) {
  for (const std::string order : {"AB", "ABC"}) {
    std::string query = "PATTERN SEQ(";
    for (char t : order) query += std::string(1, t) + " " + static_cast<char>(t + 32) + ", ";
    query += "X x) WITHIN 1000 CONTEXT unrestricted";
    CountingSink sink;
    auto d = detector(query, sink);
    std::mt19937_64 rng(5);
    std::vector<uint64_t> ways(order.size() + 1, 0);  // ways[k]: in-window prefixes of length k
    ways[0] = 1;
    for (Timestamp ts = 1; ts <= 20000; ++ts) {
      const char type = order[rng() % order.size()];
      ASSERT_TRUE(d->onEvent(at(std::string(1, type).c_str(), ts)));
      if (20001 - ts > 1000) continue;
      for (size_t k = order.size(); k-- > 0;) {
        if (order[k] == type) ways[k + 1] += ways[k];
      }
    }
    ASSERT_TRUE(d->onEvent(at("X", 20001)));
    ASSERT_TRUE(d->flush());
    EXPECT_LT(d->state()->peak_partial_matches, 3u * 1024) << query;
    EXPECT_EQ(sink.matches, ways[order.size()]) << query;
    EXPECT_GT(sink.matches, 1000u);
  }
}

// A Kleene element under CONTEXT unrestricted keeps each of its events once
// (the runs' stack) and builds a run only as far as its step predicate
// accepts it, when the C comes: falling B's, whose unions the predicate all
// rejects, give one-event runs only; rising ones give every subset, from a
// state that still holds an instance or two per event.
TEST(AlgebraDetectorState, KleeneClosureKeepsEachEventOnceAndExtendsOnlyAcceptedRuns) {
  for (const bool rising : {false, true}) {
    const int n = rising ? 16 : 60;
    CountingSink sink;
    auto d = detector(
        "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > b[i-1].x WITHIN 1000 CONTEXT unrestricted",
        sink);
    ASSERT_TRUE(d->onEvent(at("A", 1)));
    for (Timestamp ts = 2; ts <= n + 1; ++ts) {
      const int64_t x = rising ? ts : 1000 - ts;
      ASSERT_TRUE(d->onEvent(EventBuilder("B").at(ts).set("x", Value(x)).build()));
    }
    ASSERT_TRUE(d->onEvent(at("C", n + 2)));
    ASSERT_TRUE(d->flush());
    EXPECT_EQ(sink.matches, rising ? (uint64_t{1} << n) - 1 : static_cast<uint64_t>(n));
    EXPECT_LE(d->state()->peak_partial_matches, 3u * static_cast<uint64_t>(n)) << rising;
  }
}

// STRATEGY strict_contiguity on a plain SEQ runs in the detector: a run is
// extended only by the event right before it, so 40 rising B's give the one
// contiguous match rather than 2^40 - 1 runs to select from.
TEST(AlgebraDetectorState, StrictContiguityFollowsOnlyAdjacentEvents) {
  CountingSink sink;
  auto d = detector(
      "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > b[i-1].x CONTEXT unrestricted "
      "STRATEGY strict_contiguity",
      sink);
  ASSERT_TRUE(d->onEvent(at("A", 1)));
  for (Timestamp ts = 2; ts <= 41; ++ts) {
    ASSERT_TRUE(d->onEvent(EventBuilder("B").at(ts).set("x", Value(int64_t{ts})).build()));
  }
  ASSERT_TRUE(d->onEvent(at("C", 42)));
  ASSERT_TRUE(d->flush());
  EXPECT_EQ(sink.matches, 1u);
}

// The matches a detector of `query` reports over `events`.
size_t matchesOf(const std::string& query, const std::vector<EventPtr>& events) {
  CountingSink sink;
  auto d = detector(query, sink);
  for (const EventPtr& e : events) EXPECT_TRUE(d->onEvent(e));
  EXPECT_TRUE(d->flush());
  return sink.matches;
}

EventPtr bx(Timestamp ts, int64_t x) { return EventBuilder("B").at(ts).set("x", Value(x)).build(); }

const char* const kNext = " CONTEXT unrestricted STRATEGY skip_till_next_match";

// STRATEGY skip_till_next_match on a SEQ whose steering reads each element
// alone runs in the detector: each B of a run is the next B after the one
// before it, so 20 B's give the 20 prefixes of the one run from a1 rather
// than 2^20 - 1 runs to select from; the second C is the first C after no run.
TEST(AlgebraDetectorState, NextMatchTakesOnlyTheNextEventOfEachRun) {
  std::vector<EventPtr> events{at("A", 1)};
  for (Timestamp ts = 2; ts <= 21; ++ts) events.push_back(at("B", ts));
  events.push_back(at("C", 22));
  events.push_back(at("C", 23));
  EXPECT_EQ(matchesOf(std::string("PATTERN SEQ(A a, B+ b[], C c) WITHIN 1000") + kNext, events),
            20u);
}

// With a step predicate a run skips the B's it rejects and takes the next
// one it accepts: over x = 5 1 6 2 7 every B starts a run, and the next
// larger x extends it: 5 6 7 (3 prefixes), 1 6 7 (3), 6 7 (2), 2 7 (2) and 7,
// the C the first after each run's last B.
TEST(AlgebraDetectorState, NextMatchFollowsTheStepPredicate) {
  const std::vector<EventPtr> events{bx(1, 5), bx(2, 1), bx(3, 6), bx(4, 2), bx(5, 7), at("C", 6)};
  EXPECT_EQ(
      matchesOf(std::string("PATTERN SEQ(B+ b[], C c) WHERE b[i].x > b[i-1].x WITHIN 1000") + kNext,
                events),
      11u);
}

// A run takes the first of two events at one timestamp that its step
// predicate accepts, also where the element's runs are built at the tick of
// their last event (a lone Kleene element): 1 then 2 and 3 at ts 2 give the
// runs 1, 1 2, 2 and 3, not 1 3.
TEST(AlgebraDetectorState, NextMatchTakesTheFirstOfOneTimestampsEvents) {
  EXPECT_EQ(matchesOf(std::string("PATTERN SEQ(B+ b[]) WHERE b[i].x > b[i-1].x WITHIN 10") + kNext,
                      {bx(1, 1), bx(2, 2), bx(2, 3)}),
            4u);
}

TEST(AlgebraPlan, RunsNextMatchNativelyWhenEachElementSteersItself) {
  auto native = [](const std::string& query) {
    auto q = pattern::parseQuery(query);
    EXPECT_TRUE(q.isOk()) << q.status().message();
    return runsNatively(*q);
  };
  const std::string next = kNext;
  EXPECT_TRUE(native("PATTERN SEQ(A a, B+ b[], D d) WITHIN 20" + next));
  // d's conjunct names earlier elements: which D a run takes depends on them.
  EXPECT_FALSE(native("PATTERN SEQ(A a, B+ b[], D d) WHERE d.x < b[1].x + a.x" + next));
  EXPECT_TRUE(
      native("PATTERN SEQ(A a, B+ b[], D d) WHERE a.x > 1 AND b[i].x > b[i-1].x AND "
             "count(b[]) >= 2 AND sum(b[].x) < a.x" +
             next));
  // Which B a run takes depends on a: the selector decides.
  EXPECT_FALSE(native("PATTERN SEQ(A a, B+ b[], D d) WHERE b[i].x > a.x" + next));
  EXPECT_FALSE(native("PATTERN SEQ(A a, D d) WHERE d.x = a.x" + next));
  EXPECT_FALSE(native("PATTERN SEQ(A a, D d) PROBABILITY >= 0.5" + next));
  EXPECT_FALSE(native("PATTERN SEQ(A a, NOT(C c), D d)" + next));
}

// The host runs a NOT at an edge of a SEQ around the engine
// (bus/host/detection/edge_negation.h); the engine's own refusal says what
// it refuses, in its own words.
TEST(AlgebraPlan, RefusesANegationAtAnEdgeOfASeqInItsOwnWords) {
  const std::pair<const char*, const char*> cases[] = {
      {"PATTERN SEQ(NOT(C c), A a, B b) WITHIN 10", "refuses NOT(...) at the start of a SEQ"},
      {"PATTERN SEQ(A a, B b, NOT(C c)) WITHIN 10", "refuses NOT(...) at the end of a SEQ"}};
  for (const auto& [text, refusal] : cases) {
    auto q = pattern::parseQuery(text);
    ASSERT_TRUE(q.isOk()) << q.status().message();
    auto plan = compilePlan(*q, plugin::DetectorOptions());
    ASSERT_FALSE(plan.isOk()) << text;
    EXPECT_NE(plan.status().message().find(refusal), std::string::npos) << plan.status().message();
    EXPECT_EQ(plan.status().message().find("nfa"), std::string::npos) << plan.status().message();
  }
}

}  // namespace
}  // namespace cepbus::plugins::algebra
