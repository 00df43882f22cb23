// EventQueue under concurrent producers and consumers.

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "stages/event_queue.h"
#include "tests/stages/test_util.h"

namespace cepbus::stages {
namespace {

using testing::makeItem;
using Clock = std::chrono::steady_clock;
constexpr auto kFar = std::chrono::seconds(30);

TEST(EventQueueThreadedTest, HandoffDeliversEveryItemOnceInOrder) {
  constexpr uint64_t kItems = 50'000;
  EventQueue q(64, CostClassifier());
  std::thread producer([&] {
    for (uint64_t t = 0; t < kItems; ++t) {
      StageItem item = makeItem(t);
      ASSERT_EQ(q.pushWait(item, Clock::now() + kFar), PushResult::kOk);
    }
    q.close();
  });
  std::vector<StageItem> batch(16);
  uint64_t expected = 0;
  for (;;) {
    const size_t n = q.popBatch(batch.data(), batch.size(), Clock::now() + kFar);
    if (n == 0) break;
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(batch[i].token, expected++);
  }
  producer.join();
  EXPECT_TRUE(q.drained());
  EXPECT_EQ(expected, kItems);
}

TEST(EventQueueThreadedTest, ManyProducersAndConsumersLoseAndDuplicateNothing) {
  constexpr uint64_t kPerProducer = 20'000;
  constexpr int kProducers = 3;
  constexpr int kConsumers = 2;
  EventQueue q(128, CostClassifier({1, 100}));
  std::vector<std::atomic<int>> seen(kPerProducer * kProducers);
  std::vector<std::thread> consumers;
  for (int c = 0; c < kConsumers; ++c) {
    consumers.emplace_back([&] {
      std::vector<StageItem> batch(8);
      while (size_t n = q.popBatch(batch.data(), batch.size(), Clock::now() + kFar)) {
        for (size_t i = 0; i < n; ++i) seen[batch[i].token].fetch_add(1);
      }
    });
  }
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (uint64_t i = 0; i < kPerProducer; ++i) {
        const uint64_t token = p * kPerProducer + i;
        StageItem item = makeItem(token, static_cast<int32_t>(token % 3) * 60);
        ASSERT_EQ(q.pushWait(item, Clock::now() + kFar), PushResult::kOk);
      }
    });
  }
  for (auto& t : producers) t.join();
  q.close();
  for (auto& t : consumers) t.join();
  for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i].load(), 1) << "token " << i;
}

TEST(EventQueueThreadedTest, SleepingConsumerIsWokenByPush) {
  EventQueue q(8, CostClassifier(), std::chrono::nanoseconds(0));
  std::atomic<size_t> got{0};
  std::thread consumer([&] {
    std::vector<StageItem> batch(4);
    got = q.popBatch(batch.data(), batch.size(), Clock::now() + kFar);
  });
  // Lets the consumer reach its sleep, the path under test. The queue shows
  // no sleeping consumer to poll for; had it not slept yet, the test passes
  // and only tests less.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  StageItem item = makeItem(1);
  ASSERT_EQ(q.tryPush(item), PushResult::kOk);
  consumer.join();
  EXPECT_EQ(got.load(), 1u);
}

TEST(EventQueueThreadedTest, LockstepHandoffLosesNoWakeup) {
  // Without spinning the consumer goes to sleep before nearly every item, so
  // each item exercises the sleep/wake race; a lost wake-up would leave the
  // consumer asleep until its far deadline and popBatch would return 0.
  constexpr uint64_t kItems = 3000;
  EventQueue q(4, CostClassifier(), std::chrono::nanoseconds(0));
  std::atomic<uint64_t> consumed{0};
  std::thread consumer([&] {
    std::vector<StageItem> batch(4);
    for (uint64_t expected = 0; expected < kItems;) {
      const size_t n = q.popBatch(batch.data(), batch.size(), Clock::now() + kFar);
      ASSERT_GT(n, 0u) << "consumer missed a wake-up after " << expected << " items";
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(batch[i].token, expected++);
      consumed.store(expected);
    }
  });
  for (uint64_t t = 0; t < kItems; ++t) {
    StageItem item = makeItem(t);
    ASSERT_EQ(q.tryPush(item), PushResult::kOk);
    while (consumed.load() <= t) std::this_thread::yield();
  }
  consumer.join();
}

TEST(EventQueueThreadedTest, LockstepSpaceWaitLosesNoWakeup) {
  constexpr uint64_t kItems = 3000;
  EventQueue q(1, CostClassifier(), std::chrono::nanoseconds(0));
  std::thread producer([&] {
    for (uint64_t t = 0; t < kItems; ++t) {
      StageItem item = makeItem(t);
      ASSERT_EQ(q.pushWait(item, Clock::now() + kFar), PushResult::kOk) << t;
    }
  });
  std::vector<StageItem> out(1);
  for (uint64_t expected = 0; expected < kItems; ++expected) {
    ASSERT_EQ(q.popBatch(out.data(), 1, Clock::now() + kFar), 1u) << expected;
    ASSERT_EQ(out[0].token, expected);
  }
  producer.join();
}

TEST(EventQueueThreadedTest, CloseWakesSleepingConsumer) {
  EventQueue q(8, CostClassifier(), std::chrono::nanoseconds(0));
  std::thread consumer([&] {
    std::vector<StageItem> batch(4);
    EXPECT_EQ(q.popBatch(batch.data(), batch.size(), Clock::now() + kFar), 0u);
    EXPECT_TRUE(q.drained());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // as above: to sleep first
  q.close();
  consumer.join();
}

TEST(EventQueueThreadedTest, PushWaitAndWaitBelowWakeWhenSpaceFrees) {
  EventQueue q(2, CostClassifier());
  for (uint64_t t = 0; t < 2; ++t) {
    StageItem item = makeItem(t);
    ASSERT_EQ(q.tryPush(item), PushResult::kOk);
  }
  std::atomic<bool> popped{false};
  std::thread waiter([&] {
    EXPECT_TRUE(q.waitBelow(2, Clock::now() + kFar));
    EXPECT_TRUE(popped.load());
    StageItem item = makeItem(2);
    EXPECT_EQ(q.pushWait(item, Clock::now() + kFar), PushResult::kOk);
  });
  // Time for waitBelow() and pushWait() to return early, were they wrong to:
  // the waiter checks `popped` when they do.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::vector<StageItem> out(1);
  popped = true;
  ASSERT_EQ(q.tryPopBatch(out.data(), 1), 1u);
  waiter.join();
  EXPECT_EQ(q.size(), 2u);
}

}  // namespace
}  // namespace cepbus::stages
