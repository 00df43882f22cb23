#include "stages/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "tests/testing/wait.h"

namespace cepbus::stages {
namespace {

using cepbus::testing::eventually;

// A body that idles until told to stop, checking for retirement only once
// `may_retire` is set, so that tests control when retirements are claimed.
struct Harness {
  std::atomic<int> entered{0};
  std::atomic<int> retired{0};
  std::atomic<bool> may_retire{true};
  std::atomic<bool> stop{false};
  ThreadPool pool{"pool-test", [this] { body(); }};

  void body() {
    entered.fetch_add(1);
    while (!stop.load()) {
      if (may_retire.load() && pool.shouldRetire()) {
        retired.fetch_add(1);
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // a worker's idle beat
    }
  }
};

TEST(ThreadPoolTest, GrowsAndShrinks) {
  Harness h;
  h.pool.resize(3);
  EXPECT_EQ(h.pool.threads(), 3u);
  ASSERT_TRUE(eventually("three workers", [&] { return h.entered.load() == 3; }));
  h.pool.resize(1);
  EXPECT_EQ(h.pool.threads(), 1u);
  ASSERT_TRUE(eventually("two retirements", [&] { return h.retired.load() == 2; }));
  h.pool.resize(2);
  ASSERT_TRUE(eventually("a fourth worker", [&] { return h.entered.load() == 4; }));
  EXPECT_EQ(h.pool.threads(), 2u);
  h.stop = true;
  h.pool.join();
  EXPECT_EQ(h.pool.threads(), 0u);
  EXPECT_EQ(h.retired.load(), 2);
}

TEST(ThreadPoolTest, GrowingCancelsUnclaimedRetirementsBeforeSpawning) {
  Harness h;
  h.may_retire = false;
  h.pool.resize(3);
  ASSERT_TRUE(eventually("three workers", [&] { return h.entered.load() == 3; }));
  h.pool.resize(1);
  EXPECT_EQ(h.pool.threads(), 1u);
  h.pool.resize(3);
  EXPECT_EQ(h.pool.threads(), 3u);
  h.may_retire = true;
  // Time for the workers to claim a retirement or a fourth to start, had
  // growing left one behind: what must not happen has no event to wait for.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(h.entered.load(), 3) << "no thread was spawned";
  EXPECT_EQ(h.retired.load(), 0) << "no retirement was left to claim";
  h.stop = true;
  h.pool.join();
}

}  // namespace
}  // namespace cepbus::stages
