// The cluster topology on a real 3-node RabbitMQ 3.10 cluster
// (scripts/rabbitmq-cluster.sh, started once for this program): declaring
// is idempotent, gives quorum + single-active-consumer queues replicated on
// the three nodes, refuses another partition count or queues of the wrong
// kind, and goes on through the failover list when a broker is down.

#include "services/cluster/topology.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "services/cluster/cluster_spec.h"
#include "services/cluster/management_client.h"
#include "tests/testing/rabbitmq_cluster.h"
#include "tests/testing/wait.h"

namespace cepbus::services::cluster {
namespace {

using ::cepbus::testing::RabbitMqCluster;

class TopologyTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(rmq().start()); }
  void TearDown() override {
    if (!rmq().running() || spec_.name.empty()) return;
    // Each test has its own names; remove them so a slow run stays small.
    const auto client = ManagementClient::forCluster(spec_, "guest");
    for (uint32_t i = 0; i < 16; ++i) {
      (void)client.remove("/api/queues/%2F/" + percentEncode(partitionQueue(spec_.name, i)));
    }
    (void)client.remove("/api/queues/%2F/" + percentEncode(compositesQueue(spec_.name)));
    for (const auto& e :
         {inExchange(spec_.name), outExchange(spec_.name), membersExchange(spec_.name)}) {
      (void)client.remove("/api/exchanges/%2F/" + percentEncode(e));
    }
  }

  static RabbitMqCluster& rmq() { return RabbitMqCluster::shared(); }

  services::cluster::ClusterSpec& spec(uint32_t partitions) {
    if (spec_.name.empty()) {
      std::random_device rd;
      spec_.name = "cepbus-test-" + std::to_string(rd() % 1000000);
      spec_.node = "n1";
      spec_.brokers = rmq().brokers();
    }
    spec_.partitions = partitions;
    return spec_;
  }

  services::cluster::ClusterSpec spec_;
};

