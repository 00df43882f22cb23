#include "services/amqp/listener/broker_subscriptions.h"

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
#include "services/protocols/amqp/listener_config.h"
#include "services/protocols/amqp/message_mapping.h"
#include "tests/flows/flow_test_util.h"
#include "tests/services/amqp/listener/outbox_test_util.h"

namespace cepbus::services::amqp {
namespace {

using testing::offerBestEffort;

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
    return [this](flows::WakeHold*) {
      ++wakes_;
      return true;
    };
  }

  // Records durable subscriptions in the journal at `path` from now on.
  void useStore(const std::string& path) {
    auto store = DurableStore::open(path);
    ASSERT_TRUE(store) << store.status().message();
    auto restored = subscriptions_->restore(std::move(*store), anyone_);
    ASSERT_TRUE(restored) << restored.status().message();
    EXPECT_EQ(restored->restored, 0u);
  }
  // The links recorded in the journal at `path`.
  static std::vector<std::string> recorded(const std::string& path) {
    std::vector<std::string> out;
    auto store = DurableStore::open(path);
    EXPECT_TRUE(store) << store.status().message();
    auto loaded = (*store)->load();
    EXPECT_TRUE(loaded) << loaded.status().message();
    for (const DurableRecord& r : loaded->records) out.push_back(r.link_name);
    return out;
  }
  void park(const Opened& sub, const std::string& pattern) {
    subscriptions_->park(sub.endpoint, DurableSubscription{pattern, sub.outbox, sub.owner}, {});
  }

