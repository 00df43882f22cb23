#include "stages/resource_controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "tests/testing/wait.h"

namespace cepbus::stages {
namespace {

using cepbus::testing::eventually;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

ResourceConfig config() {
  ResourceConfig c;
  c.period = milliseconds(50);
  c.target_latency = milliseconds(10);
  c.idle_utilization = 0.2;
  return c;
}

ResourceSample periodSample(size_t threads, size_t queue, uint64_t completed, milliseconds busy,
                            bool downstream_saturated = false) {
  ResourceSample s;
  s.threads = threads;
  s.queue_length = queue;
  s.completed = completed;
  s.busy = busy;
  s.elapsed = milliseconds(50);
  s.downstream_saturated = downstream_saturated;
  return s;
}

TEST(DecideThreadsTest, ClampsIntoRange) {
  EXPECT_EQ(decideThreads(config(), 2, 4, periodSample(0, 0, 0, milliseconds(0))), 2u);
  EXPECT_EQ(decideThreads(config(), 2, 4, periodSample(9, 1000, 10, milliseconds(50))), 4u);
}

TEST(DecideThreadsTest, GrowsWhenQueueTakesLongerThanTargetToDrain) {
  // 100 items in 50 ms of busy time: 0.5 ms each; 1000 queued on one thread is 500 ms.
  EXPECT_EQ(decideThreads(config(), 1, 4, periodSample(1, 1000, 100, milliseconds(50))), 2u);
  EXPECT_EQ(decideThreads(config(), 1, 4, periodSample(3, 1000, 300, milliseconds(150))), 4u);
  EXPECT_EQ(decideThreads(config(), 1, 4, periodSample(4, 1000, 400, milliseconds(200))), 4u);
}

TEST(DecideThreadsTest, HoldsWhenQueueDrainsWithinTarget) {
  // 10 queued at 0.5 ms each on two threads: 2.5 ms < 10 ms.
  EXPECT_EQ(decideThreads(config(), 1, 4, periodSample(2, 10, 200, milliseconds(100))), 2u);
  // 30 queued on one thread: 15 ms > 10 ms.
  EXPECT_EQ(decideThreads(config(), 1, 4, periodSample(1, 30, 100, milliseconds(50))), 2u);
}

TEST(DecideThreadsTest, GrowsWhenBusyThreadsFinishNothing) {
  EXPECT_EQ(decideThreads(config(), 1, 4, periodSample(2, 5, 0, milliseconds(90))), 3u);
  // Idle threads with a queue (e.g. paused by backpressure) are not a reason to grow.
  EXPECT_EQ(decideThreads(config(), 1, 4, periodSample(2, 5, 0, milliseconds(0))), 2u);
}

TEST(DecideThreadsTest, DoesNotGrowBehindSaturatedDownstream) {
  EXPECT_EQ(decideThreads(config(), 1, 4, periodSample(1, 1000, 100, milliseconds(50), true)), 1u);
}

TEST(DecideThreadsTest, ShrinksWhenIdleButNotBelowMin) {
  EXPECT_EQ(decideThreads(config(), 1, 4, periodSample(3, 0, 10, milliseconds(5))), 2u);
  EXPECT_EQ(decideThreads(config(), 2, 4, periodSample(2, 0, 0, milliseconds(0))), 2u);
  // Busy threads with an empty queue are keeping up, not idle.
  EXPECT_EQ(decideThreads(config(), 1, 4, periodSample(3, 0, 1000, milliseconds(120))), 3u);
}

TEST(ResourceControllerTest, TurnsCumulativeCountersIntoPeriods) {
  ResourceController rc(config(), 1, 4);
  const std::chrono::steady_clock::time_point t0{};
  EXPECT_EQ(rc.update(t0, 1, 1000, 0, 0, false), 1u) << "first call only primes";
  const uint64_t busy = nanoseconds(milliseconds(50)).count();
  EXPECT_EQ(rc.update(t0 + milliseconds(50), 1, 1000, 100, busy, false), 2u);
  // Same totals again: nothing completed, no busy time, empty queue -> idle.
  EXPECT_EQ(rc.update(t0 + milliseconds(100), 2, 0, 100, busy, false), 1u);
}

TEST(ResourceControllerTest, RejectsBadConfig) {
  EXPECT_THROW(ResourceController(config(), 0, 1), std::invalid_argument);
  EXPECT_THROW(ResourceController(config(), 3, 2), std::invalid_argument);
  ResourceConfig c = config();
  c.period = milliseconds(0);
  EXPECT_THROW(ResourceController(c, 1, 1), std::invalid_argument);
}

TEST(PeriodicTaskTest, TicksUntilStopped) {
  std::atomic<int> ticks{0};
  PeriodicTask task(milliseconds(1), [&](auto) {
    ticks.fetch_add(1);
    return true;
  });
  task.start();
  EXPECT_TRUE(eventually("three ticks", [&] { return ticks.load() >= 3; }));
  task.stop();
  const int after_stop = ticks.load();
  // Time for ten 1 ms ticks, had stop() not ended them: nothing to wait for.
  std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(ticks.load(), after_stop);
  task.stop();                                    // idempotent
  task.start();                                   // no restart after stop
  std::this_thread::sleep_for(milliseconds(10));  // as above, had start() restarted it
  EXPECT_EQ(ticks.load(), after_stop);
}

// A tick that returns false puts the task to sleep until wake(): no more
// ticks, not even slow ones; wake() brings them back; stop() ends a dormancy.
TEST(PeriodicTaskTest, SleepsAfterAQuietTickUntilWoken) {
  std::atomic<int> ticks{0};
  std::atomic<bool> quiet{true};
  PeriodicTask task(milliseconds(1), [&](auto) {
    ticks.fetch_add(1);
    return !quiet.load();
  });
  task.wake();  // not dormant: nothing happens
  task.start();
  ASSERT_TRUE(eventually("the task to sleep", [&] { return task.dormant(); }));
  const int dormant_at = ticks.load();
  // Time for thirty 1 ms ticks, had the quiet tick not put it to sleep.
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_EQ(ticks.load(), dormant_at);
  quiet = false;
  task.wake();
  EXPECT_FALSE(task.dormant());
  EXPECT_TRUE(
      eventually("three ticks after wake()", [&] { return ticks.load() >= dormant_at + 3; }));
  quiet = true;
  ASSERT_TRUE(eventually("the task to sleep", [&] { return task.dormant(); }));
  task.stop();  // returns although the task sleeps without a deadline
}

}  // namespace
}  // namespace cepbus::stages