TEST_F(TopologyTest, DeclaresQuorumSingleActiveConsumerQueuesIdempotently) {
  const auto& s = spec(4);
  ASSERT_TRUE(declareTopology(s, "guest")) << declareTopology(s, "guest").toString();
  const Status again = declareTopology(s, "guest");
  ASSERT_TRUE(again) << again.toString();

  auto t = inspectTopology(s, "guest");
  ASSERT_TRUE(t) << t.status().toString();
  EXPECT_TRUE(checkComplete(*t, s)) << checkComplete(*t, s).toString();
  EXPECT_EQ(t->partitionCount(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    const QueueState& q = t->partitions.at(i);
    EXPECT_EQ(q.name, s.name + ".p" + std::to_string(i));
    EXPECT_EQ(q.type, "quorum");
    EXPECT_TRUE(q.durable);
    EXPECT_TRUE(q.single_active_consumer);
    EXPECT_EQ(q.members.size(), 3u) << q.name;
    EXPECT_TRUE(t->in_bindings.count({q.name, "p" + std::to_string(i)})) << q.name;
  }
  ASSERT_TRUE(t->composites.has_value());
  EXPECT_EQ(t->composites->type, "quorum");
  EXPECT_EQ(t->composites->members.size(), 3u);
  EXPECT_TRUE(t->composites_keys.count("#"));
  EXPECT_EQ(t->in.type, "direct");
  EXPECT_EQ(t->out.type, "topic");
  EXPECT_EQ(t->members.type, "fanout");
}

// The broker samples queue lengths (every second in the test cluster);
// the lease queue's, once sampled (0 when it never is, which the callers'
// comparisons report).
uint64_t sampledMessages(const services::cluster::ClusterSpec& s, uint32_t partition) {
  std::optional<uint64_t> n;
  testing::waitUntil(
      [&] {
        auto t = inspectTopology(s, "guest");
        if (t && t->partitions.count(partition)) n = t->partitions.at(partition).messages;
        return n.has_value();
      },
      std::chrono::seconds(20), std::chrono::milliseconds(200));
  return n.value_or(0);
}

TEST_F(TopologyTest, DeclaresStreamsAndLeasesHoldingOneTokenEach) {
  auto& s = spec(3);
  s.input = services::cluster::ClusterSpec::Input::kStream;
  s.retention = "1h";
  ASSERT_TRUE(declareTopology(s, "guest")) << declareTopology(s, "guest").toString();
  auto t = inspectTopology(s, "guest");
  ASSERT_TRUE(t) << t.status().toString();
  EXPECT_TRUE(checkComplete(*t, s)) << checkComplete(*t, s).toString();
  for (uint32_t i = 0; i < 3; ++i) {
    const QueueState& log = t->streams.at(i);
    EXPECT_EQ(log.name, s.name + ".p" + std::to_string(i) + ".log");
    EXPECT_EQ(log.type, "stream");
    EXPECT_TRUE(t->in_bindings.count({log.name, "p" + std::to_string(i)})) << log.name;
    EXPECT_FALSE(t->in_bindings.count({partitionQueue(s.name, i), "p" + std::to_string(i)}));
    EXPECT_TRUE(t->partitions.at(i).single_active_consumer);
    EXPECT_EQ(sampledMessages(s, i), 1u) << "lease of partition " << i;
  }
  // Declared again once the broker has sampled the leases: no second token.
  ASSERT_TRUE(declareTopology(s, "guest"));
  // Two of the broker's samples, so that a second token, had one been
  // published, would show: what must not happen has nothing to wait for.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(sampledMessages(s, i), 1u) << i;
  // A node of the other input kind would read the wrong place: refused.
  services::cluster::ClusterSpec queues = s;
  queues.input = services::cluster::ClusterSpec::Input::kQueue;
  const Status other = declareTopology(queues, "guest");
  EXPECT_EQ(other.code(), Status::Code::kInvalidArgument) << other.toString();
  EXPECT_NE(other.message().find("takes its events on streams"), std::string::npos)
      << other.message();
}

TEST_F(TopologyTest, RefusesAnotherPartitionCount) {
  ASSERT_TRUE(declareTopology(spec(4), "guest"));

  const Status more = declareTopology(spec(8), "guest");
  EXPECT_EQ(more.code(), Status::Code::kInvalidArgument) << more.toString();
  EXPECT_NE(more.message().find(".p7' is missing"), std::string::npos) << more.message();
  const Status fewer = declareTopology(spec(2), "guest");
  EXPECT_EQ(fewer.code(), Status::Code::kInvalidArgument) << fewer.toString();
  EXPECT_NE(fewer.message().find(".p3' exists"), std::string::npos) << fewer.message();

  // Refused before changing anything, and a node of either count would not consume.
  auto t = inspectTopology(spec(8), "guest");
  ASSERT_TRUE(t) << t.status().toString();
  EXPECT_EQ(t->partitionCount(), 4u);
  EXPECT_FALSE(checkComplete(*t, spec(8)));
  EXPECT_FALSE(checkComplete(*t, spec(2)));
  EXPECT_TRUE(checkComplete(*t, spec(4)));
}

TEST_F(TopologyTest, RefusesAPartitionQueueThatIsNotQuorumWithSingleActiveConsumer) {
  const auto& s = spec(2);
  const auto client = ManagementClient::forCluster(s, "guest");
  ASSERT_TRUE(client.sendJson(HttpMethod::kPut, "/api/queues/%2F/" + percentEncode(s.name + ".p1"),
                              {{"durable", true}, {"arguments", {{"x-queue-type", "quorum"}}}}));
  const Status no_sac = declareTopology(s, "guest");
  EXPECT_EQ(no_sac.code(), Status::Code::kInvalidArgument) << no_sac.toString();
  EXPECT_NE(no_sac.message().find("no single active consumer"), std::string::npos)
      << no_sac.message();

  ASSERT_TRUE(client.remove("/api/queues/%2F/" + percentEncode(s.name + ".p1")));
  ASSERT_TRUE(client.sendJson(HttpMethod::kPut, "/api/queues/%2F/" + percentEncode(s.name + ".p1"),
                              {{"durable", true}, {"arguments", nlohmann::json::object()}}));
  const Status classic = declareTopology(s, "guest");
  EXPECT_EQ(classic.code(), Status::Code::kInvalidArgument) << classic.toString();
  EXPECT_NE(classic.message().find("is classic"), std::string::npos) << classic.message();
}

TEST_F(TopologyTest, GoesThroughTheFailoverListWhenABrokerIsDown) {
  const auto& s = spec(2);
  ASSERT_TRUE(rmq().kill(1));
  const Status declared = declareTopology(s, "guest");  // node 1 is first in the list
  const Status inspected = [&] {
    auto t = inspectTopology(s, "guest");
    return t ? checkComplete(*t, s) : t.status();
  }();
  ASSERT_TRUE(rmq().restart(1));
  EXPECT_TRUE(declared) << declared.toString();
  EXPECT_TRUE(inspected) << inspected.toString();
}

// An independent AMQP 1.0 client (Proton's Python binding) with container
// id "cepbus-probe-<n>" holds one connection until the broker closes it.
constexpr const char* kProbeClient = R"(
import sys
from proton.handlers import MessagingHandler
from proton.reactor import Container
class Probe(MessagingHandler):
    def on_start(self, event):
        conn = event.container.connect(sys.argv[1], user="guest", password="guest",
                                       allowed_mechs="PLAIN", reconnect=False)
        event.container.create_receiver(conn, "/topic/cepbus-probe")
        event.container.schedule(120, self)
    def on_link_opened(self, event):
        print("open", flush=True)
    def on_connection_remote_close(self, event):
        print("closed by the broker", flush=True)
        event.container.stop()
    def on_timer_task(self, event):
        event.container.stop()
Container(Probe(), sys.argv[2]).run()
)";

