#pragma once

// The caps on an engine's state (max_partition_partial_matches,
// max_partial_matches, state_policy; docs/engines.md, "Bounded state") as a
// test suite parametrized by engine, instantiated by the engines that run
// PARTITION BY through plugin::PartitionedDetector (algebra, petri): what each
// policy keeps, drops and counts in one detector and over partitions, and
// that a bad value is refused naming the option. The two engines count their
// partial matches in different units (operand instances, tokens), but for a
// SEQ of two single elements both hold one per event of the first element,
// so the figures are the same.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/pattern/parser.h"
#include "tests/plugins/built_engines.h"
#include "tests/testing/match_recorder.h"

namespace cepbus::plugins::testing {

class StateCapTest : public ::testing::TestWithParam<std::string> {
 protected:
  using TsList = std::vector<std::vector<Timestamp>>;

  // "x:A1": an event of type A at ts 1 with k = "x" (no key without "x:").
  static EventPtr ev(const std::string& text) {
    const size_t colon = text.find(':');
    const std::string body = colon == std::string::npos ? text : text.substr(colon + 1);
    EventBuilder b(body.substr(0, 1));
    b.at(std::stoll(body.substr(1)));
    if (colon != std::string::npos) b.set("k", Value(text.substr(0, colon)));
    return b.build();
  }

  Result<std::unique_ptr<plugin::GuardedDetector>> make(const std::string& query,
                                                        const std::vector<std::string>& options) {
    auto q = pattern::parseQuery(query);
    if (!q) return q.status();
    auto opts = plugin::DetectorOptions::parse(options);
    if (!opts) return opts.status();
    return loadBuiltEngine(GetParam())->createDetector(GetParam(), *q, *opts, sink_);
  }

  // Runs `events` (then flush()) through a detector of `query`; its state after.
  plugin::DetectorState run(const std::string& query, const std::vector<std::string>& options,
                            const std::vector<std::string>& events) {
    auto d = make(query, options);
    EXPECT_TRUE(d.isOk()) << d.status().message();
    if (!d) return {};
    for (const std::string& e : events) EXPECT_TRUE((*d)->onEvent(ev(e))) << e;
    EXPECT_TRUE((*d)->flush());
    const std::optional<plugin::DetectorState> s = (*d)->state();
    EXPECT_TRUE(s.has_value());
    return s.value_or(plugin::DetectorState{});
  }

  cepbus::testing::MatchRecorder sink_;
};

inline constexpr const char* kCapPair = "PATTERN SEQ(A a, B b) WITHIN 100 CONTEXT unrestricted";
inline constexpr const char* kCapKeyedPair =
    "PATTERN SEQ(A a, B b) WITHIN 100 PARTITION BY k CONTEXT unrestricted";

TEST_P(StateCapTest, OverItsCapADetectorDropsItsOldestPartialMatches) {
  const auto s =
      run(kCapPair, {"max_partition_partial_matches=3"}, {"A1", "A2", "A3", "A4", "A5", "B6"});
  // a1 and a2 are gone: a match that needed them is not found, the later ones are.
  EXPECT_EQ(sink_.sortedTs(), (TsList{{3, 6}, {4, 6}, {5, 6}}));
  EXPECT_EQ(s.partial_matches, 3u);
  EXPECT_EQ(s.peak_partial_matches, 3u);
  EXPECT_EQ(s.evicted, 2u);
  EXPECT_GT(s.bytes, 0u);
}

TEST_P(StateCapTest, WithoutPartitionsTheSmallerCapApplies) {
  const auto s = run(kCapPair, {"max_partial_matches=2"}, {"A1", "A2", "A3", "B4"});
  EXPECT_EQ(sink_.sortedTs(), (TsList{{2, 4}, {3, 4}}));
  EXPECT_EQ(s.evicted, 1u);
}

TEST_P(StateCapTest, RefuseNewKeepsWhatItHoldsAndItGoesOnCompleting) {
  const auto s = run(kCapPair, {"max_partition_partial_matches=3", "state_policy=refuse_new"},
                     {"A1", "A2", "A3", "A4", "A5", "B6", "A7", "B8"});
  EXPECT_EQ(sink_.sortedTs(), (TsList{{1, 6}, {1, 8}, {2, 6}, {2, 8}, {3, 6}, {3, 8}}));
  EXPECT_EQ(s.partial_matches, 3u);
  EXPECT_EQ(s.evicted, 3u);  // a4, a5, a7
}

TEST_P(StateCapTest, EachPartitionHasItsOwnCap) {
  const auto s = run(kCapKeyedPair, {"max_partition_partial_matches=1"},
                     {"x:A1", "x:A2", "y:A3", "x:B4", "y:B5"});
  EXPECT_EQ(sink_.sortedTs(), (TsList{{2, 4}, {3, 5}}));
  EXPECT_EQ(s.partial_matches, 2u);
  EXPECT_EQ(s.evicted, 1u);
}

TEST_P(StateCapTest, OverTheTotalCapTheLeastRecentlyActivePartitionsAreShed) {
  const auto s = run(kCapKeyedPair, {"max_partial_matches=4"},
                     {"x:A1", "x:A2", "y:A3", "y:A4", "z:A5", "y:B6", "x:B7"});
  // x, the least recently active, went whole with its two partial matches;
  // y, more recent, still completes.
  EXPECT_EQ(sink_.sortedTs(), (TsList{{3, 6}, {4, 6}}));
  EXPECT_EQ(s.evicted, 2u);
  EXPECT_EQ(s.partial_matches, 3u);  // y's two, z's one; x made again holds none
}

TEST_P(StateCapTest, AtTheTotalCapRefuseNewMakesNoPartition) {
  const auto s = run(kCapKeyedPair, {"max_partial_matches=2", "state_policy=refuse_new"},
                     {"x:A1", "y:A2", "z:A3", "z:B4", "x:B5"});
  EXPECT_EQ(sink_.sortedTs(), (TsList{{1, 5}}));
  EXPECT_EQ(s.evicted, 2u);  // z's two events went nowhere
  EXPECT_EQ(s.partial_matches, 2u);
}

TEST_P(StateCapTest, ABadValueIsRefusedNamingTheOption) {
  struct Bad {
    std::string option, message;
  };
  const std::vector<Bad> bad = {
      {"max_partition_partial_matches=0",
       "option max_partition_partial_matches=0: expected a positive integer"},
      {"max_partial_matches=ten", "option max_partial_matches=ten: expected a positive integer"},
      {"max_partial_matches=-5", "option max_partial_matches=-5: expected a positive integer"},
      {"state_policy=lru", "option state_policy=lru: expected drop_oldest or refuse_new"},
  };
  for (const char* query : {kCapPair, kCapKeyedPair}) {
    for (const Bad& b : bad) {
      SCOPED_TRACE(std::string(query) + " " + b.option);
      auto d = make(query, {b.option});
      ASSERT_FALSE(d.isOk());
      EXPECT_THAT(d.status().message(), ::testing::HasSubstr(b.message));
    }
  }
}

}  // namespace cepbus::plugins::testing
