#include "services/cluster/membership_loop.h"

#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace cepbus::services::cluster {
namespace {

using std::chrono::milliseconds;
using Partitions = std::set<uint32_t>;

// The broker connection as the loop sees it: it records what the loop asks
// for and keeps the attachments, which a test reads and steers.
class FakeActions final : public MembershipLoop::Actions {
 public:
  bool connected() const override { return open; }
  bool sendHeartbeat(const Heartbeat& heartbeat) override {
    if (!open) return false;
    heartbeats.push_back(heartbeat);
    return true;
  }
  void attach(uint32_t partition) override { attached.insert(partition); }
  void detach(uint32_t partition) override {
    attached.erase(partition);
    active_on.erase(partition);
    detached.push_back(partition);
  }
  void abandon(uint32_t partition) override { abandoned.push_back(partition); }
  bool active(uint32_t partition) const override { return active_on.count(partition) != 0; }
  void evict(const std::string& node, const std::vector<std::string>& addresses) override {
    evicted.emplace_back(node, addresses);
  }
  void reconnect() override { ++reconnects; }

  bool open = true;
  std::vector<Heartbeat> heartbeats;
  Partitions attached;
  Partitions active_on;
  std::vector<uint32_t> detached;
  std::vector<uint32_t> abandoned;
  std::vector<std::pair<std::string, std::vector<std::string>>> evicted;
  int reconnects = 0;
};

Heartbeat beat(std::string node, std::vector<uint32_t> attached = {}, std::string address = "",
               bool leaving = false) {
  return Heartbeat{std::move(node), 7, leaving, std::move(attached), std::move(address)};
}

// The partitions of `count` where `node` ranks first or second among `live`.
Partitions wantedBy(const std::string& node, const std::vector<std::string>& live, uint32_t count) {
  Partitions out;
  for (uint32_t p = 0; p < count; ++p) {
    const std::vector<std::string> ranked = rankNodes(p, live);
    if (ranked[0] == node || (ranked.size() > 1 && ranked[1] == node)) out.insert(p);
  }
  return out;
}

class MembershipLoopTest : public ::testing::Test {
 protected:
  MembershipLoopTest() {
    spec_.name = "c";
    spec_.node = "n1";
    spec_.partitions = 16;
    spec_.heartbeat_ms = 500;
    spec_.idle_timeout_ms = 3000;
    broker_.host = "10.0.0.1";
    broker_.port = 5672;
  }

  // A loop started and connected at t0_, from "me:1".
  MembershipLoop& loop() {
    loop_.emplace(spec_, /*incarnation=*/42, actions_, counters_);
    loop_->start(t0_);
    loop_->connected(t0_, "me:1", broker_);
    return *loop_;
  }
  SteadyTime at(int64_t ms) const { return t0_ + milliseconds(ms); }
  // Ticks every heartbeat period from `from` through `to` (ms after t0_),
  // as the node's timer does, so that no tick looks like a stall; the peers
  // of alive_ are heard just before each tick.
  void tickThrough(int64_t from, int64_t to) {
    for (int64_t ms = from; ms <= to; ms += 500) {
      for (const Heartbeat& peer : alive_) loop_->heard(peer, at(ms));
      loop_->checkStall(at(ms));
      loop_->tick(at(ms));
    }
  }
  Partitions all() const {
    Partitions out;
    for (uint32_t p = 0; p < spec_.partitions; ++p) out.insert(p);
    return out;
  }

