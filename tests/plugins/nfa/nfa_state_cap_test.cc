// The nfa engine's caps on its state (max_partition_partial_matches,
// max_partial_matches, state_policy): what each policy keeps, drops and
// counts, and that a runaway key holds no more than its cap.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/plugins/nfa/nfa_test_support.h"

namespace cepbus::plugins::nfa::testing {
namespace {

using ::testing::HasSubstr;
using TsList = std::vector<std::vector<Timestamp>>;

EventPtr keyed(const char* type, Timestamp ts, const char* key) {
  return EventBuilder(type).at(ts).set("k", Value(key)).build();
}

std::unique_ptr<plugin::Detector> make(const std::string& query, MatchRecorder& sink,
                                       const std::vector<std::string>& options) {
  auto q = pattern::parseQuery(query);
  EXPECT_TRUE(q.isOk()) << q.status().message();
  auto d = nfaPlugin()->createDetector("nfa", *q, *plugin::DetectorOptions::parse(options), sink);
  EXPECT_TRUE(d.isOk()) << d.status().message();
  return d ? std::move(d).value() : nullptr;
}

plugin::DetectorState stateOf(const plugin::Detector& d) {
  const std::optional<plugin::DetectorState> s = d.state();
  EXPECT_TRUE(s.has_value());
  return s.value_or(plugin::DetectorState{});
}

constexpr const char* kPair = "PATTERN SEQ(A a, B b) WITHIN 100 PARTITION BY k";

TEST(NfaStateCapTest, APartitionOverItsCapDropsItsOldestEntries) {
  for (const char* construction : {"construction=per_event", "construction=batched"}) {
    SCOPED_TRACE(construction);
    MatchRecorder sink;
    auto d = make(kPair, sink, {construction, "max_partition_partial_matches=3"});
    ASSERT_NE(d, nullptr);
    for (Timestamp ts = 1; ts <= 5; ++ts) ASSERT_TRUE(d->onEvent(keyed("A", ts, "x")));
    EXPECT_EQ(stateOf(*d).partial_matches, 3u);
    EXPECT_EQ(stateOf(*d).evicted, 2u);
    EXPECT_EQ(stateOf(*d).peak_partial_matches, 3u);
    ASSERT_TRUE(d->onEvent(keyed("B", 6, "x")));
    ASSERT_TRUE(d->flush());
    // a1 and a2 are gone: only the three newest A pair with the B.
    EXPECT_EQ(sink.sortedTs(), (TsList{{3, 6}, {4, 6}, {5, 6}}));
  }
}

// Batched construction holds the B back until its batch ends; the cap that
// strikes before then builds B's matches first.
TEST(NfaStateCapTest, ACapLosesNoMatchAlreadyCompleteUnderBatchedConstruction) {
  MatchRecorder sink;
  auto d = make(kPair, sink, {"construction=batched", "max_partition_partial_matches=3"});
  ASSERT_NE(d, nullptr);
  Timestamp ts = 0;
  for (const char* type : {"A", "A", "A", "B", "A", "A", "A", "B"}) {
    ASSERT_TRUE(d->onEvent(keyed(type, ++ts, "x")));
  }
  ASSERT_TRUE(d->flush());
  EXPECT_EQ(sink.sortedTs(), (TsList{{1, 4}, {2, 4}, {3, 4}, {5, 8}, {6, 8}, {7, 8}}));
  EXPECT_EQ(stateOf(*d).evicted, 3u);
}

TEST(NfaStateCapTest, RefuseNewKeepsThePartialMatchesHeldAndTheyStillComplete) {
  MatchRecorder sink;
  auto d = make(
      kPair, sink,
      {"construction=per_event", "max_partition_partial_matches=3", "state_policy=refuse_new"});
  ASSERT_NE(d, nullptr);
  for (Timestamp ts = 1; ts <= 5; ++ts) ASSERT_TRUE(d->onEvent(keyed("A", ts, "x")));
  EXPECT_EQ(stateOf(*d).partial_matches, 3u);
  EXPECT_EQ(stateOf(*d).evicted, 2u);
  // The accepting event is taken at the cap: it completes, it does not start.
  ASSERT_TRUE(d->onEvent(keyed("B", 6, "x")));
  ASSERT_TRUE(d->flush());
  EXPECT_EQ(sink.sortedTs(), (TsList{{1, 6}, {2, 6}, {3, 6}}));
  // Another key has room of its own.
  ASSERT_TRUE(d->onEvent(keyed("A", 7, "y")));
  ASSERT_TRUE(d->onEvent(keyed("B", 8, "y")));
  EXPECT_EQ(sink.size(), 4u);
}

TEST(NfaStateCapTest, OverTheTotalCapTheLeastRecentlyActivePartitionsAreShed) {
  MatchRecorder sink;
  auto d = make(kPair, sink, {"construction=per_event", "max_partial_matches=10"});
  ASSERT_NE(d, nullptr);
  Timestamp ts = 0;
  for (const char* key : {"x", "y", "z"}) {
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(d->onEvent(keyed("A", ++ts, key)));
  }
  EXPECT_EQ(stateOf(*d).evicted, 0u);  // 9 held
  // Two more of z pass the cap of 10: x, the quietest, goes whole, down to
  // nine tenths of the cap or below.
  ASSERT_TRUE(d->onEvent(keyed("A", ++ts, "z")));
  ASSERT_TRUE(d->onEvent(keyed("A", ++ts, "z")));
  EXPECT_EQ(stateOf(*d).evicted, 3u);
  EXPECT_EQ(stateOf(*d).partial_matches, 8u);
  ASSERT_TRUE(d->onEvent(keyed("B", ++ts, "x")));
  ASSERT_TRUE(d->onEvent(keyed("B", ++ts, "y")));
  ASSERT_TRUE(d->flush());
  EXPECT_EQ(sink.size(), 3u);  // y's three A; x's are gone
}

TEST(NfaStateCapTest, WithoutPartitionsTheTotalCapDropsTheOldest) {
  MatchRecorder sink;
  auto d = make("PATTERN SEQ(A a, B b) WITHIN 100", sink,
                {"construction=per_event", "max_partial_matches=2"});
  ASSERT_NE(d, nullptr);
  for (Timestamp ts = 1; ts <= 4; ++ts) ASSERT_TRUE(d->onEvent(keyed("A", ts, "x")));
  ASSERT_TRUE(d->onEvent(keyed("B", 5, "x")));
  EXPECT_EQ(sink.sortedTs(), (TsList{{3, 5}, {4, 5}}));
  EXPECT_EQ(stateOf(*d).evicted, 2u);
}

// The scenario of a start event per millisecond on one key, a long window
// and no completion: at the cap the state stays flat, every further start
// costs one eviction.
TEST(NfaStateCapTest, ARunawayKeyHoldsNoMoreThanItsCap) {
  MatchRecorder sink;
  auto d = make("PATTERN SEQ(Start s, End e) WITHIN 21600000 PARTITION BY k", sink,
                {"max_partition_partial_matches=1000"});
  ASSERT_NE(d, nullptr);
  uint64_t bytes_at_cap = 0;
  for (Timestamp ts = 1; ts <= 20000; ++ts) {
    ASSERT_TRUE(d->onEvent(keyed("Start", ts, "hot")));
    if (ts == 1000) bytes_at_cap = stateOf(*d).bytes;
  }
  const plugin::DetectorState s = stateOf(*d);
  EXPECT_EQ(s.partial_matches, 1000u);
  EXPECT_EQ(s.peak_partial_matches, 1000u);
  EXPECT_EQ(s.evicted, 19000u);
  EXPECT_GT(bytes_at_cap, 0u);
  EXPECT_EQ(s.bytes, bytes_at_cap);
  ASSERT_TRUE(d->onEvent(keyed("End", 20001, "hot")));
  ASSERT_TRUE(d->flush());
  EXPECT_EQ(sink.size(), 1000u);
}

TEST(NfaStateCapTest, TheStateBytesGoBackToNothingWhenTheStacksEmpty) {
  MatchRecorder sink;
  auto d = make(kPair, sink, {"construction=per_event"});
  ASSERT_NE(d, nullptr);
  ASSERT_TRUE(d->onEvent(keyed("A", 1, "x")));
  EXPECT_GT(stateOf(*d).bytes, 0u);
  ASSERT_TRUE(d->onEvent(keyed("A", 500, "y")));   // x's A expires
  ASSERT_TRUE(d->onEvent(keyed("A", 1000, "y")));  // so does y's first
  EXPECT_EQ(stateOf(*d).partial_matches, 1u);
  ASSERT_TRUE(d->onEvent(keyed("B", 2000, "y")));  // nothing within the window
  EXPECT_EQ(stateOf(*d).partial_matches, 0u);
  EXPECT_EQ(stateOf(*d).bytes, 0u);
  EXPECT_EQ(stateOf(*d).evicted, 0u);  // expiry is no eviction
}

TEST(NfaStateCapTest, BadCapOptionsAreRefusedByName) {
  auto q = pattern::parseQuery(kPair);
  ASSERT_TRUE(q.isOk());
  MatchRecorder sink;
  for (const char* bad : {"max_partial_matches=0", "max_partition_partial_matches=-5",
                          "max_partial_matches=many", "state_policy=forget"}) {
    SCOPED_TRACE(bad);
    const std::vector<std::string> options = {bad};
    auto d = nfaPlugin()->createDetector("nfa", *q, *plugin::DetectorOptions::parse(options), sink);
    ASSERT_FALSE(d.isOk());
    EXPECT_THAT(d.status().message(), HasSubstr(std::string(bad)));
  }
}

}  // namespace
}  // namespace cepbus::plugins::nfa::testing
