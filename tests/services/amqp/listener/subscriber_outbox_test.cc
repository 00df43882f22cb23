#include "services/amqp/listener/subscriber_outbox.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "bus/core/event.h"
#include "flows/exchange.h"
#include "tests/flows/flow_test_util.h"
#include "tests/services/amqp/listener/outbox_test_util.h"

namespace cepbus::services::amqp {
namespace {

using flows::testing::FakeJournal;
using testing::offerBestEffort;

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const Symbol kListener = Symbol::intern("amqp-listener");

flows::Exchange exchange(Timestamp ts, Symbol sender = Symbol()) {
  flows::Exchange ex;
  ex.event = EventBuilder("Tick").at(ts).build();
  ex.address = Symbol::intern("ticks");
  ex.sender = sender;
  return ex;
}

std::vector<Timestamp> timestamps(const std::vector<OutboxEntry>& entries) {
  std::vector<Timestamp> out;
  for (const auto& e : entries) out.push_back(e.event->ts());
  return out;
}

struct OutboxTest : ::testing::Test {
  std::shared_ptr<ListenerCounters> counters = std::make_shared<ListenerCounters>();
  SubscriberOutbox outbox{/*capacity=*/4, /*away_capacity=*/2, kListener, counters};
  int wakes = 0;
  const flows::WakeHold* last_hold = nullptr;  // what the last wake went through
  bool wake_succeeds = true;

