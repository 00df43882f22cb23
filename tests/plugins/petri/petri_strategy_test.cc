// STRATEGY skip_till_next_match and strict_contiguity on the petri engine
// (run natively by the net of a plain sequence, selected by
// plugin::StrategyFactory from skip_till_any_match's matches elsewhere), on
// hand-made streams whose matches under each strategy are written out; one
// query at a time and several merged into one net.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "bus/host/loader/plugin_loader.h"
#include "tests/plugins/petri/petri_test_support.h"

namespace cepbus::plugins::petri {
namespace {

using testing::MatchRecorder;
using Matches = std::vector<std::vector<Timestamp>>;

plugin::PluginPtr petriPlugin() {
  static plugin::PluginLoader loader({std::string(CEPBUS_TEST_BUILD_DIR) + "/plugins"});
  static plugin::PluginPtr p = [] {
    auto loaded = loader.load("petri");
    EXPECT_TRUE(loaded.isOk()) << loaded.status().message();
    return loaded ? *loaded : nullptr;
  }();
  return p;
}

EventPtr ev(const char* type, Timestamp ts, int64_t x = 0) {
  return EventBuilder(type).at(ts).set("x", Value(x)).build();
}

Status feed(plugin::Detector& d, const std::vector<EventPtr>& events) {
  for (const EventPtr& e : events) {
    if (Status s = d.onEvent(e); !s) return s;
  }
  return d.flush();
}

Matches petri(const std::string& query, const std::vector<EventPtr>& events) {
  auto q = pattern::parseQuery(query);
  EXPECT_TRUE(q.isOk()) << query;
  MatchRecorder sink;
  auto d = petriPlugin()->createDetector("petri", *q, plugin::DetectorOptions(), sink);
  EXPECT_TRUE(d.isOk()) << query << ": " << d.status().message();
  if (!d) return {};
  EXPECT_TRUE(feed(**d, events)) << query;
  return sink.sortedTs();
}

std::vector<EventPtr> stream() {
  return {ev("A", 1), ev("C", 2), ev("B", 3), ev("A", 4), ev("B", 5), ev("B", 6)};
}

TEST(PetriStrategy, EachStrategyOnOneSequence) {
  const std::string q = "PATTERN SEQ(A a, B b)";
  EXPECT_EQ(petri(q, stream()), (Matches{{1, 3}, {1, 5}, {1, 6}, {4, 5}, {4, 6}}));
  EXPECT_EQ(petri(q + " STRATEGY skip_till_next_match", stream()), (Matches{{1, 3}, {4, 5}}));
  // C@2 lies between A@1 and B@3: every type counts for adjacency.
  EXPECT_EQ(petri(q + " STRATEGY strict_contiguity", stream()), (Matches{{4, 5}}));
}

TEST(PetriStrategy, NextMatchChecksTheNegationOnTheEventItTook) {
  // The run from A@1 takes B@3, the next B; C@2 (same x) negates it, and the
  // run does not go on to B@4, which skip_till_any_match pairs with A@1.
  const std::vector<EventPtr> s = {ev("A", 1), ev("C", 2, 1), ev("B", 3, 1), ev("B", 4, 2)};
  const std::string q = "PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x = b.x";
  EXPECT_EQ(petri(q, s), (Matches{{1, 4}}));
  EXPECT_EQ(petri(q + " STRATEGY skip_till_next_match", s), Matches{});
  EXPECT_EQ(petri(q + " STRATEGY strict_contiguity", s), Matches{});
}

TEST(PetriStrategy, NextMatchGrowsAKleeneElementGreedily) {
  const std::vector<EventPtr> s = {ev("A", 1), ev("B", 2, 1), ev("B", 3, 0), ev("B", 4, 2),
                                   ev("C", 5)};
  const std::string q = "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > b[i-1].x";
  EXPECT_EQ(petri(q, s).size(), 5u);
  // B@2, then the next rising B (B@4, not B@3); each prefix closed by C@5.
  EXPECT_EQ(petri(q + " STRATEGY skip_till_next_match", s), (Matches{{1, 2, 4, 5}, {1, 2, 5}}));
  EXPECT_EQ(petri(q + " STRATEGY strict_contiguity", s), Matches{});
}

class LabelledSink final : public plugin::MultiMatchSink {
 public:
  void onMatch(size_t pattern, const plugin::Match& match) override {
    std::vector<Timestamp> ts;
    for (size_t i = 0; i < match.size(); ++i) ts.push_back(match.ts(i));
    by_pattern[pattern].push_back(std::move(ts));
  }
  Matches sorted(size_t pattern) const {
    Matches m = by_pattern[pattern];
    std::sort(m.begin(), m.end());
    return m;
  }
  Matches by_pattern[3];
};

TEST(PetriStrategy, MergedQueriesKeepTheirOwnStrategies) {
  std::vector<plugin::NamedQuery> queries;
  for (const char* strategy :
       {"skip_till_any_match", "skip_till_next_match", "strict_contiguity"}) {
    auto q = pattern::parseQuery(std::string("PATTERN SEQ(A a, B b) STRATEGY ") + strategy);
    ASSERT_TRUE(q.isOk());
    queries.push_back({strategy, *q});
  }
  LabelledSink sink;
  auto d = petriPlugin()->createManyDetectors("petri", queries, plugin::DetectorOptions(), sink);
  ASSERT_TRUE(d.isOk()) << d.status().message();
  ASSERT_TRUE(feed(**d, stream()));
  EXPECT_EQ(sink.sorted(0), (Matches{{1, 3}, {1, 5}, {1, 6}, {4, 5}, {4, 6}}));
  EXPECT_EQ(sink.sorted(1), (Matches{{1, 3}, {4, 5}}));
  EXPECT_EQ(sink.sorted(2), (Matches{{4, 5}}));
}

TEST(PetriStrategy, RefusesWhereTheStrategyIsNotDefined) {
  auto q = pattern::parseQuery("PATTERN OR(A a, B b) STRATEGY skip_till_next_match");
  ASSERT_TRUE(q.isOk());
  MatchRecorder sink;
  auto d = petriPlugin()->createDetector("petri", *q, plugin::DetectorOptions(), sink);
  ASSERT_FALSE(d.isOk());
  const std::string m = d.status().message();
  EXPECT_NE(m.find("STRATEGY skip_till_next_match"), std::string::npos) << m;
  EXPECT_NE(m.find("disjunction"), std::string::npos) << m;
  EXPECT_NE(m.find("petri"), std::string::npos) << m;
}

}  // namespace
}  // namespace cepbus::plugins::petri
