// RingQueue: first in, first out across the ring's wrap and its growth, and
// a slot handed out again holds the element that left it.

#include "plugins/window/ring_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cepbus::plugins::window {
namespace {

TEST(RingQueueTest, KeepsOrderAcrossWrapAndGrowth) {
  RingQueue<int> queue;
  int made = 0;
  const auto make = [&] {
    ++made;
    return -1;
  };
  int next_in = 0;
  int next_out = 0;
  // Push three, pop two, repeatedly: the ring wraps, then grows while wrapped.
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 3; ++i) queue.pushBack(make) = next_in++;
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(queue.front(), next_out++);
      queue.popFront();
    }
    ASSERT_EQ(queue.size(), static_cast<size_t>(next_in - next_out));
    for (size_t i = 0; i < queue.size(); ++i) ASSERT_EQ(queue[i], next_out + static_cast<int>(i));
    ASSERT_EQ(queue.back(), next_in - 1);
  }
  // 22 elements held at most: the ring grew to 32 slots, each made once.
  EXPECT_EQ(made, 32);
}

TEST(RingQueueTest, ASlotHandedOutAgainHoldsTheElementThatLeftIt) {
  RingQueue<std::vector<std::string>> queue;
  const auto make = [] { return std::vector<std::string>(); };
  queue.pushBack(make).push_back("first");
  queue.pushBack(make).push_back("second");
  queue.popFront();
  queue.popFront();
  EXPECT_TRUE(queue.empty());
  // The caller resets what it reuses; the storage is still there.
  EXPECT_EQ(queue.pushBack(make), std::vector<std::string>{"first"});
  EXPECT_EQ(queue.pushBack(make), std::vector<std::string>{"second"});
}

TEST(RingQueueTest, NextSlotIsWherePushBackGoesUnlessTheRingIsFull) {
  RingQueue<int> queue;
  const auto make = [] { return 0; };
  EXPECT_EQ(queue.nextSlot(), nullptr);  // no slot yet
  queue.pushBack(make) = 1;              // two slots
  const int* next = queue.nextSlot();
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(&queue.pushBack(make), next);
  EXPECT_EQ(queue.nextSlot(), nullptr);  // full: the next push grows the ring
  queue.popFront();
  // Wrapped: the slot the first element left.
  next = queue.nextSlot();
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(&queue.pushBack(make), next);
}

}  // namespace
}  // namespace cepbus::plugins::window
