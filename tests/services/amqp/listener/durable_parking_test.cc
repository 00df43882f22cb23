#include "services/amqp/listener/durable_parking.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bus/core/event.h"
#include "flows/exchange.h"
#include "tests/services/amqp/listener/outbox_test_util.h"

namespace cepbus::services::amqp {
namespace {

using testing::offerBestEffort;

flows::Exchange exchange(Timestamp ts) {
  flows::Exchange ex;
  ex.event = EventBuilder("Tick").at(ts).build();
  ex.address = Symbol::intern("ticks");
  return ex;
}

struct DurableParkingTest : ::testing::Test {
  std::shared_ptr<ListenerCounters> counters = std::make_shared<ListenerCounters>();
  std::vector<std::pair<std::string, std::string>> ended;  // endpoint, owner
  DurableParking parking{counters, [this](const std::string& endpoint, DurableSubscription& sub) {
                           ended.emplace_back(endpoint, sub.owner);
                           sub.outbox->close();
                         }};
  int wakes = 0;

  // A subscription bound to a link, as the listener makes it.
  std::shared_ptr<SubscriberOutbox> boundOutbox() {
    auto outbox = std::make_shared<SubscriberOutbox>(/*capacity=*/10, /*away_capacity=*/3,
                                                     Symbol::intern("amqp"), counters);
    outbox->bind([this](flows::WakeHold*) {
      ++wakes;
      return true;
    });
    return outbox;
  }
};

TEST_F(DurableParkingTest, AParkedSubscriptionKeepsCollectingUpToItsAwayCapacity) {
  auto outbox = boundOutbox();
  parking.park("amqp:c/sub", DurableSubscription{"orders.*", outbox, "alice"}, {});
  const int wakes_when_parked = wakes;
  EXPECT_EQ(parking.size(), 1u);
  EXPECT_EQ(counters->parked_subscriptions.value(), 1);
  for (Timestamp ts = 1; ts <= 3; ++ts) ASSERT_TRUE(offerBestEffort(*outbox, exchange(ts)));
  EXPECT_EQ(offerBestEffort(*outbox, exchange(4)).code(), Status::Code::kRejected);
  EXPECT_EQ(counters->parked_overflow.value(), 1u);
  EXPECT_EQ(wakes, wakes_when_parked);  // unbound: nobody to wake
}

TEST_F(DurableParkingTest, WhatTheSubscriberHadNotSettledComesFirstOnResume) {
  auto outbox = boundOutbox();
  for (Timestamp ts = 1; ts <= 3; ++ts) ASSERT_TRUE(offerBestEffort(*outbox, exchange(ts)));
  std::vector<OutboxEntry> unsettled = outbox->take(2);
  parking.park("amqp:c/sub", DurableSubscription{"orders.*", outbox, "alice"},
               std::move(unsettled));
  // Full while away: the unsettled count against the away capacity.
  EXPECT_EQ(offerBestEffort(*outbox, exchange(4)).code(), Status::Code::kRejected);

  auto resumed = parking.resume("amqp:c/sub", "orders.*", /*durable=*/true);
  ASSERT_TRUE(resumed.has_value());
  EXPECT_EQ(resumed->outbox, outbox);
  EXPECT_EQ(resumed->owner, "alice");
  EXPECT_EQ(parking.size(), 0u);
  EXPECT_EQ(counters->parked_subscriptions.value(), 0);
  EXPECT_TRUE(ended.empty());
  resumed->outbox->bind([](flows::WakeHold*) { return true; });
  ASSERT_TRUE(offerBestEffort(*outbox, exchange(4)));

  std::vector<OutboxEntry> entries = resumed->outbox->take(10);
  ASSERT_EQ(entries.size(), 4u);
  std::vector<Timestamp> order;
  for (const auto& e : entries) order.push_back(e.event->ts());
  EXPECT_EQ(order, (std::vector<Timestamp>{1, 2, 3, 4}));
  EXPECT_EQ(entries[0].delivery_count, 1u);  // sent once already: marked redelivered
  EXPECT_EQ(entries[1].delivery_count, 1u);
  EXPECT_EQ(entries[2].delivery_count, 0u);
}

TEST_F(DurableParkingTest, AttachingWithAnotherAddressEndsTheParkedSubscription) {
  auto outbox = boundOutbox();
  parking.park("amqp:c/sub", DurableSubscription{"orders.*", outbox, "alice"}, {});
  EXPECT_FALSE(parking.resume("amqp:c/sub", "orders.#", true).has_value());
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0], (std::pair<std::string, std::string>{"amqp:c/sub", "alice"}));
  EXPECT_EQ(parking.size(), 0u);
  EXPECT_EQ(counters->parked_subscriptions.value(), 0);
  EXPECT_EQ(offerBestEffort(*outbox, exchange(1)).code(), Status::Code::kUnavailable);
}

TEST_F(DurableParkingTest, AttachingNoLongerDurableEndsTheParkedSubscription) {
  parking.park("amqp:c/sub", DurableSubscription{"orders.*", boundOutbox(), "alice"}, {});
  EXPECT_FALSE(parking.resume("amqp:c/sub", "orders.*", /*durable=*/false).has_value());
  EXPECT_EQ(ended.size(), 1u);
  EXPECT_EQ(parking.size(), 0u);
}

TEST_F(DurableParkingTest, AnotherEndpointFindsNothingAndEndsNothing) {
  parking.park("amqp:c/sub", DurableSubscription{"orders.*", boundOutbox(), "alice"}, {});
  EXPECT_FALSE(parking.resume("amqp:c/other", "orders.*", true).has_value());
  EXPECT_FALSE(parking.resume("amqp:d/sub", "orders.*", true).has_value());
  EXPECT_TRUE(ended.empty());
  EXPECT_EQ(parking.size(), 1u);
  EXPECT_TRUE(parking.resume("amqp:c/sub", "orders.*", true).has_value());
}

TEST_F(DurableParkingTest, EndAllEndsEveryParkedSubscription) {
  parking.park("amqp:c/a", DurableSubscription{"a", boundOutbox(), "alice"}, {});
  parking.park("amqp:c/b", DurableSubscription{"b", boundOutbox(), "bob"}, {});
  EXPECT_EQ(counters->parked_subscriptions.value(), 2);
  parking.endAll();
  EXPECT_EQ(ended.size(), 2u);
  EXPECT_EQ(parking.size(), 0u);
  EXPECT_EQ(counters->parked_subscriptions.value(), 0);
}

}  // namespace
}  // namespace cepbus::services::amqp
