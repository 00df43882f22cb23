#include "services/amqp/broker_subscriptions.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "bus/core/event.h"
#include "flows/st_flow.h"
#include "router/delivery_policy.h"
#include "router/registry.h"
#include "services/amqp/message_mapping.h"

namespace cepbus::services::amqp {
namespace {

using namespace std::chrono_literals;
using Opened = BrokerSubscriptions::Opened;
using Refusal = BrokerSubscriptions::Refusal;

class BrokerSubscriptionsTest : public ::testing::Test {
 protected:
  BrokerSubscriptionsTest() {
    auto policy = std::make_unique<router::DeliveryPolicy>("st");
    EXPECT_TRUE(policy->addFlow(std::make_unique<flows::StFlow>("st")));
    broker_ = std::make_unique<router::Broker>(std::move(policy), registry_);
    EXPECT_TRUE(broker_->start());
    AmqpLimits limits;
    limits.max_durable = 1;
    admission_ = std::make_shared<AmqpAdmission>(limits);
    subscriptions_ = std::make_unique<BrokerSubscriptions>(
        *broker_, admission_, counters_,
        SubscriptionConfig{/*subscriber_buffer=*/10, /*durable_buffer=*/2,
                           Symbol::intern("amqp-listener"), "amqp-listener"});
  }
  ~BrokerSubscriptionsTest() override {
    subscriptions_->endParked();
    broker_->stop();
  }

  SubscriberOutbox::Wake wake() {
    return [this] {
      ++wakes_;
      return true;
    };
  }

  std::variant<Opened, Refusal> open(const std::string& link, const std::string& pattern,
                                     bool durable = false, const std::string& owner = "") {
    return subscriptions_->open("client", link, pattern, durable, owner, wake());
  }

  // What the broker's publish of one event to `address` reached.
  uint32_t publish(const std::string& address, Timestamp ts = 1) {
    flows::Exchange ex;
    ex.event = EventBuilder("Tick").at(ts).build();
    ex.address = Symbol::intern(address);
    return broker_->publish(ex).targets;
  }

  std::shared_ptr<router::Registry> registry_ = std::make_shared<router::Registry>();
  std::unique_ptr<router::Broker> broker_;
  std::shared_ptr<AmqpAdmission> admission_;
  std::shared_ptr<ListenerCounters> counters_ = std::make_shared<ListenerCounters>();
  std::unique_ptr<BrokerSubscriptions> subscriptions_;
  int wakes_ = 0;
};

TEST_F(BrokerSubscriptionsTest, ALinkGetsAnEndpointNamedByItsClientAndLink) {
  auto opened = open("feed", "orders.*");
  ASSERT_TRUE(std::holds_alternative<Opened>(opened));
  const Opened& sub = std::get<Opened>(opened);
  EXPECT_EQ(sub.endpoint, "amqp:client/feed");
  ASSERT_NE(broker_->endpoint("amqp:client/feed"), nullptr);
  EXPECT_EQ(publish("orders.eu"), 1u);
  EXPECT_EQ(publish("alerts.eu"), 0u);
  EXPECT_GE(wakes_, 1);
  std::vector<OutboxEntry> got = sub.outbox->take(10);
  ASSERT_EQ(got.size(), 1u);
}

TEST_F(BrokerSubscriptionsTest, TheSameLinkTwiceIsRefusedAsLocked) {
  ASSERT_TRUE(std::holds_alternative<Opened>(open("feed", "orders.*")));
  auto again = open("feed", "orders.*");
  ASSERT_TRUE(std::holds_alternative<Refusal>(again));
  EXPECT_EQ(std::get<Refusal>(again).condition, "amqp:resource-locked");
  EXPECT_EQ(std::get<Refusal>(again).description,
            "link \"feed\" of container \"client\" is already attached");
}

TEST_F(BrokerSubscriptionsTest, DurablesBeyondTheLimitAreRefusedAndARefusalGivesBackItsAdmission) {
  ASSERT_TRUE(std::holds_alternative<Opened>(open("a", "x.*", true, "alice")));
  auto beyond = open("b", "y.*", true, "alice");
  ASSERT_TRUE(std::holds_alternative<Refusal>(beyond));
  EXPECT_EQ(std::get<Refusal>(beyond).condition, kResourceLimitExceeded);
  EXPECT_EQ(broker_->endpoint("amqp:client/b"), nullptr);
  // A durable one refused after its admission (its link is attached
  // already) does not keep counting against the limit.
  auto locked = open("a", "x.*", true, "bob");
  ASSERT_TRUE(std::holds_alternative<Refusal>(locked));
  EXPECT_TRUE(std::holds_alternative<Opened>(open("c", "z.*", true, "bob")));
}

TEST_F(BrokerSubscriptionsTest, APlainAddressSubscriberProvidesItsAddress) {
  auto opened = open("calc", "math.square");
  ASSERT_TRUE(std::holds_alternative<Opened>(opened));
  flows::Exchange request;
  request.event = EventBuilder("Number").at(1).build();
  request.address = Symbol::intern("math.square");
  auto id = broker_->request(request, 1s, [](const flows::Outcome&) {});
  ASSERT_TRUE(id) << id.status().message();
  std::vector<OutboxEntry> got = std::get<Opened>(opened).outbox->take(10);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].request.pattern, flows::Pattern::kInOut);
}

