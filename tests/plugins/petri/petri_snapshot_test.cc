// The petri engine's snapshots: stopped after any number of events,
// snapshotted and restored into a fresh net, a query (or a set of queries
// merged into one net) reports exactly the matches of one uninterrupted run,
// in its order: tokens shared between places and patterns, inhibitor
// places, lazy places and lazy Kleene places, the conflict and concurrency
// policies' consumption, strategies run natively and selected, PARTITION
// BY; and a snapshot whose body is damaged is refused with a message, never
// a crash.

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/testing/snapshot_differential.h"

namespace cepbus::plugins::petri {
namespace {

using cepbus::testing::SnapshotCase;
using cepbus::testing::SnapshotDifferential;

std::vector<SnapshotCase> cases() {
  std::vector<SnapshotCase> all;
  for (const char* q : {
           "PATTERN SEQ(A a, B b, C c) WHERE a.x <= c.x WITHIN 12",
           "PATTERN SEQ(A a, B b, C c, D d) WITHIN 9",
           "PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x = a.x WITHIN 10",
           "PATTERN SEQ(A a, NOT(B n), C c) WHERE n.x = a.x WITHIN 6",
           "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x >= b[i-1].x WITHIN 10",
           "PATTERN SEQ(A a, B+ b[], C c) WHERE b[last].x = c.x AND b[1].x = a.x WITHIN 8",
           "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x >= a.x WITHIN 7",
           "PATTERN AND(SEQ(A a, B b), C c) WHERE a.x = b.x WITHIN 6",
           "PATTERN OR(SEQ(A a, B b), SEQ(C c, D d)) WITHIN 6",
           "PATTERN SEQ(A a, B b, C c) WITHIN 12 STRATEGY skip_till_next_match",
           "PATTERN SEQ(A a, B b, C c) WITHIN 6 STRATEGY strict_contiguity",
           "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > a.x STRATEGY skip_till_next_match",
           "PATTERN SEQ(A a, B b, C c) WITHIN 15 PARTITION BY k",
           "PATTERN SEQ(A a, NOT(D d), B b) WITHIN 9 PARTITION BY k",
       }) {
    all.push_back({"petri", {q}});
  }
  all.push_back({"petri", {"PATTERN SEQ(A a, B b, C c) WITHIN 8"}, {"policy=conflict"}});
  all.push_back({"petri", {"PATTERN SEQ(A a, B b, C c) WITHIN 8"}, {"policy=concurrency"}});
  // Several queries in one net: shared prefixes, middles and tails.
  all.push_back({"petri",
                 {"PATTERN SEQ(A a, B b, C c) WITHIN 10", "PATTERN SEQ(A a, B b, D d) WITHIN 8",
                  "PATTERN SEQ(D d, B b, C c) WITHIN 9"}});
  all.push_back({"petri",
                 {"PATTERN SEQ(A a, B b, C c) WITHIN 10 PARTITION BY k",
                  "PATTERN SEQ(A a, B b) WITHIN 6 PARTITION BY k"}});
  all.push_back({"petri",
                 {"PATTERN SEQ(A a, B b, C c) WITHIN 10",
                  "PATTERN SEQ(A a, C c) WITHIN 6 STRATEGY skip_till_next_match"}});
  // Caps that strike often: what they dropped, and the partitions the total
  // cap shed, are part of the state.
  all.push_back({"petri",
                 {"PATTERN SEQ(A a, B b, C c) WITHIN 15 PARTITION BY k"},
                 {"max_partition_partial_matches=3", "max_partial_matches=5"}});
  all.push_back({"petri",
                 {"PATTERN SEQ(A a, B b, C c) WITHIN 15"},
                 {"max_partition_partial_matches=2", "state_policy=refuse_new"}});
  all.push_back({"petri",
                 {"PATTERN SEQ(A a, B b, C c) WITHIN 15 PARTITION BY k"},
                 {"max_partial_matches=4", "state_policy=refuse_new"}});
  return all;
}

TEST(PetriSnapshotTest, ResumingFromEverySplitGivesTheOneRunMatches) {
  cepbus::testing::expectEverySplitResumes(cases(), 20261207);
}

TEST(PetriSnapshotTest, ADamagedBodyIsRefusedOrHarmlessNeverACrash) {
  cepbus::testing::expectDamageRefused(
      "petri",
      {"PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x >= b[i-1].x WITHIN 10",
       "PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x = a.x WITHIN 10",
       "PATTERN SEQ(A a, B b, C c, D d) WITHIN 15 PARTITION BY k"},
      5);
}

TEST(PetriSnapshotTest, AnotherNetsMarkingIsRefusedNamingTheTransition) {
  std::mt19937_64 rng(9);
  const auto events = cepbus::testing::numberedStream(rng, 20);
  std::string file;
  SnapshotDifferential({"petri", {"PATTERN SEQ(A a, B b, C c) WITHIN 12"}})
      .split(events, 10, &file);
  cepbus::testing::NumberedMatches sink;
  auto other = SnapshotDifferential({"petri", {"PATTERN SEQ(A a, C c, B b) WITHIN 12"}}).make(sink);
  auto in = plugin::SnapshotReader::open(file);
  ASSERT_TRUE(in.isOk());
  const Status s = other->restore(*in);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("in this net"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace cepbus::plugins::petri
