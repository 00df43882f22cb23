#include "services/amqp/listener/subscriber_deliveries.h"

#include <gtest/gtest.h>

#include <memory>
#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/io/connection_driver.hpp>
#include <proton/message.hpp>
#include <proton/sender.hpp>
#include <vector>

#include "bus/core/event.h"
#include "flows/exchange.h"
#include "tests/services/amqp/listener/outbox_test_util.h"

namespace cepbus::services::amqp {
namespace {

using testing::offerBestEffort;

using Outcome = SubscriberDeliveries::Outcome;

OutboxEntry entry(Timestamp ts) {
  OutboxEntry e;
  e.event = EventBuilder("Tick").at(ts).build();
  return e;
}

flows::Exchange exchange(Timestamp ts) {
  flows::Exchange ex;
  ex.event = EventBuilder("Tick").at(ts).build();
  ex.address = Symbol::intern("ticks");
  return ex;
}

struct SubscriberDeliveriesTest : ::testing::Test {
  SubscriberDeliveriesTest() {
    driver.connect(proton::connection_options());
    link = driver.connection().open_sender("ticks");
  }

  // A tracker as the listener gets one: a message sent on a link of a
  // connection that lives in memory only (no peer, so it is never written).
  proton::tracker send() { return link.send(proton::message("tick")); }

  void bind() {
    outbox->bind([](flows::WakeHold*) { return true; });
  }

  // Sends `e` and hands it over as the listener does.
  proton::tracker deliver(OutboxEntry e, bool settled = false) {
    proton::tracker t = send();
    deliveries.sent(t, std::move(e), settled);
    return t;
  }

  proton::io::connection_driver driver{"bus"};
  proton::sender link;
  std::shared_ptr<ListenerCounters> counters = std::make_shared<ListenerCounters>();
  std::shared_ptr<SubscriberOutbox> outbox = std::make_shared<SubscriberOutbox>(
      /*capacity=*/4, /*away_capacity=*/4, Symbol::intern("amqp"), counters);
  SubscriberDeliveries deliveries{outbox, counters};
  int drains = 0;
  std::function<void()> drain = [this] { ++drains; };
};

TEST_F(SubscriberDeliveriesTest, SendsItsCreditButNoMoreThanTheBufferInFlight) {
  EXPECT_EQ(deliveries.sendable(/*credit=*/2, /*unsent=*/0), 2);
  EXPECT_EQ(deliveries.sendable(100, 0), 4);
  deliver(entry(1));
  deliver(entry(2));
  deliver(entry(3));
  EXPECT_EQ(deliveries.sendable(100, 0), 1);
  // Deliveries not written out yet count as in flight when there are more.
  EXPECT_EQ(deliveries.sendable(100, 4), 0);
}

TEST_F(SubscriberDeliveriesTest, AnUnsettledDeliveryIsKeptUntilSettled) {
  proton::tracker t = deliver(entry(1));
  EXPECT_EQ(deliveries.unsettled(), 1u);
  EXPECT_EQ(counters->sent.value(), 1u);
  EXPECT_EQ(counters->unsettled.value(), 1);
  EXPECT_EQ(outbox->stats().delivered.load(), 1u);

  deliveries.settle(t, Outcome::kAccepted, drain);
  EXPECT_EQ(deliveries.unsettled(), 0u);
  EXPECT_EQ(counters->unsettled.value(), 0);
  EXPECT_EQ(outbox->stats().acknowledged.load(), 1u);
  EXPECT_EQ(drains, 0);  // nothing held back
}

TEST_F(SubscriberDeliveriesTest, APresettledDeliveryIsNotKept) {
  deliver(entry(1), /*settled=*/true);
  EXPECT_EQ(deliveries.unsettled(), 0u);
  EXPECT_EQ(counters->sent.value(), 1u);
  EXPECT_EQ(counters->unsettled.value(), 0);
}

TEST_F(SubscriberDeliveriesTest, ARejectIsFinal) {
  proton::tracker t = deliver(entry(1));
  deliveries.settle(t, Outcome::kRejected, drain);
  EXPECT_EQ(deliveries.unsettled(), 0u);
  EXPECT_EQ(outbox->stats().not_acknowledged.load(), 1u);
  EXPECT_TRUE(outbox->take(10).empty());  // not offered again
  EXPECT_EQ(drains, 0);
}

TEST_F(SubscriberDeliveriesTest, AReleasedBestEffortDeliveryGoesBackInFront) {
  bind();
  ASSERT_TRUE(offerBestEffort(*outbox, exchange(1)));
  ASSERT_TRUE(offerBestEffort(*outbox, exchange(2)));
  std::vector<OutboxEntry> taken = outbox->take(1);
  proton::tracker t = deliver(std::move(taken[0]));
  deliveries.settle(t, Outcome::kReleased, drain);
  EXPECT_EQ(drains, 1);
  std::vector<OutboxEntry> again = outbox->take(10);
  ASSERT_EQ(again.size(), 2u);
  EXPECT_EQ(again[0].event->ts(), 1);
  EXPECT_EQ(again[0].delivery_count, 1u);  // marked as a redelivery
  EXPECT_EQ(again[1].event->ts(), 2);
  EXPECT_EQ(outbox->stats().not_acknowledged.load(), 1u);
}

TEST_F(SubscriberDeliveriesTest, ASettlementUnderTheBoundDrainsTheLink) {
  ASSERT_EQ(deliveries.sendable(100, 0), 4);  // stopped by the bound, not the credit
  std::vector<proton::tracker> sent;
  for (Timestamp ts = 1; ts <= 4; ++ts) sent.push_back(deliver(entry(ts)));
  deliveries.settle(sent[0], Outcome::kAccepted, drain);
  EXPECT_EQ(drains, 1);
  // Stopped by the credit: a settlement frees nothing worth a drain.
  ASSERT_EQ(deliveries.sendable(0, 0), 0);
  deliveries.settle(sent[1], Outcome::kAccepted, drain);
  EXPECT_EQ(drains, 1);
}

TEST_F(SubscriberDeliveriesTest, AtTheBoundTheLinkDrainsBeforeAReleasedEntryIsPutBack) {
  bind();
  ASSERT_EQ(deliveries.sendable(100, 0), 4);
  std::vector<proton::tracker> sent;
  for (Timestamp ts = 1; ts <= 4; ++ts) sent.push_back(deliver(entry(ts)));
  std::vector<int64_t> loads;  // the outbox as each drain finds it
  deliveries.settle(sent[0], Outcome::kReleased, [&] { loads.push_back(outbox->load()); });
  EXPECT_EQ(loads, (std::vector<int64_t>{0, 1}));
}

TEST_F(SubscriberDeliveriesTest, AnUnknownTrackerChangesNothing) {
  deliver(entry(1));
  deliveries.settle(send(), Outcome::kReleased, drain);
  EXPECT_EQ(deliveries.unsettled(), 1u);
  EXPECT_EQ(drains, 0);
  EXPECT_TRUE(outbox->take(10).empty());
}

TEST_F(SubscriberDeliveriesTest, ALinkThatGoesAwayHandsBackEveryUnsettledEntry) {
  deliver(entry(1));
  deliver(entry(2));
  deliver(entry(3), /*settled=*/true);
  std::vector<OutboxEntry> back = deliveries.takeUnsettled();
  EXPECT_EQ(back.size(), 2u);
  EXPECT_EQ(deliveries.unsettled(), 0u);
  EXPECT_EQ(counters->unsettled.value(), 0);
}

}  // namespace
}  // namespace cepbus::services::amqp
