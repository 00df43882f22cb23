#include "services/amqp/listener/route_pressure.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "flows/reliable_flow.h"
#include "flows/seda_flow.h"
#include "flows/st_flow.h"
#include "router/broker.h"
#include "router/registry.h"
#include "tests/testing/wait.h"

namespace cepbus::services::amqp {
namespace {

std::unique_ptr<router::DeliveryPolicy> policyWithRoutes() {
  auto policy = std::make_unique<router::DeliveryPolicy>("st");
  EXPECT_TRUE(policy->addFlow(std::make_unique<flows::StFlow>("st")));
  flows::SedaFlowConfig seda;
  seda.name = "seda";
  seda.stage.capacity = 2;  // a blocked target saturates it at once
  seda.stage.batch_size = 1;
  EXPECT_TRUE(policy->addFlow(std::make_unique<flows::SedaFlow>(seda)));
  flows::ReliableFlowConfig reliable;
  reliable.name = "reliable";
  // Never started here: the journal is not opened.
  reliable.journal_path = (std::filesystem::temp_directory_path() / "route_pressure.db").string();
  EXPECT_TRUE(policy->addFlow(std::make_unique<flows::ReliableFlow>(reliable)));
  EXPECT_TRUE(policy->addRoute(router::RouteRule{"slow.#", "seda"}));
  // A sender may ask for reliable delivery: then the reliable flow takes it.
  EXPECT_TRUE(policy->addRoute(
      router::RouteRule{"orders.#", "st", flows::Qos::kBestEffort, true, "reliable"}));
  // Reliable asked for, but served by a flow that does not journal.
  EXPECT_TRUE(
      policy->addRoute(router::RouteRule{"quotes.#", "st", flows::Qos::kBestEffort, true, "seda"}));
  // Best effort only, whatever the sender asks.
  EXPECT_TRUE(policy->addRoute(router::RouteRule{"news.#", "reliable"}));
  return policy;
}

TEST(RoutePressureTest, OnlyAReliableFlowJournalsAPublish) {
  auto policy = policyWithRoutes();
  EXPECT_TRUE(journaledRoute(*policy, Symbol::intern("orders.eu")));
  EXPECT_FALSE(journaledRoute(*policy, Symbol::intern("quotes.eu")));
  EXPECT_FALSE(journaledRoute(*policy, Symbol::intern("news.eu")));
  EXPECT_FALSE(journaledRoute(*policy, Symbol::intern("slow.eu")));
  EXPECT_FALSE(journaledRoute(*policy, Symbol::intern("other")));
}

TEST(RoutePressureTest, NoTargetNamedIsNoSaturation) {
  auto policy = policyWithRoutes();
  EXPECT_FALSE(stagesSaturated(*policy, {}));
  EXPECT_FALSE(stagesSaturated(*policy, {"nobody"}));
}

// A SEDA stage stays saturated while its target blocks, and is not once
// the target took what was queued.
TEST(RoutePressureTest, SaturatedWhileATargetsStageIsFull) {
  auto registry = std::make_shared<router::Registry>();
  router::Broker broker(policyWithRoutes(), registry);
  ASSERT_TRUE(broker.start());
  std::mutex mu;
  std::condition_variable cv;
  bool blocked = true;
  std::atomic<int> entered{0};
  ASSERT_TRUE(broker.addEndpoint("t", [&](const flows::Exchange&, flows::DeliveryContext&) {
    entered.fetch_add(1);
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return !blocked; });
    return Status::ok();
  }));
  ASSERT_TRUE(broker.subscribe("t", "slow.#"));
  auto publish = [&](Timestamp ts) {
    flows::Exchange ex;
    ex.event = EventBuilder("Tick").at(ts).build();
    ex.address = Symbol::intern("slow.eu");
    broker.publish(ex);
  };
  // The worker holds the first event in the blocked target before the
  // queue is filled behind it: published all at once, the queue may take
  // the first two before the worker wakes and then hold only one.
  publish(1);
  ASSERT_TRUE(testing::waitUntil([&] { return entered.load() == 1; }));
  publish(2);
  publish(3);
  EXPECT_TRUE(testing::waitUntil([&] { return stagesSaturated(broker.policy(), {"t"}); }));
  EXPECT_FALSE(stagesSaturated(broker.policy(), {"u"}));
  {
    std::lock_guard lock(mu);
    blocked = false;
  }
  cv.notify_all();
  EXPECT_TRUE(testing::waitUntil([&] { return !stagesSaturated(broker.policy(), {"t"}); }));
  broker.stop();
}

}  // namespace
}  // namespace cepbus::services::amqp