  std::variant<Opened, Refusal> open(const std::string& link, const std::string& pattern,
                                     bool durable = false, const std::string& owner = "") {
    return subscriptions_->open("client", link, pattern, durable, owner, owner, wake());
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
  const AccessControl anyone_{[] {
    services::amqp::AmqpListenerConfig config;
    config.allow_anonymous = true;
    return config;
  }()};
  flows::testing::TempDir dir_;
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
  EXPECT_EQ(counters_->parked_overflow.value(), 1u);

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
  EXPECT_EQ(offerBestEffort(*sub.outbox, flows::Exchange{}).code(), Status::Code::kUnavailable);
  EXPECT_EQ(publish("orders.eu"), 0u);
  EXPECT_EQ(publish("alerts.eu"), 1u);
}

TEST_F(BrokerSubscriptionsTest, EndingRemovesTheEndpointAndTheDurableCount) {
  auto opened = open("feed", "orders.*", true, "alice");
  ASSERT_TRUE(std::holds_alternative<Opened>(opened));
  const Opened& sub = std::get<Opened>(opened);
  const std::string owner = sub.owner;
  EXPECT_TRUE(subscriptions_->end(sub.endpoint, *sub.outbox, &owner, /*closed=*/true,
                                  router::EndpointExit::kForGood));
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

TEST_F(BrokerSubscriptionsTest, ADurableSubscriptionIsRecordedUntilItsLinkIsClosed) {
  const std::string path = dir_.file("journal.db");
  useStore(path);
  auto kept = open("kept", "orders.*", true, "alice");
  auto closed = open("closed", "alerts.*", true, "bob");
  ASSERT_TRUE(std::holds_alternative<Opened>(open("plain", "x.*")));
  ASSERT_TRUE(std::holds_alternative<Opened>(kept));
  ASSERT_TRUE(std::holds_alternative<Opened>(closed));
  EXPECT_EQ(recorded(path), (std::vector<std::string>{"kept", "closed"}));
  // Parked, then the listener stops: still recorded, for the next start.
  park(std::get<Opened>(kept), "orders.*");
  const Opened& sub = std::get<Opened>(closed);
  const std::string owner = sub.owner;
  EXPECT_TRUE(subscriptions_->end(sub.endpoint, *sub.outbox, &owner, /*closed=*/true,
                                  router::EndpointExit::kForGood));
  subscriptions_->endParked();
  EXPECT_EQ(recorded(path), (std::vector<std::string>{"kept"}));
}

TEST_F(BrokerSubscriptionsTest, ANonDurableAttachReplacingAParkedOneForgetsItsRecord) {
  const std::string path = dir_.file("journal.db");
  useStore(path);
  auto first = open("feed", "orders.*", true, "alice");
  ASSERT_TRUE(std::holds_alternative<Opened>(first));
  park(std::get<Opened>(first), "orders.*");
  ASSERT_TRUE(std::holds_alternative<Opened>(open("feed", "orders.*")));
  EXPECT_TRUE(recorded(path).empty());
}

TEST_F(BrokerSubscriptionsTest, RestoredSubscriptionsWaitParkedAndKeepWhatIsPublished) {
  const std::string path = dir_.file("journal.db");
  {
    auto store = DurableStore::open(path);
    ASSERT_TRUE(store);
    ASSERT_TRUE((*store)->record(DurableRecord{"client", "feed", "orders.*", "", "client"}));
  }
  auto store = DurableStore::open(path);
  ASSERT_TRUE(store);
  auto restored = subscriptions_->restore(std::move(*store), anyone_);
  ASSERT_TRUE(restored) << restored.status().message();
  EXPECT_EQ(restored->restored, 1u);
  EXPECT_TRUE(restored->dropped.empty());
  EXPECT_EQ(counters_->parked_subscriptions.value(), 1);
  EXPECT_EQ(counters_->durable_restored.value(), 1u);
  EXPECT_EQ(publish("orders.eu", 1), 1u);
  EXPECT_EQ(publish("orders.eu", 2), 1u);
  // It counts against max-durable (1) for its owner.
  EXPECT_TRUE(std::holds_alternative<Refusal>(open("other", "x.*", true, "client")));
  auto back = open("feed", "orders.*", true, "client");
  ASSERT_TRUE(std::holds_alternative<Opened>(back));
  EXPECT_EQ(std::get<Opened>(back).owner, "client");
  EXPECT_EQ(std::get<Opened>(back).outbox->take(10).size(), 2u);
}

TEST_F(BrokerSubscriptionsTest, RecordsOfUsersGoneOrBeyondMaxDurableAreDroppedAndCounted) {
  const std::string path = dir_.file("journal.db");
  {
    auto store = DurableStore::open(path);
    ASSERT_TRUE(store);
    for (const DurableRecord& r : {DurableRecord{"client", "a", "orders.*", "alice", "alice"},
                                   DurableRecord{"client", "b", "alerts.*", "alice", "alice"},
                                   DurableRecord{"client", "c", "orders.*", "mallory", "mallory"},
                                   DurableRecord{"client", "d", "secret.*", "alice", "alice"}}) {
      ASSERT_TRUE((*store)->record(r));
    }
  }
  services::amqp::AmqpListenerConfig config;
  services::amqp::AmqpUser alice;
  alice.name = "alice";
  alice.permits.push_back(services::amqp::AmqpPermit{"", "orders.#", {}});
  alice.permits.push_back(services::amqp::AmqpPermit{"", "alerts.#", {}});
  config.users.push_back(alice);
  const AccessControl access(config);
  auto store = DurableStore::open(path);
  ASSERT_TRUE(store);
  auto restored = subscriptions_->restore(std::move(*store), access);
  ASSERT_TRUE(restored) << restored.status().message();
  EXPECT_EQ(restored->restored, 1u);
  ASSERT_EQ(restored->dropped.size(), 3u);
  EXPECT_NE(restored->dropped[0].find("durable subscription amqp:client/b on \"alerts.*\" not "
                                      "restored: "),
            std::string::npos)
      << restored->dropped[0];
  EXPECT_NE(restored->dropped[0].find("max-durable"), std::string::npos) << restored->dropped[0];
  EXPECT_NE(restored->dropped[1].find("user \"mallory\" is not declared"), std::string::npos)
      << restored->dropped[1];
  EXPECT_NE(restored->dropped[2].find("amqp:client/d"), std::string::npos) << restored->dropped[2];
  EXPECT_EQ(counters_->durable_not_restored.value(), 3u);
  EXPECT_EQ(admission_->refusals().durable, 1u);
  EXPECT_EQ(publish("alerts.eu"), 0u);
  EXPECT_EQ(publish("orders.eu"), 1u);
  EXPECT_EQ(recorded(path), (std::vector<std::string>{"a"}));
}

}  // namespace
}  // namespace cepbus::services::amqp
