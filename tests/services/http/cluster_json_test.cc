#include "services/http/cluster_json.h"

#include <gtest/gtest.h>

namespace cepbus::services::http {
namespace {

TEST(ClusterJsonTest, TheJsonHasEveryCounterAsANumberAndOffsetsOnlyForStreamInput) {
  ClusterStats stats;
  stats.node = "n1";
  stats.live_nodes = {"n1", "n2"};
  stats.received = 7;
  stats.echo_timeouts = 2;
  stats.ingress_accepted = 9;
  PartitionStats queue;
  queue.partition = 0;
  queue.role = "active";
  queue.owner = "n1";
  queue.held = 3;
  PartitionStats stream = queue;
  stream.partition = 1;
  stream.resume_from = 40;
  stream.lease_offset = 32;
  stream.watermark = -5;
  stats.partitions = {queue, stream};

  const nlohmann::json j = clusterNodeJson(stats);
  EXPECT_EQ(j["node"], "n1");
  EXPECT_EQ(j["live_nodes"], nlohmann::json({"n1", "n2"}));
  EXPECT_EQ(j["received"], 7);
  EXPECT_EQ(j["echo_timeouts"], 2);
  EXPECT_EQ(j["streams_ended"], 0);
  EXPECT_EQ(j["ingress_accepted"], 9);
  ASSERT_EQ(j["partitions"].size(), 2u);
  EXPECT_EQ(j["partitions"][0]["held"], 3);
  EXPECT_EQ(j["partitions"][0]["role"], "active");
  EXPECT_FALSE(j["partitions"][0].contains("resume_from"));
  EXPECT_EQ(j["partitions"][1]["resume_from"], 40);
  EXPECT_EQ(j["partitions"][1]["lease_offset"], 32);
  EXPECT_TRUE(j["partitions"][0]["watermark"].is_null()) << "no event yet";
  EXPECT_EQ(j["partitions"][1]["watermark"], -5);
}

}  // namespace
}  // namespace cepbus::services::http
