// The topology's names, the parsing of the management API's JSON and the
// conflict rules, without a broker (topology_test.cc has the real cluster).

#include <gtest/gtest.h>

#include "services/cluster/cluster_spec.h"
#include "services/cluster/topology.h"

namespace cepbus::services::cluster {
namespace {

using nlohmann::json;

TEST(TopologyNames, FollowTheClusterName) {
  EXPECT_EQ(inExchange("trades"), "trades.in");
  EXPECT_EQ(outExchange("trades"), "trades.out");
  EXPECT_EQ(membersExchange("trades"), "trades.members");
  EXPECT_EQ(compositesQueue("trades"), "trades.composites");
  EXPECT_EQ(partitionQueue("trades", 0), "trades.p0");
  EXPECT_EQ(partitionQueue("trades", 17), "trades.p17");
  EXPECT_EQ(partitionRoutingKey(3), "p3");
}

TEST(TopologyNames, ReadThePartitionOfAQueueName) {
  EXPECT_EQ(partitionOf("trades", "trades.p0"), 0u);
  EXPECT_EQ(partitionOf("trades", "trades.p42"), 42u);
  EXPECT_EQ(partitionOf("a.b", "a.b.p1"), 1u);
  for (const char* other : {"trades.p", "trades.p01", "trades.p-1", "trades.p1x", "trades.q1",
                            "trades.composites", "tradesXp1", "other.p1", "trades.p99999999999"}) {
    EXPECT_FALSE(partitionOf("trades", other).has_value()) << other;
  }
}

TEST(TopologyJson, ParsesAQuorumQueue) {
  const auto q = parseQueue(json::parse(R"({
    "name":"s.p0","type":"quorum","durable":true,
    "arguments":{"x-queue-type":"quorum","x-single-active-consumer":true},
    "members":["a@h","b@h","c@h"],"online":["a@h","b@h"],"leader":"a@h"})"));
  ASSERT_TRUE(q) << q.status().toString();
  EXPECT_EQ(q->name, "s.p0");
  EXPECT_EQ(q->type, "quorum");
  EXPECT_TRUE(q->durable);
  EXPECT_TRUE(q->single_active_consumer);
  EXPECT_EQ(q->members.size(), 3u);
  EXPECT_EQ(q->online.size(), 2u);
  EXPECT_EQ(q->leader, "a@h");
}

TEST(TopologyJson, ParsesAClassicQueueAndRejectsANamelessOne) {
  const auto q = parseQueue(json::parse(R"({"name":"s.p1","durable":false,"arguments":{}})"));
  ASSERT_TRUE(q);
  EXPECT_EQ(q->type, "classic");
  EXPECT_FALSE(q->durable);
  EXPECT_FALSE(q->single_active_consumer);
  EXPECT_FALSE(parseQueue(json::parse(R"({"type":"quorum"})")));
  EXPECT_FALSE(parseQueue(json::parse("[]")));
}

TEST(TopologyJson, ParsesAnExchange) {
  const auto e = parseExchange(json::parse(R"({"name":"s.in","type":"direct","durable":true})"));
  EXPECT_TRUE(e.exists);
  EXPECT_EQ(e.type, "direct");
  EXPECT_TRUE(e.durable);
}

TEST(TopologyJson, ParsesAConnectionAsRabbitMq310ShowsAnAmqp10One) {
  // GET /api/connections for a Proton client with container id "my-id".
  const auto c = parseConnection(json::parse(R"({
    "client_properties":{},"host":"127.0.0.1","name":"127.0.0.1:35652 -> 127.0.0.1:28220",
    "node":"cepbus2@localhost","peer_host":"127.0.0.1","peer_port":35652,"port":28220,
    "protocol":"AMQP 1.0","type":"direct","user":"guest","vhost":"/"})"));
  EXPECT_EQ(c.name, "127.0.0.1:35652 -> 127.0.0.1:28220");
  EXPECT_EQ(c.node, "cepbus2@localhost");
  EXPECT_EQ(c.protocol, "AMQP 1.0");
  EXPECT_EQ(c.user, "guest");
  EXPECT_EQ(c.container_id, "");
  EXPECT_EQ(peerAddress(c), "127.0.0.1:35652");
}

TEST(TopologyJson, TakesAContainerIdWhereABrokerShowsOne) {
  EXPECT_EQ(parseConnection(json::parse(R"({"container_id":"a"})")).container_id, "a");
  EXPECT_EQ(
      parseConnection(json::parse(R"({"client_properties":{"container_id":"b"}})")).container_id,
      "b");
}

// A complete, matching topology of `p` partitions for cluster "s".
Topology complete(uint32_t p) {
  Topology t;
  t.name = "s";
  t.in = {true, "direct", true};
  t.out = {true, "topic", true};
  t.members = {true, "fanout", true};
  for (uint32_t i = 0; i < p; ++i) {
    QueueState q;
    q.name = partitionQueue("s", i);
    q.type = "quorum";
    q.durable = q.single_active_consumer = true;
    t.partitions[i] = q;
    t.in_bindings.emplace(q.name, partitionRoutingKey(i));
  }
  QueueState c;
  c.name = "s.composites";
  c.type = "quorum";
  c.durable = true;
  t.composites = c;
  t.composites_keys.insert("#");
  return t;
}

services::cluster::ClusterSpec specOf(uint32_t p) {
  services::cluster::ClusterSpec spec;
  spec.name = "s";
  spec.partitions = p;
  spec.brokers.resize(1);
  return spec;
}

TEST(TopologyRules, AcceptsTheSameTopologyAndNothingAtAll) {
  EXPECT_TRUE(checkConflicts(complete(4), specOf(4)));
  EXPECT_TRUE(checkComplete(complete(4), specOf(4)));
  EXPECT_TRUE(checkConflicts(Topology{}, specOf(4)));
  EXPECT_EQ(checkComplete(Topology{}, specOf(4)).code(), Status::Code::kNotFound);
}

TEST(TopologyRules, RefusesAnotherPartitionCount) {
  const Status fewer = checkConflicts(complete(4), specOf(2));
  EXPECT_EQ(fewer.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(fewer.message().find("'s.p3' exists"), std::string::npos) << fewer.message();
  EXPECT_NE(fewer.message().find("at least 4 partitions"), std::string::npos) << fewer.message();
  const Status more = checkConflicts(complete(4), specOf(8));
  EXPECT_EQ(more.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(more.message().find("'s.p7' is missing while 's.p3' exists"), std::string::npos)
      << more.message();
}

TEST(TopologyRules, ADeclarationCutShortIsNoConflict) {
  // Declared highest first: p3 and p2 made, then the node stopped.
  Topology t = complete(4);
  t.partitions.erase(0);
  t.partitions.erase(1);
  EXPECT_TRUE(checkConflicts(t, specOf(4)));
  const Status incomplete = checkComplete(t, specOf(4));
  EXPECT_EQ(incomplete.code(), Status::Code::kNotFound);
  EXPECT_NE(incomplete.message().find("'s.p0' is missing"), std::string::npos);
}

TEST(TopologyRules, RefusesQueuesOfTheWrongKind) {
  Topology classic = complete(2);
  classic.partitions[1].type = "classic";
  EXPECT_NE(checkConflicts(classic, specOf(2)).message().find("'s.p1' is classic"),
            std::string::npos);
  Topology no_sac = complete(2);
  no_sac.partitions[0].single_active_consumer = false;
  EXPECT_NE(checkConflicts(no_sac, specOf(2)).message().find("no single active consumer"),
            std::string::npos);
  Topology transient = complete(2);
  transient.composites->durable = false;
  EXPECT_NE(checkConflicts(transient, specOf(2)).message().find("'s.composites'"),
            std::string::npos);
}

TEST(TopologyRules, RefusesExchangesOfAnotherTypeAndMisroutedPartitions) {
  Topology fanout_in = complete(2);
  fanout_in.in.type = "fanout";
  EXPECT_NE(checkConflicts(fanout_in, specOf(2)).message().find("'s.in' exists as fanout"),
            std::string::npos);
  Topology misrouted = complete(2);
  misrouted.in_bindings.emplace("s.p1", "p0");
  EXPECT_NE(checkConflicts(misrouted, specOf(2)).message().find("routes key 'p0' to queue 's.p1'"),
            std::string::npos);
}

TEST(TopologyRules, NamesWhatIsMissing) {
  Topology t = complete(2);
  t.in_bindings.erase({"s.p1", "p1"});
  EXPECT_NE(checkComplete(t, specOf(2)).message().find("binding 'p1' of 's.in' to 's.p1'"),
            std::string::npos);
  t = complete(2);
  t.members.exists = false;
  EXPECT_NE(checkComplete(t, specOf(2)).message().find("exchange 's.members' is missing"),
            std::string::npos);
}

// A stream-input topology: the partitions' events go to streams, the
// quorum queues are the leases and nothing routes to them.
Topology completeStreams(uint32_t p) {
  Topology t = complete(p);
  t.in_bindings.clear();
  for (uint32_t i = 0; i < p; ++i) {
    QueueState q;
    q.name = partitionStream("s", i);
    q.type = "stream";
    q.durable = true;
    t.streams[i] = q;
    t.in_bindings.emplace(q.name, partitionRoutingKey(i));
  }
  return t;
}

services::cluster::ClusterSpec streamSpecOf(uint32_t p) {
  services::cluster::ClusterSpec spec = specOf(p);
  spec.input = services::cluster::ClusterSpec::Input::kStream;
  return spec;
}

TEST(TopologyNames, NameAPartitionStream) {
  EXPECT_EQ(partitionStream("trades", 3), "trades.p3.log");
  EXPECT_EQ(partitionStreamOf("trades", "trades.p3.log"), 3u);
  EXPECT_EQ(partitionStreamOf("trades", "trades.p3"), std::nullopt);
  EXPECT_EQ(partitionStreamOf("trades", "trades.p03.log"), std::nullopt);
  EXPECT_EQ(partitionStreamOf("trades", "other.p3.log"), std::nullopt);
}

TEST(TopologyRules, StreamInputNeedsStreamsLeasesAndItsBindings) {
  EXPECT_TRUE(checkComplete(completeStreams(3), streamSpecOf(3)));
  Topology no_stream = completeStreams(3);
  no_stream.streams.erase(1);
  EXPECT_NE(
      checkComplete(no_stream, streamSpecOf(3)).message().find("stream 's.p1.log' is missing"),
      std::string::npos);
  Topology no_lease = completeStreams(3);
  no_lease.partitions.erase(0);
  EXPECT_NE(checkComplete(no_lease, streamSpecOf(3)).message().find("queue 's.p0' is missing"),
            std::string::npos);
  Topology classic = completeStreams(3);
  classic.streams[2].type = "classic";
  EXPECT_NE(checkConflicts(classic, streamSpecOf(3)).message().find("expected stream, durable"),
            std::string::npos);
  EXPECT_NE(checkConflicts(completeStreams(3), streamSpecOf(2)).message().find("at least 3"),
            std::string::npos);
}

TEST(TopologyRules, RefusesATopologyOfTheOtherInputKind) {
  const Status queues = checkConflicts(complete(2), streamSpecOf(2));
  EXPECT_EQ(queues.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(queues.message().find("takes its events on quorum queues (input=\"queue\")"),
            std::string::npos)
      << queues.message();
  const Status streams = checkConflicts(completeStreams(2), specOf(2));
  EXPECT_EQ(streams.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(streams.message().find("takes its events on streams (input=\"stream\")"),
            std::string::npos)
      << streams.message();
}

TEST(TopologyRules, RefusesASpecWithoutPartitionsOrBrokers) {
  EXPECT_EQ(checkConflicts(Topology{}, specOf(0)).code(), Status::Code::kInvalidArgument);
  auto no_broker = specOf(2);
  no_broker.brokers.clear();
  EXPECT_EQ(checkConflicts(Topology{}, no_broker).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace cepbus::services::cluster
