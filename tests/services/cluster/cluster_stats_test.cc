#include "services/cluster/cluster_stats.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "tests/testing/stats.h"

namespace cepbus::services::cluster {
namespace {

PartitionStats partition(uint32_t index, std::string role, uint64_t held) {
  PartitionStats p;
  p.partition = index;
  p.role = std::move(role);
  p.held = held;
  return p;
}

TEST(NodeReportTest, TheStoreReadsWhatTheNodePublishedLast) {
  const stats::Store store;
  NodeReport report(store, "trades", "n1");
  const stats::Labels node{{"cluster", "trades"}, {"node", "n1"}};
  // Counted from the start, before anything was published.
  EXPECT_EQ(testing::statValue(store, "cluster", node, "received"), 0);

  ClusterStats s;
  s.node = "n1";
  s.received = 40;
  s.window_full = 3;
  s.echo_timeouts = 2;
  s.ingress_released = 5;
  s.partitions = {partition(0, "active", 12), partition(1, "standby", 0)};
  report.publish(s);
  EXPECT_EQ(report.stats().received, 40u);
  EXPECT_EQ(testing::statValue(store, "cluster", node, "received"), 40);
  EXPECT_EQ(testing::statValue(store, "cluster", node, "window_full"), 3);
  EXPECT_EQ(testing::statValue(store, "cluster", node, "echo_timeouts"), 2);
  EXPECT_EQ(testing::statValue(store, "cluster", node, "ingress_released"), 5);
  const stats::Labels p0{
      {"cluster", "trades"}, {"node", "n1"}, {"partition", "0"}, {"role", "active"}};
  const stats::Labels p1{
      {"cluster", "trades"}, {"node", "n1"}, {"partition", "1"}, {"role", "standby"}};
  EXPECT_EQ(testing::statValue(store, "cluster_partition", p0, "active"), 1);
  EXPECT_EQ(testing::statValue(store, "cluster_partition", p0, "held"), 12);
  EXPECT_EQ(testing::statValue(store, "cluster_partition", p1, "active"), 0);

  // Partition 0 handed over, partition 1 taken over: their labels follow.
  s.received = 41;
  s.partitions = {partition(0, "standby", 0), partition(1, "active", 5)};
  report.publish(s);
  EXPECT_EQ(testing::statValue(store, "cluster", node, "received"), 41);
  EXPECT_FALSE(testing::statValue(store, "cluster_partition", p0, "held"));
  EXPECT_FALSE(testing::statValue(store, "cluster_partition", p1, "held"));
  EXPECT_EQ(store.scopes("cluster_partition").size(), 2u);
  const stats::Labels p1_active{
      {"cluster", "trades"}, {"node", "n1"}, {"partition", "1"}, {"role", "active"}};
  EXPECT_EQ(testing::statValue(store, "cluster_partition", p1_active, "active"), 1);
  EXPECT_EQ(testing::statValue(store, "cluster_partition", p1_active, "held"), 5);

  // A stopped node takes its numbers with it; stats() still answers.
  report.withdraw();
  EXPECT_TRUE(store.scopes("cluster").empty());
  EXPECT_TRUE(store.scopes("cluster_partition").empty());
  EXPECT_EQ(report.stats().received, 41u);
  report.publish(s);
  EXPECT_TRUE(store.scopes("cluster_partition").empty());
}

}  // namespace
}  // namespace cepbus::services::cluster