  void bind() {
    outbox.bind([this](flows::WakeHold* hold) {
      ++wakes;
      last_hold = hold;
      return wake_succeeds;
    });
  }
};

TEST_F(OutboxTest, TakesEntriesOldestFirstAndCountsWhatWasTaken) {
  bind();
  for (Timestamp ts = 1; ts <= 3; ++ts) ASSERT_TRUE(offerBestEffort(outbox, exchange(ts)));
  EXPECT_EQ(timestamps(outbox.take(2)), (std::vector<Timestamp>{1, 2}));
  EXPECT_EQ(timestamps(outbox.take(5)), (std::vector<Timestamp>{3}));
  EXPECT_TRUE(outbox.take(5).empty());
  EXPECT_TRUE(outbox.take(0).empty());
  EXPECT_EQ(outbox.taken(), 3u);
}

TEST_F(OutboxTest, RefusesBeyondItsCapacityWhileBound) {
  bind();
  for (Timestamp ts = 1; ts <= 4; ++ts) ASSERT_TRUE(offerBestEffort(outbox, exchange(ts)));
  Status full = offerBestEffort(outbox, exchange(5));
  EXPECT_EQ(full.code(), Status::Code::kRejected);
  EXPECT_EQ(counters->buffer_full.value(), 1u);
  EXPECT_EQ(counters->parked_overflow.value(), 0u);  // its subscriber is there
  EXPECT_EQ(outbox.load(), 4);
  outbox.take(1);
  EXPECT_TRUE(offerBestEffort(outbox, exchange(6)));
}

TEST_F(OutboxTest, WhileAwayItHoldsItsAwayCapacityAndCountsTheOverflow) {
  // Never bound: a durable subscription whose subscriber is away.
  ASSERT_TRUE(offerBestEffort(outbox, exchange(1)));
  ASSERT_TRUE(offerBestEffort(outbox, exchange(2)));
  EXPECT_EQ(offerBestEffort(outbox, exchange(3)).code(), Status::Code::kRejected);
  EXPECT_EQ(counters->buffer_full.value(), 1u);
  EXPECT_EQ(counters->parked_overflow.value(), 1u);
  EXPECT_EQ(outbox.stats().parked_overflow.load(), 1u);
  // The subscriber back: its full capacity again, and what was kept comes first.
  bind();
  ASSERT_TRUE(offerBestEffort(outbox, exchange(4)));
  EXPECT_EQ(timestamps(outbox.take(10)), (std::vector<Timestamp>{1, 2, 4}));
}

TEST_F(OutboxTest, WakesTheBoundLinkOncePerDrain) {
  bind();
  EXPECT_EQ(wakes, 1);  // a link that binds is drained at once
  ASSERT_TRUE(offerBestEffort(outbox, exchange(1)));
  ASSERT_TRUE(offerBestEffort(outbox, exchange(2)));
  EXPECT_EQ(wakes, 1);  // the drain scheduled takes both
  outbox.take(10);
  ASSERT_TRUE(offerBestEffort(outbox, exchange(3)));
  ASSERT_TRUE(offerBestEffort(outbox, exchange(4)));
  EXPECT_EQ(wakes, 2);
}

TEST_F(OutboxTest, AWakeThatCouldNotBeScheduledIsTriedAgain) {
  wake_succeeds = false;  // the connection is closing
  bind();
  ASSERT_TRUE(offerBestEffort(outbox, exchange(1)));
  ASSERT_TRUE(offerBestEffort(outbox, exchange(2)));
  EXPECT_EQ(wakes, 3);
}

TEST_F(OutboxTest, BindingWakesForWhatIsWaitingAndUnbindingStopsWaking) {
  ASSERT_TRUE(offerBestEffort(outbox, exchange(1)));
  EXPECT_EQ(wakes, 0);
  bind();
  EXPECT_EQ(wakes, 1);
  outbox.take(10);
  outbox.unbind();
  ASSERT_TRUE(offerBestEffort(outbox, exchange(2)));
  EXPECT_EQ(wakes, 1);
}

TEST_F(OutboxTest, PutBackGoesInFrontInOrderAsRedeliveries) {
  bind();
  for (Timestamp ts = 1; ts <= 3; ++ts) ASSERT_TRUE(offerBestEffort(outbox, exchange(ts)));
  std::vector<OutboxEntry> sent = outbox.take(2);
  outbox.putBack(std::move(sent));
  std::vector<OutboxEntry> again = outbox.take(10);
  ASSERT_EQ(timestamps(again), (std::vector<Timestamp>{1, 2, 3}));
  EXPECT_EQ(again[0].delivery_count, 1u);
  EXPECT_EQ(again[1].delivery_count, 1u);
  EXPECT_EQ(again[2].delivery_count, 0u);
}

TEST_F(OutboxTest, UnsettledBestEffortEntriesComeBackOnlyWhenKept) {
  bind();
  ASSERT_TRUE(offerBestEffort(outbox, exchange(1)));
  ASSERT_TRUE(offerBestEffort(outbox, exchange(2)));
  outbox.returnUnsettled(outbox.take(1), /*keep=*/true);
  EXPECT_EQ(timestamps(outbox.take(10)), (std::vector<Timestamp>{1, 2}));

  ASSERT_TRUE(offerBestEffort(outbox, exchange(3)));
  outbox.returnUnsettled(outbox.take(1), /*keep=*/false);
  EXPECT_TRUE(outbox.take(10).empty());
}

TEST_F(OutboxTest, AnswersAreNotBoundedByTheCapacity) {
  bind();
  for (Timestamp ts = 1; ts <= 4; ++ts) ASSERT_TRUE(offerBestEffort(outbox, exchange(ts)));
  for (int i = 0; i < 3; ++i) {
    OutboxEntry answer;
    answer.answer.emplace();
    outbox.pushAnswer(std::move(answer));
  }
  EXPECT_EQ(outbox.load(), 7);
  std::vector<OutboxEntry> all = outbox.take(10);
  ASSERT_EQ(all.size(), 7u);
  EXPECT_TRUE(all[6].answer.has_value());
}

TEST_F(OutboxTest, ClosingRefusesOffersAndFailsTheRequestsItHeld) {
  bind();
  std::optional<flows::OutcomeKind> outcome;
  flows::Exchange request = exchange(1);
  request.pattern = flows::Pattern::kInOut;
  request.listener = flows::makeListener(
      [&outcome](const flows::Exchange&, const flows::Outcome& o) { outcome = o.kind; });
  ASSERT_TRUE(offerBestEffort(outbox, request));
  ASSERT_TRUE(offerBestEffort(outbox, exchange(2)));
  outbox.close();
  EXPECT_EQ(outcome, flows::OutcomeKind::kFault);  // at once, not at its timeout
  EXPECT_EQ(outbox.load(), 0);
  EXPECT_EQ(offerBestEffort(outbox, exchange(3)).code(), Status::Code::kUnavailable);
  EXPECT_TRUE(outbox.take(10).empty());
}

TEST_F(OutboxTest, WhatTheListenerPublishesIsInTransitUntilItArrives) {
  bind();
  outbox.dispatched();
  outbox.dispatched();
  EXPECT_EQ(outbox.load(), 2);
  ASSERT_TRUE(offerBestEffort(outbox, exchange(1, kListener)));
  EXPECT_EQ(outbox.load(), 2);                        // one buffered, one still in transit
  ASSERT_TRUE(offerBestEffort(outbox, exchange(2)));  // another publisher's: never in transit
  EXPECT_EQ(outbox.load(), 3);
  ASSERT_TRUE(offerBestEffort(outbox, exchange(3, kListener)));
  EXPECT_EQ(outbox.load(), 3);
  // An arrival that was never counted in (published before this outbox
  // matched) does not make room that is not there.
  ASSERT_TRUE(offerBestEffort(outbox, exchange(4, kListener)));
  EXPECT_EQ(outbox.load(), 4);
}

TEST_F(OutboxTest, ARefusedBestEffortPublishIsNoLongerInTransit) {
  bind();
  for (Timestamp ts = 1; ts <= 4; ++ts) ASSERT_TRUE(offerBestEffort(outbox, exchange(ts)));
  outbox.dispatched();
  EXPECT_EQ(outbox.load(), 5);
  EXPECT_FALSE(offerBestEffort(outbox, exchange(5, kListener)));
  EXPECT_EQ(outbox.load(), 4);  // lost, not coming again
}

// A journaled delivery's acknowledgement goes with its entry, to be given
// when the subscriber settles it (here: when it went away unsettled).
TEST_F(OutboxTest, AJournaledDeliveryTakesItsAcknowledgementWithIt) {
  bind();
  FakeJournal journal(/*previous=*/2);
  flows::DeliveryContext context(nullptr, &journal);
  ASSERT_TRUE(outbox.offer(exchange(1), context));
  EXPECT_TRUE(context.deferred());  // the flow waits for the settlement
  std::vector<OutboxEntry> taken = outbox.take(1);
  ASSERT_EQ(taken.size(), 1u);
  ASSERT_TRUE(taken[0].ack);
  EXPECT_EQ(taken[0].delivery_count, 2u);  // a redelivery
  outbox.returnUnsettled(std::move(taken), /*keep=*/false);
  const auto given = journal.acknowledged();
  ASSERT_EQ(given.size(), 1u);
  EXPECT_EQ(given[0].second.code(), Status::Code::kUnavailable);
}

// Refused, a journaled delivery comes again: it stays in transit, and its
// acknowledgement stays with the flow.
TEST_F(OutboxTest, ARefusedJournaledPublishStaysInTransit) {
  bind();
  for (Timestamp ts = 1; ts <= 4; ++ts) ASSERT_TRUE(offerBestEffort(outbox, exchange(ts)));
  outbox.dispatched();
  FakeJournal journal;
  flows::DeliveryContext context(nullptr, &journal);
  EXPECT_EQ(outbox.offer(exchange(5, kListener), context).code(), Status::Code::kRejected);
  EXPECT_EQ(outbox.load(), 5);
  EXPECT_FALSE(context.deferred());
  EXPECT_EQ(journal.deferred(), 0u);
}

// A delivery that runs inside its publisher's publish wakes the subscriber's
// connection through the publisher's hold; one without a hold, directly.
TEST_F(OutboxTest, TheWakeGoesThroughTheDeliverysWakeHold) {
  bind();
  outbox.take(0);  // the drain the binding asked for ran: an arrival wakes again
  ASSERT_EQ(wakes, 1);
  flows::WakeHold hold;
  flows::DeliveryContext held(&hold);
  ASSERT_TRUE(outbox.offer(exchange(1), held));
  EXPECT_EQ(wakes, 2);
  EXPECT_EQ(last_hold, &hold);
  outbox.take(1);
  ASSERT_TRUE(offerBestEffort(outbox, exchange(2)));
  EXPECT_EQ(wakes, 3);
  EXPECT_EQ(last_hold, nullptr);
}

TEST_F(OutboxTest, BindingForgetsTheInTransitCount) {
  outbox.dispatched();
  EXPECT_EQ(outbox.load(), 1);
  // Unbound, an arrival of ours is not counted out...
  ASSERT_TRUE(offerBestEffort(outbox, exchange(1, kListener)));
  EXPECT_EQ(outbox.load(), 2);
  // ...and binding starts the count afresh.
  bind();
  EXPECT_EQ(outbox.load(), 1);
}

TEST_F(OutboxTest, ASubscriberThatTakesNothingWhileAboveItsLowWaterMarkIsStuck) {
  bind();
  for (Timestamp ts = 1; ts <= 3; ++ts) ASSERT_TRUE(offerBestEffort(outbox, exchange(ts)));
  outbox.dispatched();  // a count it may have got wrong
  const Clock::time_point t0 = Clock::now();
  outbox.watchFrom(t0);
  EXPECT_FALSE(outbox.checkStall(t0 + 999ms, 1s));
  EXPECT_FALSE(outbox.stalled());
  EXPECT_TRUE(outbox.checkStall(t0 + 1s, 1s));
  EXPECT_TRUE(outbox.stalled());
  EXPECT_EQ(outbox.load(), 3);                   // the in-transit count is forgotten
  EXPECT_FALSE(outbox.checkStall(t0 + 5s, 1s));  // counted once
  EXPECT_FALSE(outbox.drainedToLowWater());      // 3 > 2: still stuck
  EXPECT_TRUE(outbox.stalled());
  outbox.take(1);
  EXPECT_TRUE(outbox.drainedToLowWater());  // 2: back at its low-water mark
  EXPECT_FALSE(outbox.stalled());
}

TEST_F(OutboxTest, ProgressRestartsTheStallWatch) {
  bind();
  for (Timestamp ts = 1; ts <= 4; ++ts) ASSERT_TRUE(offerBestEffort(outbox, exchange(ts)));
  const Clock::time_point t0 = Clock::now();
  outbox.watchFrom(t0);
  outbox.take(1);
  ASSERT_TRUE(offerBestEffort(outbox, exchange(5)));
  EXPECT_FALSE(outbox.checkStall(t0 + 900ms, 1s));  // it moved: watched from here
  EXPECT_FALSE(outbox.checkStall(t0 + 1500ms, 1s));
  EXPECT_TRUE(outbox.checkStall(t0 + 1900ms, 1s));
}

TEST_F(OutboxTest, ASubscriberAtItsLowWaterMarkIsNeverStuck) {
  bind();
  ASSERT_TRUE(offerBestEffort(outbox, exchange(1)));
  ASSERT_TRUE(offerBestEffort(outbox, exchange(2)));
  const Clock::time_point t0 = Clock::now();
  outbox.watchFrom(t0);
  EXPECT_FALSE(outbox.checkStall(t0 + 1h, 1s));
  EXPECT_FALSE(outbox.stalled());
}

TEST_F(OutboxTest, CountsThePublishersItFeeds) {
  // Wakers on no work queue: their connections are gone.
  auto gone = [] {
    return std::make_shared<PublisherWake>(std::make_shared<Waker>(nullptr), [] {});
  };
  outbox.setPublishers({gone(), gone()});
  EXPECT_EQ(outbox.publisherCount(), 2u);
  outbox.wakePublishers();  // none waits: nothing is posted, nothing breaks
  outbox.setPublishers({});
  EXPECT_EQ(outbox.publisherCount(), 0u);
}

}  // namespace
}  // namespace cepbus::services::amqp
