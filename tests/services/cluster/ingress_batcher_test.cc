#include "services/cluster/ingress_batcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "bus/core/event_json.h"

namespace cepbus::services::cluster {
namespace {

using std::chrono::milliseconds;
using Batch = IngressBatcher::Batch;
using Item = IngressBatcher::Item;

const IngressBatcher::TimePoint kT0{};

// An event with its ts as its id, so a batch's events can be told apart.
EventPtr tick(Timestamp ts) {
  return decodeEvent("{\"type\":\"Stock\",\"ts\":" + std::to_string(ts) +
                     ",\"attrs\":{\"price\":1}}")
      .value();
}

Item item(uint32_t partition, Timestamp ts, uint64_t bytes = 10) {
  return Item{partition, tick(ts), bytes};
}

std::vector<Timestamp> tsOf(const Batch& batch) {
  std::vector<Timestamp> ts;
  for (const EventPtr& e : batch.events) ts.push_back(e->ts());
  return ts;
}

IngressBatcher::Limits limits(uint32_t max_events, uint64_t max_bytes, int linger_ms) {
  IngressBatcher::Limits l;
  l.max_events = max_events;
  l.max_bytes = max_bytes;
  l.linger = milliseconds(linger_ms);
  return l;
}

TEST(IngressBatcherTest, ABatchClosesWhenItHoldsMaxEvents) {
  IngressBatcher batcher(2, limits(3, 1000, 5));
  EXPECT_TRUE(batcher.add(1, std::vector{item(0, 1), item(1, 2)}, kT0).empty());
  EXPECT_TRUE(batcher.add(2, std::vector{item(0, 3)}, kT0).empty());
  const std::vector<Batch> closed = batcher.add(3, std::vector{item(0, 4), item(0, 5)}, kT0);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].partition, 0u);
  EXPECT_EQ(tsOf(closed[0]), (std::vector<Timestamp>{1, 3, 4}));
  EXPECT_EQ(closed[0].deliveries, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(closed[0].closed, IngressBatcher::Closed::kFull);
  EXPECT_EQ(closed[0].bytes, 30u);
  // Event 5 opened the partition's next batch; partition 1 still holds event 2.
  EXPECT_EQ(batcher.heldEvents(), 5u);
  const std::vector<Batch> rest = batcher.flush();
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(tsOf(rest[0]), (std::vector<Timestamp>{2}));  // the older batch first
  EXPECT_EQ(tsOf(rest[1]), (std::vector<Timestamp>{5}));
  EXPECT_NE(rest[1].id, closed[0].id);
}

TEST(IngressBatcherTest, ABatchClosesBeforeAnEventWouldTakeItPastMaxBytes) {
  IngressBatcher batcher(1, limits(100, 100, 5));
  EXPECT_TRUE(batcher.add(1, std::vector{item(0, 1, 40), item(0, 2, 40)}, kT0).empty());
  std::vector<Batch> closed = batcher.add(2, std::vector{item(0, 3, 40)}, kT0);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(tsOf(closed[0]), (std::vector<Timestamp>{1, 2}));
  EXPECT_EQ(closed[0].bytes, 80u);
  EXPECT_EQ(closed[0].closed, IngressBatcher::Closed::kBytes);
  // Exactly max-bytes closes the batch at once; a larger event goes alone.
  closed = batcher.add(3, std::vector{item(0, 4, 60)}, kT0);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(tsOf(closed[0]), (std::vector<Timestamp>{3, 4}));
  closed = batcher.add(4, std::vector{item(0, 5, 250)}, kT0);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(tsOf(closed[0]), (std::vector<Timestamp>{5}));
  EXPECT_EQ(closed[0].bytes, 250u);
}

TEST(IngressBatcherTest, ABatchClosesLingerAfterItsFirstEvent) {
  IngressBatcher batcher(2, limits(100, 10000, 5));
  EXPECT_FALSE(batcher.nextDeadline());
  EXPECT_TRUE(batcher.add(1, std::vector{item(0, 1)}, kT0).empty());
  EXPECT_TRUE(batcher.add(2, std::vector{item(1, 2)}, kT0 + milliseconds(2)).empty());
  EXPECT_TRUE(batcher.add(3, std::vector{item(0, 3)}, kT0 + milliseconds(4)).empty());
  ASSERT_TRUE(batcher.nextDeadline());
  EXPECT_EQ(*batcher.nextDeadline(), kT0 + milliseconds(5));  // from the first event, not the last
  EXPECT_TRUE(batcher.expire(kT0 + milliseconds(4)).empty());
  std::vector<Batch> closed = batcher.expire(kT0 + milliseconds(5));
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(tsOf(closed[0]), (std::vector<Timestamp>{1, 3}));
  EXPECT_EQ(closed[0].closed, IngressBatcher::Closed::kLinger);
  EXPECT_EQ(*batcher.nextDeadline(), kT0 + milliseconds(7));
  // A timer that fires late: an add() past the deadline sends the batch too.
  closed = batcher.add(4, std::vector{item(0, 4)}, kT0 + milliseconds(9));
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(tsOf(closed[0]), (std::vector<Timestamp>{2}));
  EXPECT_EQ(*batcher.nextDeadline(), kT0 + milliseconds(14));
}

TEST(IngressBatcherTest, ABatchClosedBySizeLeavesNoDeadlineBehind) {
  IngressBatcher batcher(2, limits(2, 10000, 5));
  EXPECT_TRUE(batcher.add(1, std::vector{item(1, 1)}, kT0 + milliseconds(1)).empty());
  ASSERT_EQ(batcher.add(2, std::vector{item(0, 2), item(0, 3)}, kT0).size(), 1u);
  EXPECT_EQ(*batcher.nextDeadline(), kT0 + milliseconds(6));
  EXPECT_TRUE(batcher.expire(kT0 + milliseconds(5)).empty());
}

TEST(IngressBatcherTest, WithNoLingerEveryDeliveryGoesAtOnce) {
  IngressBatcher batcher(2, limits(100, 10000, 0));
  const std::vector<Batch> closed = batcher.add(1, std::vector{item(0, 1), item(1, 2)}, kT0);
  ASSERT_EQ(closed.size(), 2u);
  EXPECT_FALSE(batcher.nextDeadline());
}

TEST(IngressBatcherTest, ADeliveryIsSettleableOnceEveryBatchHoldingItsEventsIsConfirmed) {
  IngressBatcher batcher(3, limits(2, 10000, 5));
  // Delivery 1 spreads over partitions 0, 1 and 2; delivery 2 shares
  // partition 0's batch with it.
  std::vector<Batch> closed = batcher.add(1, std::vector{item(0, 1), item(1, 2), item(2, 3)}, kT0);
  EXPECT_TRUE(closed.empty());
  closed = batcher.add(2, std::vector{item(0, 4)}, kT0);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].deliveries, (std::vector<uint64_t>{1, 2}));
  std::vector<Batch> rest = batcher.flush();
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(batcher.pendingDeliveries(), 2u);

  EXPECT_EQ(batcher.confirmed(closed[0].id), (std::vector<uint64_t>{2}));
  EXPECT_TRUE(batcher.confirmed(rest[1].id).empty());
  EXPECT_EQ(batcher.confirmed(rest[0].id), (std::vector<uint64_t>{1}));
  EXPECT_EQ(batcher.pendingDeliveries(), 0u);
  EXPECT_EQ(batcher.heldEvents(), 0u);
  EXPECT_EQ(batcher.heldBytes(), 0u);
  // An answer heard twice (a resend after a failover) changes nothing.
  EXPECT_TRUE(batcher.confirmed(rest[0].id).empty());
  EXPECT_EQ(batcher.heldEvents(), 0u);
}

