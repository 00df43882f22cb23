// STRATEGY skip_till_next_match and strict_contiguity on the algebra engine
// (run by plugin::StrategyFactory over its skip_till_any_match matches), on
// hand-made streams whose matches under each strategy are written out.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "tests/plugins/algebra/algebra_test_support.h"

namespace cepbus::plugins::algebra::testing {
namespace {

using Ids = std::vector<std::vector<EventId>>;

// The ids of each match's events in pattern order, matches sorted.
Ids ids(const std::string& query, const std::string& stream) {
  Ids out;
  for (const Out& o : runAlgebra(query, letters(stream))) {
    std::vector<EventId> m;
    for (const auto& [element, id] : o.binds) m.push_back(id);
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string errorOf(const std::string& query) {
  auto r = run("algebra", query, letters("a1 b2"));
  EXPECT_FALSE(r.isOk()) << query;
  return r ? std::string() : r.status().message();
}

// Ids are positions: a1=1, c2=2, b3=3, a4=4, b5=5, b6=6.
constexpr const char* kStream = "a1 c2 b3 a4 b5 b6";

TEST(AlgebraStrategy, AnyMatchPairsEveryEarlierA) {
  EXPECT_EQ(ids("PATTERN SEQ(A a, B b) CONTEXT unrestricted", kStream),
            (Ids{{1, 3}, {1, 5}, {1, 6}, {4, 5}, {4, 6}}));
}

TEST(AlgebraStrategy, NextMatchTakesTheFirstBAfterEachA) {
  EXPECT_EQ(ids("PATTERN SEQ(A a, B b) STRATEGY skip_till_next_match", kStream),
            (Ids{{1, 3}, {4, 5}}));
}

TEST(AlgebraStrategy, StrictContiguityNeedsAdjacentEvents) {
  // c2 lies between a1 and b3: every type counts for adjacency.
  EXPECT_EQ(ids("PATTERN SEQ(A a, B b) STRATEGY strict_contiguity", kStream), (Ids{{4, 5}}));
}

TEST(AlgebraStrategy, NextMatchSkipsEventsThatFailThePredicates) {
  // b2 is the next B but fails b.x > a.x; b3 is the first that qualifies.
  const std::string s = "a1:5 b2:1 b3:7 b4:9";
  EXPECT_EQ(ids("PATTERN SEQ(A a, B b) WHERE b.x > a.x STRATEGY skip_till_next_match", s),
            (Ids{{1, 3}}));
  EXPECT_EQ(ids("PATTERN SEQ(A a, B b) WHERE b.x > a.x STRATEGY strict_contiguity", s), Ids{});
}

// A Kleene element under each strategy: the rising runs of B between a1 and
// a C. Ids are positions: a1=1, b2=2, b3=3, c4=4, b5=5, c6=6.
TEST(AlgebraStrategy, RunsAKleeneElementUnderEveryStrategy) {
  const std::string q = "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > b[i-1].x STRATEGY ";
  const std::string s = "a1 b2:5 b3:6 c4 b5:7 c6";
  // Each prefix of the one run from a1 (b2, b3, b5) with the first C after it.
  EXPECT_EQ(ids(q + "skip_till_next_match", s), (Ids{{1, 2, 3, 4}, {1, 2, 3, 5, 6}, {1, 2, 4}}));
  EXPECT_EQ(ids(q + "strict_contiguity", s), (Ids{{1, 2, 3, 4}}));
  // Every rising run: three before c4, seven before c6.
  EXPECT_EQ(ids(q + "skip_till_any_match CONTEXT unrestricted", s).size(), 10u);
}

TEST(AlgebraStrategy, WithinBoundsTheRun) {
  // From a1 the next B is b3, outside WITHIN 1: the run dies; no later B is tried.
  EXPECT_EQ(ids("PATTERN SEQ(A a, B b) WITHIN 1 STRATEGY skip_till_next_match", kStream),
            (Ids{{4, 5}}));
}

TEST(AlgebraStrategy, RefusesWhereTheStrategyIsNotDefined) {
  const std::string context =
      errorOf("PATTERN SEQ(A a, B b) CONTEXT recent STRATEGY skip_till_next_match");
  EXPECT_NE(context.find("CONTEXT recent"), std::string::npos) << context;
  EXPECT_NE(context.find("the nfa engine runs every strategy"), std::string::npos) << context;
  const std::string op = errorOf("PATTERN (A a ; B b) | C c STRATEGY strict_contiguity");
  EXPECT_NE(op.find("STRATEGY strict_contiguity"), std::string::npos) << op;
  EXPECT_NE(op.find("disjunction"), std::string::npos) << op;
  EXPECT_NE(op.find("algebra"), std::string::npos) << op;
}

}  // namespace
}  // namespace cepbus::plugins::algebra::testing