  services::cluster::ClusterSpec spec_;
  services::cluster::ClusterBroker broker_;
  FakeActions actions_;
  ClusterStats counters_;
  std::optional<MembershipLoop> loop_;
  std::vector<Heartbeat> alive_;
  const SteadyTime t0_{std::chrono::hours(1)};
};

TEST_F(MembershipLoopTest, AnnouncesItselfOnConnectingAndAttachesOnlyAfterTwoHeartbeats) {
  MembershipLoop& l = loop();
  ASSERT_EQ(actions_.heartbeats.size(), 1u);
  EXPECT_EQ(actions_.heartbeats[0].node, "n1");
  EXPECT_EQ(actions_.heartbeats[0].incarnation, 42u);
  EXPECT_EQ(actions_.heartbeats[0].address, "me:1");
  EXPECT_FALSE(actions_.heartbeats[0].leaving);
  tickThrough(500, 1000);
  EXPECT_TRUE(actions_.attached.empty()) << "the others had no time to announce themselves";
  tickThrough(1500, 1500);
  // Alone, it ranks first everywhere.
  EXPECT_EQ(actions_.attached, all());
  for (uint32_t p = 0; p < spec_.partitions; ++p) EXPECT_TRUE(l.attached(p));
  tickThrough(2000, 2000);
  const Heartbeat& last = actions_.heartbeats.back();
  EXPECT_EQ(Partitions(last.attached.begin(), last.attached.end()), all());
}

TEST_F(MembershipLoopTest, AttachesWhereItRanksFirstOrSecondAndDetachesWhenANodeJoins) {
  MembershipLoop& l = loop();
  l.heard(beat("n2"), at(100));
  l.heard(beat("n3"), at(100));
  tickThrough(500, 1500);
  const Partitions three = wantedBy("n1", {"n1", "n2", "n3"}, spec_.partitions);
  ASSERT_NE(three, all()) << "a poor spread for this test";
  EXPECT_EQ(actions_.attached, three);

  l.heard(beat("n4"), at(1600));
  tickThrough(2000, 2000);
  const Partitions four = wantedBy("n1", {"n1", "n2", "n3", "n4"}, spec_.partitions);
  EXPECT_EQ(actions_.attached, four);
  Partitions dropped;
  for (uint32_t p : three) {
    if (four.count(p) == 0) dropped.insert(p);
  }
  EXPECT_EQ(Partitions(actions_.detached.begin(), actions_.detached.end()), dropped);
  EXPECT_EQ(counters_.handovers, 0u) << "a standby giving up its place hands nothing over";
}

TEST_F(MembershipLoopTest, HandsAnActivePartitionOverOnceItsOwnerIsAttached) {
  MembershipLoop& l = loop();
  tickThrough(500, 1500);
  actions_.active_on = all();
  l.heard(beat("n2"), at(1600));
  tickThrough(2000, 2000);
  EXPECT_TRUE(actions_.detached.empty()) << "n2 has no consumer yet: handing over loses time";

  Partitions owned_by_n2;
  for (uint32_t p = 0; p < spec_.partitions; ++p) {
    if (rankNodes(p, {"n1", "n2"})[0] == "n2") owned_by_n2.insert(p);
  }
  ASSERT_FALSE(owned_by_n2.empty());
  l.heard(beat("n2", std::vector<uint32_t>(owned_by_n2.begin(), owned_by_n2.end())), at(2100));
  tickThrough(2500, 2500);
  EXPECT_EQ(Partitions(actions_.detached.begin(), actions_.detached.end()), owned_by_n2);
  EXPECT_EQ(counters_.handovers, owned_by_n2.size());
  // Handed over, as standby it attaches again once the broker ended the session.
  for (uint32_t p : owned_by_n2) {
    EXPECT_FALSE(l.attached(p));
    l.sessionEnded(p);
  }
  tickThrough(3000, 3000);
  EXPECT_EQ(actions_.attached, all());
  EXPECT_TRUE(actions_.abandoned.empty());
}

TEST_F(MembershipLoopTest, GivesUpASessionEndTheBrokerNeverConfirms) {
  uint32_t p = 0;
  while (p < spec_.partitions && rankNodes(p, {"n1", "n2"})[0] != "n2") ++p;
  ASSERT_LT(p, spec_.partitions) << "n2 owns no partition";
  MembershipLoop& l = loop();
  tickThrough(500, 1500);
  actions_.active_on = {p};
  alive_.push_back(beat("n2", {p}));
  tickThrough(2000, 2000);
  ASSERT_EQ(actions_.detached, std::vector<uint32_t>{p});
  // No end comes back: not attached again within the idle timeout...
  tickThrough(2500, 5000);
  EXPECT_EQ(actions_.attached.count(p), 0u);
  EXPECT_TRUE(actions_.abandoned.empty());
  // ... and after it, the session is forgotten and the partition attached
  // again (as standby: the owner took it).
  tickThrough(5500, 5500);
  EXPECT_EQ(actions_.abandoned, std::vector<uint32_t>{p});
  EXPECT_EQ(counters_.unconfirmed_handovers, 1u);
  EXPECT_EQ(actions_.attached.count(p), 1u);
  EXPECT_TRUE(l.attached(p));
}

TEST_F(MembershipLoopTest, AStallDropsEveryPartitionAndEveryPeer) {
  MembershipLoop& l = loop();
  l.heard(beat("n2"), at(100));
  tickThrough(500, 1500);
  EXPECT_FALSE(actions_.attached.empty());
  const Partitions before = actions_.attached;
  EXPECT_FALSE(l.checkStall(at(1500 + 3000))) << "late by the idle timeout is no stall yet";
  EXPECT_TRUE(l.checkStall(at(4500 + 3001)));
  EXPECT_EQ(counters_.stalls, 1u);
  EXPECT_TRUE(actions_.attached.empty());
  EXPECT_EQ(Partitions(actions_.detached.begin(), actions_.detached.end()), before);
  // What it heard before is stale: n2 is forgotten, not expired (and evicted).
  EXPECT_EQ(l.live(), std::vector<std::string>{"n1"});
  l.tick(at(7501));
  EXPECT_TRUE(actions_.evicted.empty());
  // It waits a round of heartbeats before attaching again.
  for (uint32_t p : before) l.sessionEnded(p);
  l.heard(beat("n2"), at(7600));
  tickThrough(8001, 8501);
  EXPECT_TRUE(actions_.attached.empty());
  tickThrough(9001, 9001);
  EXPECT_EQ(actions_.attached, wantedBy("n1", {"n1", "n2"}, spec_.partitions));
}

TEST_F(MembershipLoopTest, ASilentPeerIsEvictedByEveryAddressItAnnounced) {
  MembershipLoop& l = loop();
  l.heard(beat("n2", {}, "peer:1"), at(0));
  l.heard(beat("n2", {}, "peer:2"), at(500));  // it reconnected
  l.heard(beat("n2", {}, "peer:2"), at(1000));
  l.heard(beat("n3"), at(1000));  // announces no address
  tickThrough(500, 4000);
  EXPECT_TRUE(actions_.evicted.empty());
  tickThrough(4500, 4500);
  ASSERT_EQ(actions_.evicted.size(), 1u);
  EXPECT_EQ(actions_.evicted[0].first, "n2");
  EXPECT_EQ(actions_.evicted[0].second, (std::vector<std::string>{"peer:1", "peer:2"}));
  EXPECT_EQ(l.live(), std::vector<std::string>{"n1"}) << "n3 expired too, with nothing to evict";
}

TEST_F(MembershipLoopTest, ALeavingPeerIsGoneAtOnce) {
  MembershipLoop& l = loop();
  l.heard(beat("n2"), at(0));
  EXPECT_EQ(l.live(), (std::vector<std::string>{"n1", "n2"}));
  l.heard(beat("n2", {}, "", /*leaving=*/true), at(100));
  EXPECT_EQ(l.live(), std::vector<std::string>{"n1"});
  EXPECT_TRUE(actions_.evicted.empty());
}

TEST_F(MembershipLoopTest, GivesTheConnectionUpWhenItsOwnHeartbeatsStopComingBack) {
  MembershipLoop& l = loop();
  l.heard(Heartbeat{"n1", 42, false, {}, "me:1"}, at(1000));
  l.checkEcho(at(1000 + 5999));
  EXPECT_EQ(actions_.reconnects, 0);
  // Its own name from another incarnation or connection is no echo.
  l.heard(Heartbeat{"n1", 41, false, {}, "me:1"}, at(6000));
  l.heard(Heartbeat{"n1", 42, false, {}, "me:0"}, at(6000));
  l.checkEcho(at(1000 + 6000));
  EXPECT_EQ(actions_.reconnects, 1);
  EXPECT_EQ(counters_.echo_timeouts, 1u);
  // Counted from the reconnect on; a closed connection is not given up again.
  l.checkEcho(at(7000 + 5999));
  EXPECT_EQ(actions_.reconnects, 1);
  actions_.open = false;
  l.checkEcho(at(20000));
  EXPECT_EQ(actions_.reconnects, 1);
}

TEST_F(MembershipLoopTest, LeavingSaysSoAndDetachesEverywhere) {
  MembershipLoop& l = loop();
  tickThrough(500, 1500);
  l.leave(at(1600));
  ASSERT_FALSE(actions_.heartbeats.empty());
  EXPECT_TRUE(actions_.heartbeats.back().leaving);
  EXPECT_EQ(Partitions(actions_.heartbeats.back().attached.begin(),
                       actions_.heartbeats.back().attached.end()),
            all());
  EXPECT_TRUE(actions_.attached.empty());
  EXPECT_EQ(actions_.detached.size(), spec_.partitions);
}

TEST_F(MembershipLoopTest, AttachesNothingWithoutAConnection) {
  MembershipLoop& l = loop();
  actions_.open = false;
  tickThrough(500, 3000);
  EXPECT_TRUE(actions_.attached.empty());
  EXPECT_EQ(actions_.heartbeats.size(), 1u);
  actions_.open = true;
  l.connected(at(3100), "me:2", broker_);
  EXPECT_EQ(actions_.heartbeats.back().address, "me:2");
  tickThrough(3500, 4000);
  EXPECT_TRUE(actions_.attached.empty());
  tickThrough(4500, 4500);
  EXPECT_EQ(actions_.attached, all());
}

}  // namespace
}  // namespace cepbus::services::cluster
