#include "stages/event_queue.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "tests/stages/test_util.h"

namespace cepbus::stages {
namespace {

using testing::makeItem;
using Clock = std::chrono::steady_clock;

std::vector<uint64_t> popTokens(EventQueue& q, size_t max) {
  std::vector<StageItem> out(max);
  const size_t n = q.tryPopBatch(out.data(), out.size());
  std::vector<uint64_t> tokens;
  for (size_t i = 0; i < n; ++i) tokens.push_back(out[i].token);
  return tokens;
}

TEST(CostClassifierTest, MapsCostToClassesCheapestFirst) {
  const CostClassifier c({1, 100});
  EXPECT_EQ(c.classes(), 3u);
  EXPECT_EQ(c.classOf(-5), 0u);
  EXPECT_EQ(c.classOf(0), 0u);
  EXPECT_EQ(c.classOf(1), 1u);
  EXPECT_EQ(c.classOf(99), 1u);
  EXPECT_EQ(c.classOf(100), 2u);
  EXPECT_EQ(c.classOf(1'000'000), 2u);
  EXPECT_EQ(c.classOf(StageItem{}), 0u);
}

TEST(CostClassifierTest, NoThresholdsIsOneClass) {
  const CostClassifier c;
  EXPECT_EQ(c.classes(), 1u);
  EXPECT_EQ(c.classOf(12345), 0u);
}

TEST(CostClassifierTest, RejectsUnorderedThresholds) {
  EXPECT_THROW(CostClassifier({5, 5}), std::invalid_argument);
  EXPECT_THROW(CostClassifier({10, 3}), std::invalid_argument);
}

TEST(EventQueueTest, RejectsZeroCapacity) {
  EXPECT_THROW(EventQueue(0, CostClassifier()), std::invalid_argument);
}

TEST(EventQueueTest, HigherPriorityFirstAndFifoWithinClass) {
  EventQueue q(100, CostClassifier({1, 100}));
  // token, cost
  const std::vector<std::pair<uint64_t, int32_t>> pushes = {{1, 500}, {2, 5},  {3, 0}, {4, 200},
                                                            {5, 7},   {6, -1}, {7, 0}, {8, 150}};
  for (auto [token, cost] : pushes) {
    StageItem item = makeItem(token, cost);
    ASSERT_EQ(q.tryPush(item), PushResult::kOk);
  }
  EXPECT_EQ(q.size(), pushes.size());
  EXPECT_EQ(popTokens(q, 100), (std::vector<uint64_t>{3, 6, 7, 2, 5, 1, 4, 8}));
  EXPECT_EQ(q.size(), 0u);
}

TEST(EventQueueTest, BatchTakesAtMostMaxAndResumesInOrder) {
  EventQueue q(100, CostClassifier({10}));
  for (uint64_t t = 0; t < 6; ++t) {
    StageItem item = makeItem(t, t % 2 == 0 ? 50 : 0);
    ASSERT_EQ(q.tryPush(item), PushResult::kOk);
  }
  EXPECT_EQ(popTokens(q, 2), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(popTokens(q, 2), (std::vector<uint64_t>{5, 0}));
  // A higher-priority item arriving now overtakes the queued low-priority ones.
  StageItem urgent = makeItem(99, 0);
  ASSERT_EQ(q.tryPush(urgent), PushResult::kOk);
  EXPECT_EQ(popTokens(q, 10), (std::vector<uint64_t>{99, 2, 4}));
}

TEST(EventQueueTest, CapacityBoundsAllClassesTogether) {
  EventQueue q(3, CostClassifier({1, 100}));
  for (int32_t cost : {0, 50, 500}) {
    StageItem item = makeItem(static_cast<uint64_t>(cost), cost);
    ASSERT_EQ(q.tryPush(item), PushResult::kOk);
  }
  StageItem extra = makeItem(7, 0);
  EXPECT_EQ(q.tryPush(extra), PushResult::kFull);
  // A refused item is left with the caller, intact.
  ASSERT_NE(extra.event, nullptr);
  EXPECT_EQ(extra.token, 7u);
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(popTokens(q, 1).size(), 1u);
  EXPECT_EQ(q.tryPush(extra), PushResult::kOk);
  EXPECT_EQ(extra.event, nullptr);
}

TEST(EventQueueTest, RingsGrowAndWrapKeepingFifo) {
  EventQueue q(5000, CostClassifier());
  uint64_t next_push = 0;
  uint64_t next_pop = 0;
  // Interleave pushes and pops so the ring wraps several times while growing.
  for (int round = 0; round < 8; ++round) {
    for (int i = 0; i < 600; ++i) {
      StageItem item = makeItem(next_push++);
      ASSERT_EQ(q.tryPush(item), PushResult::kOk);
    }
    for (uint64_t token : popTokens(q, 300)) EXPECT_EQ(token, next_pop++);
  }
  for (uint64_t token : popTokens(q, 5000)) EXPECT_EQ(token, next_pop++);
  EXPECT_EQ(next_pop, next_push);
}

TEST(EventQueueTest, SizeAtMostIsAnUpperBoundRefreshedAtTheWatermark) {
  EventQueue q(100, CostClassifier(), EventQueue::kDefaultSpin, /*watermark=*/10);
  auto push = [&](int n) {
    for (int i = 0; i < n; ++i) {
      StageItem item = makeItem(static_cast<uint64_t>(i));
      ASSERT_EQ(q.tryPush(item), PushResult::kOk);
    }
  };
  push(5);
  EXPECT_EQ(q.sizeAtMost(), 5u);
  EXPECT_EQ(popTokens(q, 5).size(), 5u);
  EXPECT_EQ(q.size(), 0u);
  EXPECT_EQ(q.sizeAtMost(), 5u) << "producers have not looked at the consumers yet";
  push(5);
  EXPECT_EQ(q.size(), 5u);
  EXPECT_EQ(q.sizeAtMost(), 10u);
  push(1);  // the estimate reached the watermark: this push refreshed it
  EXPECT_EQ(q.size(), 6u);
  EXPECT_EQ(q.sizeAtMost(), 6u);
  EXPECT_EQ(q.pushedTotal(), 11u);
  EXPECT_EQ(q.poppedTotal(), 5u);
}

TEST(EventQueueTest, CloseRefusesPushesButDrainsQueuedItems) {
  EventQueue q(10, CostClassifier());
  for (uint64_t t = 0; t < 2; ++t) {
    StageItem item = makeItem(t);
    ASSERT_EQ(q.tryPush(item), PushResult::kOk);
  }
  q.close();
  q.close();  // idempotent
  EXPECT_TRUE(q.closed());
  EXPECT_FALSE(q.drained());
  StageItem late = makeItem(9);
  EXPECT_EQ(q.tryPush(late), PushResult::kClosed);
  EXPECT_EQ(q.pushWait(late, Clock::now() + std::chrono::hours(1)), PushResult::kClosed);
  EXPECT_NE(late.event, nullptr);

  std::vector<StageItem> out(10);
  EXPECT_EQ(q.popBatch(out.data(), out.size(), Clock::now() + std::chrono::hours(1)), 2u);
  EXPECT_TRUE(q.drained());
  // Closed and empty: returns at once despite the far deadline.
  EXPECT_EQ(q.popBatch(out.data(), out.size(), Clock::now() + std::chrono::hours(1)), 0u);
  EXPECT_TRUE(q.closeReason().isOk());
}

TEST(EventQueueTest, AbortHandsBackQueuedItemsWithReason) {
  EventQueue q(10, CostClassifier({1}));
  for (uint64_t t = 0; t < 4; ++t) {
    StageItem item = makeItem(t, t < 2 ? 5 : 0);
    ASSERT_EQ(q.tryPush(item), PushResult::kOk);
  }
  std::vector<StageItem> pending = q.abort(Status::unavailable("shutting down"));
  ASSERT_EQ(pending.size(), 4u);
  EXPECT_EQ(pending[0].token, 2u);
  EXPECT_EQ(pending[3].token, 1u);
  EXPECT_TRUE(q.drained());
  EXPECT_EQ(q.closeReason().code(), Status::Code::kUnavailable);
  EXPECT_EQ(q.closeReason().message(), "shutting down");
  StageItem late = makeItem(9);
  EXPECT_EQ(q.tryPush(late), PushResult::kClosed);
  EXPECT_TRUE(q.abort(Status::internal("again")).empty());
  EXPECT_EQ(q.closeReason().message(), "shutting down");
}

TEST(EventQueueTest, TimedOperationsReturnAtDeadline) {
  EventQueue q(1, CostClassifier(), std::chrono::nanoseconds(0));
  std::vector<StageItem> out(4);
  EXPECT_EQ(q.popBatch(out.data(), out.size(), Clock::now() + std::chrono::milliseconds(1)), 0u);
  EXPECT_FALSE(q.drained());

  StageItem first = makeItem(1);
  ASSERT_EQ(q.tryPush(first), PushResult::kOk);
  StageItem second = makeItem(2);
  EXPECT_EQ(q.pushWait(second, Clock::now() + std::chrono::milliseconds(1)), PushResult::kFull);
  EXPECT_NE(second.event, nullptr);
  EXPECT_FALSE(q.waitBelow(1, Clock::now() + std::chrono::milliseconds(1)));
  EXPECT_TRUE(q.waitBelow(2, Clock::now()));
}

}  // namespace
}  // namespace cepbus::stages
