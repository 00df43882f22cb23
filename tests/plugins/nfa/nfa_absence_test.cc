// Absence at the edges of a pattern on the nfa engine: a trailing NOT decided
// when event time passes first.ts + W (an event after it or a watermark),
// a leading NOT over [last.ts - W, first.ts), under every strategy and both
// constructions.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/plugins/nfa/nfa_test_support.h"

namespace cepbus::plugins::nfa::testing {
namespace {

using TsList = std::vector<std::vector<Timestamp>>;

const std::vector<std::vector<std::string>> kConstructions = {
    {"construction=per_event"},
    {"construction=batched"},
    {"construction=batched", "batch_period=3"}};
const char* const kStrategies[] = {" STRATEGY skip_till_any_match",
                                   " STRATEGY skip_till_next_match", " STRATEGY strict_contiguity"};

EventPtr ev(const char* type, Timestamp ts, int64_t id) {
  return EventBuilder(type).at(ts).set("id", Value(id)).build();
}

// A detector for `query` reporting to `sink`.
std::unique_ptr<plugin::Detector> make(const std::string& query,
                                       const std::vector<std::string>& options,
                                       MatchRecorder& sink) {
  auto q = pattern::parseQuery(query);
  EXPECT_TRUE(q.isOk()) << query << ": " << q.status().message();
  auto opts = plugin::DetectorOptions::parse(options);
  auto d = nfaPlugin()->createDetector("nfa", *q, *opts, sink);
  EXPECT_TRUE(d.isOk()) << query << ": " << d.status().message();
  return d ? std::move(d).value() : nullptr;
}

TEST(NfaAbsenceTest, TrailingNegationDropsAMatchWithATiedEventInItsWindow) {
  // (a, b) matches unless a C with c.id = a.id has b.ts < c.ts <= a.ts + 10.
  const std::string q =
      "PATTERN SEQ(A a, B b, NOT(C c)) WHERE c.id = a.id AND b.id = a.id WITHIN 10";
  const std::vector<EventPtr> events = {
      ev("A", 1, 1),  ev("B", 2, 1),  // cancelled by c(1) at 11, the window's last instant
      ev("A", 3, 2),  ev("B", 4, 2),  // c(2) at 4 is not after b: kept
      ev("C", 4, 2),  ev("C", 5, 3),  // c(3): no A with id 3
      ev("A", 6, 3),  ev("B", 7, 3),  // c(3) at 17 is after 6 + 10: kept
      ev("C", 11, 1), ev("C", 17, 3)};
  // Every strategy binds the same pairs here (each A's B is the next event
  // of its id and adjacent to it); only the trailing C decides.
  for (const char* strategy : kStrategies) {
    for (const auto& options : kConstructions) {
      MatchRecorder sink;
      ASSERT_TRUE(runQuery(q + strategy, events, options, sink).isOk());
      EXPECT_EQ(sink.sortedTs(), (TsList{{3, 4}, {6, 7}})) << strategy << options.back();
    }
  }
}

TEST(NfaAbsenceTest, SingleElementTrailingNegation) {
  // a matches when no C comes in (a.ts, a.ts + 5].
  const std::string q = "PATTERN SEQ(A a, NOT(C c)) WITHIN 5";
  for (const char* strategy : kStrategies) {
    for (const auto& options : kConstructions) {
      MatchRecorder sink;
      ASSERT_TRUE(runQuery(q + strategy, letters("a1 c1 a2 c7 a8 a20 c25"), options, sink).isOk());
      // a1: c7 is past 6; c1 is not after a1. a2: c7 is at 2 + 5. a8: nothing
      // up to 13. a20: c25 at 20 + 5.
      EXPECT_EQ(sink.sortedTs(), (TsList{{1}, {8}})) << strategy << options.back();
    }
  }
}

TEST(NfaAbsenceTest, TrailingMatchComesOutWhenTheWatermarkPassesItsWindowNotBefore) {
  const std::string q = "PATTERN SEQ(A a, B b, NOT(C c)) WITHIN 10";
  for (const auto& options : kConstructions) {
    MatchRecorder sink;
    auto d = make(q, options, sink);
    ASSERT_NE(d, nullptr);
    ASSERT_TRUE(d->onEvent(ev("A", 0, 1)).isOk());
    ASSERT_TRUE(d->onEvent(ev("B", 4, 1)).isOk());
    ASSERT_TRUE(d->onWatermark(9).isOk());
    EXPECT_EQ(sink.size(), 0u) << options.back();
    // A pause is not the passing of time: a C at 10 may still come.
    ASSERT_TRUE(d->flush().isOk());
    EXPECT_EQ(sink.size(), 0u) << options.back();
    ASSERT_TRUE(d->onWatermark(10).isOk());
    EXPECT_EQ(sink.sortedTs(), (TsList{{0, 4}})) << options.back();
  }
}

TEST(NfaAbsenceTest, ACancellingEventAtTheWindowsEndArrivesBeforeTheWatermarkPassesIt) {
  for (const auto& options : kConstructions) {
    MatchRecorder sink;
    auto d = make("PATTERN SEQ(A a, NOT(C c)) WITHIN 10", options, sink);
    ASSERT_NE(d, nullptr);
    ASSERT_TRUE(d->onEvent(ev("A", 0, 1)).isOk());
    ASSERT_TRUE(d->onWatermark(9).isOk());
    ASSERT_TRUE(d->onEvent(ev("C", 10, 1)).isOk());
    ASSERT_TRUE(d->onWatermark(plugin::Detector::kEndOfTime).isOk());
    ASSERT_TRUE(d->flush().isOk());
    EXPECT_EQ(sink.size(), 0u) << options.back();
  }
}

TEST(NfaAbsenceTest, ALaterEventDecidesTheMatchWithoutAWatermark) {
  for (const auto& options : kConstructions) {
    MatchRecorder sink;
    auto d = make("PATTERN SEQ(A a, NOT(C c)) WITHIN 10", options, sink);
    ASSERT_NE(d, nullptr);
    ASSERT_TRUE(d->onEvent(ev("A", 0, 1)).isOk());
    ASSERT_TRUE(d->onEvent(ev("X", 10, 1)).isOk());
    EXPECT_EQ(sink.size(), 0u) << options.back();
    ASSERT_TRUE(d->onEvent(ev("X", 11, 1)).isOk());
    EXPECT_EQ(sink.size(), 1u) << options.back();
  }
}

TEST(NfaAbsenceTest, ParkedMatchesHoldTheirEventsAndLetThemGo) {
  MatchRecorder sink;
  auto d = make("PATTERN SEQ(A a, B b, NOT(C c)) WITHIN 10", {"construction=per_event"}, sink);
  ASSERT_NE(d, nullptr);
  ASSERT_TRUE(d->onEvent(ev("A", 0, 1)).isOk());
  ASSERT_TRUE(d->onEvent(ev("B", 1, 1)).isOk());
  // a0 on its stack, and the parked match's two events.
  EXPECT_EQ(d->state()->partial_matches, 3u);
  ASSERT_TRUE(d->onWatermark(10).isOk());
  EXPECT_EQ(sink.size(), 1u);
  EXPECT_EQ(d->state()->partial_matches, 1u);
  EXPECT_EQ(d->state()->peak_partial_matches, 3u);
}

TEST(NfaAbsenceTest, LeadingNegationLooksBackFromTheLastEvent) {
  // No C with id = a.id in [b.ts - 10, a.ts).
  const std::string q =
      "PATTERN SEQ(NOT(C c), A a, B b) WHERE c.id = a.id AND b.id = a.id WITHIN 10";
  // (a5, b12): c2 is at 12 - 10, negated. (a6, b14): c3 is before 14 - 10,
  // kept. (a20, b21): c20 is not before a20, kept.
  const std::vector<EventPtr> events = {ev("C", 2, 1),  ev("C", 3, 2),  ev("A", 5, 1),
                                        ev("A", 6, 2),  ev("B", 12, 1), ev("B", 14, 2),
                                        ev("C", 20, 3), ev("A", 20, 3), ev("B", 21, 3)};
  for (const char* strategy : kStrategies) {
    for (const auto& options : kConstructions) {
      MatchRecorder sink;
      ASSERT_TRUE(runQuery(q + strategy, events, options, sink).isOk());
      // Strict contiguity: only a20 and b21 are adjacent.
      const TsList expected = std::string(strategy).find("strict") != std::string::npos
                                  ? TsList{{20, 21}}
                                  : TsList{{6, 14}, {20, 21}};
      EXPECT_EQ(sink.sortedTs(), expected) << strategy << options.back();
    }
  }
}

TEST(NfaAbsenceTest, NegationAtBothEndsChecksBoth) {
  const std::string q = "PATTERN SEQ(NOT(C c), A a, NOT(D d)) WITHIN 5";
  for (const auto& options : kConstructions) {
    MatchRecorder sink;
    // a3: c1 in [-2, 3). a10: nothing before, d12 after. a20: neither.
    ASSERT_TRUE(runQuery(q, letters("c1 a3 a10 d12 a20"), options, sink).isOk());
    EXPECT_EQ(sink.sortedTs(), (TsList{{20}})) << options.back();
  }
}

TEST(NfaAbsenceTest, EdgeNegationWithoutAWindowIsRefused) {
  // The parser refuses it; a query built without the parser reaches the engine.
  auto q = pattern::parseQuery("PATTERN SEQ(A a, NOT(C c)) WITHIN 5");
  ASSERT_TRUE(q.isOk());
  q->within.reset();
  MatchRecorder sink;
  auto d = nfaPlugin()->createDetector("nfa", *q, plugin::DetectorOptions(), sink);
  ASSERT_FALSE(d.isOk());
  EXPECT_NE(d.status().message().find("the nfa engine runs NOT(C) at the start or the end of a "
                                      "pattern only with WITHIN n"),
            std::string::npos)
      << d.status().message();
}

}  // namespace
}  // namespace cepbus::plugins::nfa::testing