TEST_F(TopologyTest, ClosesTheConnectionsOfAPeerAddressButCannotSeeContainerIds) {
  const auto& s = spec(1);
  const auto dir = rmq().dir().string() + ".probe";
  std::filesystem::create_directories(dir);
  const std::string container = "cepbus-probe-" + s.name;
  cepbus::testing::ChildProcess probe(
      {"/usr/bin/python3", "-c", kProbeClient,
       "amqp://127.0.0.1:" + std::to_string(rmq().amqpPort(2)), container},
      dir);
  ASSERT_TRUE(probe.started());
  std::vector<BrokerConnection> amqp10;
  Status listed;
  ASSERT_TRUE(testing::eventually(
      "the broker to list the probe's AMQP 1.0 connection",
      [&] {
        auto all = listConnections(s, "guest");
        listed = all.status();
        if (!all) return true;  // reported below
        for (const auto& c : *all) {
          if (c.protocol.rfind("AMQP 1.0", 0) == 0) amqp10.push_back(c);
        }
        return !amqp10.empty();
      },
      std::chrono::seconds(60), std::chrono::milliseconds(200)))
      << probe.err();
  ASSERT_TRUE(listed) << listed.toString();
  ASSERT_EQ(amqp10.size(), 1u) << probe.err();
  EXPECT_EQ(amqp10[0].node, rmq().nodeName(2));

  // RabbitMQ 3.10 shows no container id: closing by it is refused, not a no-op.
  const Status by_id = closeConnectionsOf(s, "guest", container);
  if (amqp10[0].container_id.empty()) {
    EXPECT_EQ(by_id.code(), Status::Code::kUnavailable) << by_id.toString();
  } else {
    EXPECT_TRUE(by_id) << by_id.toString();  // a broker that shows it
  }
  const auto by_address = closeConnectionsFrom(s, "guest", {peerAddress(amqp10[0])});
  ASSERT_TRUE(by_address) << by_address.status().toString();
  EXPECT_EQ(*by_address, 1u);
  EXPECT_EQ(probe.wait(std::chrono::seconds(30)), 0) << probe.out() << probe.err();
  EXPECT_NE(probe.out().find("closed by the broker"), std::string::npos) << probe.out();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace
}  // namespace cepbus::services::cluster