TEST(IngressBatcherTest, ADeliveryWithEventsInTwoBatchesOfOnePartitionWaitsForBoth) {
  IngressBatcher batcher(1, limits(2, 10000, 5));
  const std::vector<Batch> closed =
      batcher.add(7, std::vector{item(0, 1), item(0, 2), item(0, 3)}, kT0);
  ASSERT_EQ(closed.size(), 1u);
  const std::vector<Batch> rest = batcher.flush();
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_TRUE(batcher.confirmed(closed[0].id).empty());
  EXPECT_EQ(batcher.confirmed(rest[0].id), (std::vector<uint64_t>{7}));
}

TEST(IngressBatcherTest, ARefusedBatchRefusesItsDeliveriesWhateverTheirOtherBatchesBecome) {
  IngressBatcher batcher(2, limits(10, 10000, 5));
  EXPECT_TRUE(batcher.add(1, std::vector{item(0, 1), item(1, 2)}, kT0).empty());
  EXPECT_TRUE(batcher.add(2, std::vector{item(1, 3)}, kT0).empty());
  const std::vector<Batch> closed = batcher.flush();
  ASSERT_EQ(closed.size(), 2u);
  EXPECT_EQ(batcher.refused(closed[0].id), (std::vector<uint64_t>{1}));
  // Delivery 1's other batch is accepted: only delivery 2 becomes settleable.
  EXPECT_EQ(batcher.confirmed(closed[1].id), (std::vector<uint64_t>{2}));
  EXPECT_EQ(batcher.pendingDeliveries(), 0u);
  EXPECT_EQ(batcher.heldEvents(), 0u);
}

TEST(IngressBatcherTest, ARefusalWhileADeliveryStillHasAnOpenBatchRefusesItOnce) {
  IngressBatcher two(2, limits(2, 10000, 5));
  // Partition 0's batch fills and closes; partition 1's stays open.
  std::vector<Batch> closed = two.add(1, std::vector{item(0, 1), item(0, 2), item(1, 3)}, kT0);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(two.refused(closed[0].id), (std::vector<uint64_t>{1}));
  closed = two.flush();
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_TRUE(two.confirmed(closed[0].id).empty());
  EXPECT_TRUE(two.refused(closed[0].id).empty());
  EXPECT_EQ(two.heldEvents(), 0u);
}

TEST(IngressBatcherTest, HoldingItsBoundStopsCreditUntilTheBrokerAnswers) {
  IngressBatcher::Limits l = limits(2, 10000, 5);
  l.max_held_events = 3;
  l.max_held_bytes = 1000;
  IngressBatcher batcher(1, l);
  std::vector<Batch> closed = batcher.add(1, std::vector{item(0, 1), item(0, 2)}, kT0);
  EXPECT_FALSE(batcher.full());
  // Taken beyond the bound: what a producer sent on its credit is never refused.
  std::vector<Batch> more = batcher.add(2, std::vector{item(0, 3), item(0, 4), item(0, 5)}, kT0);
  EXPECT_TRUE(batcher.full());
  EXPECT_EQ(batcher.heldEvents(), 5u);
  ASSERT_EQ(more.size(), 1u);
  batcher.confirmed(closed[0].id);
  EXPECT_TRUE(batcher.full());  // still 3 held, the bound
  batcher.confirmed(more[0].id);
  EXPECT_FALSE(batcher.full());
  EXPECT_EQ(batcher.heldEvents(), 1u);
  // Bytes bound as well.
  IngressBatcher bytes(1, l);
  bytes.add(3, std::vector{item(0, 6, 1000)}, kT0);
  EXPECT_TRUE(bytes.full());
}

}  // namespace
}  // namespace cepbus::services::cluster
