#include "router/registry.h"

#include <gtest/gtest.h>

#include <thread>

namespace cepbus::router {
namespace {

TEST(RegistryTest, AddFindRemove) {
  Registry registry;
  auto entry = registry.add("amqp", ComponentKind::kService);
  ASSERT_TRUE(entry.isOk());
  EXPECT_EQ(registry.add("amqp", ComponentKind::kEndpoint).status().code(),
            Status::Code::kAlreadyExists);
  EXPECT_EQ(registry.add("", ComponentKind::kService).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(registry.find("amqp"), *entry);
  EXPECT_EQ(registry.find("nope"), nullptr);
  EXPECT_EQ(registry.size(), 1u);
  EXPECT_TRUE(registry.remove("amqp"));
  EXPECT_FALSE(registry.remove("amqp"));
  EXPECT_FALSE(registry.snapshotOf("amqp").has_value());
  // The holder keeps its entry after removal; it just no longer shows.
  (*entry)->addDelivered();
  EXPECT_EQ(registry.size(), 0u);
}

TEST(RegistryTest, SnapshotsCarryStateMetadataAndNumbers) {
  Registry registry;
  auto svc = *registry.add("cep", ComponentKind::kService);
  auto ep = *registry.add("cep.in", ComponentKind::kEndpoint, "cep");
  EXPECT_EQ(svc->state(), ComponentState::kRegistered);
  svc->setState(ComponentState::kStarted);
  EXPECT_EQ(svc->state(), ComponentState::kStarted);
  ep->setState(ComponentState::kFailed, "consumer crashed");
  ep->setMetadata("protocol", "amqp");
  ep->setMetadata("address", "stocks.#");
  ep->setMetadata("protocol", "amqp1.0");  // replaces
  ep->addDelivered(5);
  ep->addFailed(2);
  ep->addRejected(1);
  ep->setQueueLength(7);
  EXPECT_EQ(ep->metadata("protocol"), "amqp1.0");
  EXPECT_FALSE(ep->metadata("missing").has_value());

  std::vector<ComponentSnapshot> all = registry.snapshot();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "cep");  // sorted by name
  EXPECT_EQ(all[0].state, ComponentState::kStarted);
  const ComponentSnapshot& s = all[1];
  EXPECT_EQ(s.name, "cep.in");
  EXPECT_EQ(s.kind, ComponentKind::kEndpoint);
  EXPECT_EQ(s.owner, "cep");
  EXPECT_EQ(s.state, ComponentState::kFailed);
  EXPECT_EQ(s.reason, "consumer crashed");
  EXPECT_EQ(s.metadata, (std::vector<std::pair<std::string, std::string>>{
                            {"address", "stocks.#"}, {"protocol", "amqp1.0"}}));
  EXPECT_EQ(s.delivered, 5u);
  EXPECT_EQ(s.failed, 2u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.queue_length, 7u);
  EXPECT_STREQ(componentKindName(s.kind), "endpoint");
  EXPECT_STREQ(componentStateName(s.state), "failed");
}

TEST(RegistryTest, ProbesFillLiveNumbersAtSnapshotTime) {
  Registry registry;
  auto flow = *registry.add("flow/seda", ComponentKind::kFlow);
  uint64_t queue = 3;
  flow->addDelivered(10);
  flow->setProbe([&](LiveNumbers& n) {
    EXPECT_EQ(n.delivered, 10u);  // starts from the pushed counters
    n.queue_length = queue;
    n.delivered += 1;
  });
  EXPECT_EQ(registry.snapshotOf("flow/seda")->queue_length, 3u);
  queue = 9;
  auto s = registry.snapshotOf("flow/seda");
  EXPECT_EQ(s->queue_length, 9u);
  EXPECT_EQ(s->delivered, 11u);
}

TEST(RegistryTest, ThroughputIsDeliveredPerSecondOverTheSamplingInterval) {
  Registry registry;
  auto ep = *registry.add("e", ComponentKind::kEndpoint);
  const auto t0 = std::chrono::steady_clock::now();
  ep->addDelivered(100);
  auto s = registry.snapshotOf("e", t0 + std::chrono::seconds(2));
  EXPECT_NEAR(s->throughput_per_s, 50.0, 1.0);
  ep->addDelivered(30);
  // Too soon for a new sample: the last rate stands.
  s = registry.snapshotOf("e", t0 + std::chrono::seconds(2) + std::chrono::milliseconds(10));
  EXPECT_NEAR(s->throughput_per_s, 50.0, 1.0);
  s = registry.snapshotOf("e", t0 + std::chrono::seconds(5));
  EXPECT_NEAR(s->throughput_per_s, 10.0, 0.1);
}

TEST(RegistryTest, ConcurrentReportingAndSnapshots) {
  Registry registry;
  auto ep = *registry.add("e", ComponentKind::kEndpoint);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        ep->addDelivered();
        if (i % 500 == 0) {
          ep->setMetadata("k" + std::to_string(t), std::to_string(i));
          registry.snapshot();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(registry.snapshotOf("e")->delivered, 20000u);
  EXPECT_EQ(registry.snapshotOf("e")->metadata.size(), 4u);
}

}  // namespace
}  // namespace cepbus::router