TEST_F(BrokerSubscriptionsTest, AParkedDurableSubscriptionKeepsItsEndpointAndResumes) {
  auto first = open("feed", "orders.*", true, "alice");
  ASSERT_TRUE(std::holds_alternative<Opened>(first));
  Opened sub = std::get<Opened>(first);
  subscriptions_->park(sub.endpoint, DurableSubscription{"orders.*", sub.outbox, sub.owner}, {});
  EXPECT_EQ(publish("orders.eu", 1), 1u);  // still subscribed while away
  EXPECT_EQ(publish("orders.eu", 2), 1u);
  EXPECT_EQ(publish("orders.eu", 3), 1u);  // beyond the durable buffer: refused
  EXPECT_EQ(counters_->parked_overflow.load(), 1u);

  auto back = open("feed", "orders.*", true, "ignored");
  ASSERT_TRUE(std::holds_alternative<Opened>(back));
  EXPECT_EQ(std::get<Opened>(back).outbox, sub.outbox);
  EXPECT_EQ(std::get<Opened>(back).owner, "alice");
  EXPECT_EQ(std::get<Opened>(back).outbox->take(10).size(), 2u);
}

TEST_F(BrokerSubscriptionsTest, ComingBackWithAnotherPatternEndsTheParkedOne) {
  auto first = open("feed", "orders.*", true, "alice");
  ASSERT_TRUE(std::holds_alternative<Opened>(first));
  Opened sub = std::get<Opened>(first);
  subscriptions_->park(sub.endpoint, DurableSubscription{"orders.*", sub.outbox, sub.owner}, {});
  auto back = open("feed", "alerts.*", true, "alice");
  ASSERT_TRUE(std::holds_alternative<Opened>(back));  // its durable admission was given back
  EXPECT_NE(std::get<Opened>(back).outbox, sub.outbox);
  EXPECT_EQ(sub.outbox->offer(flows::Exchange{}).code(), Status::Code::kUnavailable);
  EXPECT_EQ(publish("orders.eu"), 0u);
  EXPECT_EQ(publish("alerts.eu"), 1u);
}

TEST_F(BrokerSubscriptionsTest, EndingRemovesTheEndpointAndTheDurableCount) {
  auto opened = open("feed", "orders.*", true, "alice");
  ASSERT_TRUE(std::holds_alternative<Opened>(opened));
  const Opened& sub = std::get<Opened>(opened);
  const std::string owner = sub.owner;
  subscriptions_->end(sub.endpoint, *sub.outbox, &owner);
  EXPECT_EQ(broker_->endpoint("amqp:client/feed"), nullptr);
  EXPECT_EQ(publish("orders.eu"), 0u);
  EXPECT_TRUE(std::holds_alternative<Opened>(open("other", "x.*", true, "alice")));
}

TEST_F(BrokerSubscriptionsTest, AReplyOutboxHasNoEndpoint) {
  auto outbox = subscriptions_->replyOutbox(wake());
  ASSERT_NE(outbox, nullptr);
  EXPECT_EQ(outbox->capacity(), 10u);
  EXPECT_EQ(publish("anything"), 0u);
}

}  // namespace
}  // namespace cepbus::services::amqp
