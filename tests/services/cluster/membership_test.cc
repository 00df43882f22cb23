#include "services/cluster/membership.h"

#include <gtest/gtest.h>

#include <map>

namespace cepbus::services::cluster {
namespace {

using std::chrono::milliseconds;

Heartbeat beat(std::string node, uint64_t incarnation = 1, std::vector<uint32_t> attached = {}) {
  return Heartbeat{std::move(node), incarnation, false, std::move(attached), ""};
}

TEST(RankNodesTest, EveryNodeComputesTheSameRankingWhateverTheOrder) {
  const std::vector<std::string> a{"n1", "n2", "n3"};
  const std::vector<std::string> b{"n3", "n1", "n2"};
  for (uint32_t p = 0; p < 64; ++p) EXPECT_EQ(rankNodes(p, a), rankNodes(p, b));
}

TEST(RankNodesTest, ANodeLeavingMovesOnlyItsOwnPartitions) {
  const std::vector<std::string> three{"n1", "n2", "n3"};
  const std::vector<std::string> two{"n1", "n3"};
  std::map<std::string, int> owned;
  for (uint32_t p = 0; p < 120; ++p) {
    const std::string before = rankNodes(p, three).front();
    const std::string after = rankNodes(p, two).front();
    ++owned[before];
    // Only n2's partitions move, each to the node that ranked second before.
    const std::string expected = before == "n2" ? rankNodes(p, three)[1] : before;
    EXPECT_EQ(after, expected) << "partition " << p;
  }
  // Each of three nodes owns a fair share (rendezvous hashing spreads them).
  for (const auto& [node, count] : owned) {
    EXPECT_GT(count, 25) << node;
    EXPECT_LT(count, 55) << node;
  }
}

TEST(MembershipTest, SilentNodesExpireAndLeavingNodesGoAtOnce) {
  const SteadyTime t0{};
  Membership m("n1", milliseconds(3000));
  EXPECT_EQ(m.live(), (std::vector<std::string>{"n1"}));
  EXPECT_TRUE(m.heard(beat("n2"), t0));
  EXPECT_TRUE(m.heard(beat("n3"), t0));
  EXPECT_FALSE(m.heard(beat("n2"), t0 + milliseconds(500)));
  EXPECT_EQ(m.live(), (std::vector<std::string>{"n1", "n2", "n3"}));

  EXPECT_TRUE(m.expire(t0 + milliseconds(3000)).empty());
  EXPECT_EQ(m.expire(t0 + milliseconds(3001)), (std::vector<std::string>{"n3"}));
  EXPECT_EQ(m.live(), (std::vector<std::string>{"n1", "n2"}));

  Heartbeat bye = beat("n2");
  bye.leaving = true;
  EXPECT_TRUE(m.heard(bye, t0 + milliseconds(3100)));
  EXPECT_EQ(m.live(), (std::vector<std::string>{"n1"}));
}

TEST(MembershipTest, NeverExpiresItselfAndSeesARestartAsAChange) {
  const SteadyTime t0{};
  Membership m("n1", milliseconds(100));
  m.heard(beat("n1"), t0);
  EXPECT_TRUE(m.expire(t0 + milliseconds(10'000)).empty());
  EXPECT_EQ(m.live(), (std::vector<std::string>{"n1"}));
  EXPECT_TRUE(m.heard(beat("n2", 7), t0));
  EXPECT_TRUE(m.heard(beat("n2", 8), t0));  // same id, new process
}

TEST(MembershipTest, ForgettingPeersKeepsOnlyItself) {
  const SteadyTime t0{};
  Membership m("n2", milliseconds(1000));
  m.heard(beat("n1"), t0);
  m.heard(beat("n2"), t0);
  m.heard(beat("n3"), t0);
  m.forgetPeers();
  EXPECT_EQ(m.live(), (std::vector<std::string>{"n2"}));
  // Nothing is left to expire (and so to evict) after a long stall.
  EXPECT_TRUE(m.expire(t0 + milliseconds(60'000)).empty());
}

TEST(MembershipTest, OwnerStandbyAndAttachedPartitions) {
  const SteadyTime t0{};
  Membership m("n1", milliseconds(3000));
  m.heard(beat("n2", 1, {5, 1, 3}), t0);
  for (uint32_t p = 0; p < 8; ++p) {
    const auto ranked = rankNodes(p, {"n1", "n2"});
    EXPECT_EQ(m.owner(p), ranked[0]);
    EXPECT_EQ(m.standby(p), ranked[1]);
  }
  EXPECT_TRUE(m.attached("n2", 3));
  EXPECT_FALSE(m.attached("n2", 2));
  EXPECT_FALSE(m.attached("n9", 3));
  Membership alone("n1", milliseconds(3000));
  EXPECT_EQ(alone.standby(0), "");
}

}  // namespace
}  // namespace cepbus::services::cluster
