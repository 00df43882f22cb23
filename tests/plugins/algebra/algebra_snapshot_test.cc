// The algebra engine's snapshots: stopped after any number of events,
// snapshotted and restored into a fresh detector, a query reports exactly
// the matches of one uninterrupted run, in its order, for each kind of
// state (contexts, negations of a gap, Kleene runs, P1's operators, strategies run
// natively and selected, PARTITION BY); and a snapshot whose body is
// damaged is refused with a message, never a crash.

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/testing/snapshot_differential.h"

namespace cepbus::plugins::algebra {
namespace {

using cepbus::testing::SnapshotCase;
using cepbus::testing::SnapshotDifferential;

std::vector<SnapshotCase> cases() {
  const std::vector<std::string> queries = {
      "PATTERN SEQ(A a, B b, C c) WHERE a.x <= c.x WITHIN 12",
      "PATTERN SEQ(A a, B b, C c) WITHIN 8 CONTEXT unrestricted",
      "PATTERN SEQ(A a, B b) WITHIN 6 CONTEXT recent",
      "PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x = a.x WITHIN 10",
      "PATTERN SEQ(A a, NOT(C c), B b) WITHIN 10 CONTEXT recent",
      "PATTERN SEQ(A a, NOT(C c), NOT(D d), B b) WITHIN 9 CONTEXT unrestricted",
      "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x >= b[i-1].x WITHIN 10",
      "PATTERN SEQ(A a, AGG(B+ b[], count(b[]) >= 2), C c) WITHIN 12",
      "PATTERN (A a ; B b) - C c WITHIN 10 CONTEXT unrestricted",
      "PATTERN WITHIN((A ; B) ~ (C ; D), 10) CONTEXT unrestricted",
      "PATTERN WITHIN((A ; B) || (C ; D), 10) CONTEXT unrestricted",
      "PATTERN WITHIN((A ; B) + C, 8) CONTEXT unrestricted",
      "PATTERN WITHIN((B)*, 4) CONTEXT unrestricted",
      "PATTERN OR(A a, D d)",
      "PATTERN SEQ(A a, B b, C c) WITHIN 12 STRATEGY skip_till_next_match",
      "PATTERN SEQ(A a, B b) WHERE b.x > a.x WITHIN 6 STRATEGY strict_contiguity",
      // Not run natively: a StrategySelector picks the matches and keeps
      // events of its own.
      "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > a.x WITHIN 10 STRATEGY skip_till_next_match",
      "PATTERN SEQ(A a, B b, C c) WITHIN 15 PARTITION BY k",
      "PATTERN SEQ(A a, NOT(D d), B b) WITHIN 9 PARTITION BY k",
      "PATTERN SEQ(A a, B b, C c) WITHIN 15 PARTITION BY k STRATEGY skip_till_next_match",
  };
  std::vector<SnapshotCase> all;
  for (const std::string& q : queries) all.push_back({"algebra", {q}});
  // Caps that strike often: what they dropped, and the partitions the total
  // cap shed, are part of the state.
  all.push_back({"algebra",
                 {"PATTERN SEQ(A a, B b, C c) WITHIN 15 PARTITION BY k CONTEXT unrestricted"},
                 {"max_partition_partial_matches=3", "max_partial_matches=5"}});
  all.push_back({"algebra",
                 {"PATTERN SEQ(A a, B b, C c) WITHIN 15 CONTEXT unrestricted"},
                 {"max_partition_partial_matches=2", "state_policy=refuse_new"}});
  all.push_back({"algebra",
                 {"PATTERN SEQ(A a, B b, C c) WITHIN 15 PARTITION BY k CONTEXT unrestricted"},
                 {"max_partial_matches=4", "state_policy=refuse_new"}});
  return all;
}

TEST(AlgebraSnapshotTest, ResumingFromEverySplitGivesTheOneRunMatches) {
  cepbus::testing::expectEverySplitResumes(cases(), 20261207);
}

TEST(AlgebraSnapshotTest, ADamagedBodyIsRefusedOrHarmlessNeverACrash) {
  cepbus::testing::expectDamageRefused(
      "algebra",
      {"PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x >= b[i-1].x WITHIN 10",
       "PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x = a.x WITHIN 10",
       "PATTERN SEQ(A a, B b, C c) WITHIN 15 PARTITION BY k"},
      5);
}

TEST(AlgebraSnapshotTest, AnotherQuerysStateIsRefused) {
  std::mt19937_64 rng(9);
  const auto events = cepbus::testing::numberedStream(rng, 20);
  std::string file;
  SnapshotDifferential({"algebra", {"PATTERN SEQ(A a, B b, C c) WITHIN 12"}})
      .split(events, 10, &file);
  cepbus::testing::NumberedMatches sink;
  auto other = SnapshotDifferential({"algebra", {"PATTERN SEQ(A a, B b) WITHIN 12"}}).make(sink);
  auto in = plugin::SnapshotReader::open(file);
  ASSERT_TRUE(in.isOk());
  const Status s = other->restore(*in);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("for a plan of"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace cepbus::plugins::algebra
