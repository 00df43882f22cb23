#include "services/amqp/listener/work_coalescer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "flows/wake_hold.h"

namespace cepbus::services::amqp {
namespace {

// What a connection's work queue does with posts: keeps them, in order, until
// its thread runs them.
class Target {
 public:
  bool post(WorkCoalescer::Work job) {
    std::lock_guard lock(mu_);
    if (refusing_) return false;
    jobs_.push_back(std::move(job));
    cv_.notify_one();
    return true;
  }
  void refuse() {
    std::lock_guard lock(mu_);
    refusing_ = true;
  }
  // Runs what was posted so far; how many posts that was.
  size_t runPosted() {
    std::deque<WorkCoalescer::Work> jobs;
    {
      std::lock_guard lock(mu_);
      jobs.swap(jobs_);
    }
    for (auto& job : jobs) job();
    return jobs.size();
  }
  // The connection's thread: runs posts one at a time until `done` says stop.
  void serve(const std::function<bool()>& done) {
    while (true) {
      WorkCoalescer::Work job;
      {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(1), [this] { return !jobs_.empty(); });
        if (jobs_.empty()) {
          if (done()) return;
          continue;
        }
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<WorkCoalescer::Work> jobs_;
  bool refusing_ = false;
};

struct WorkCoalescerTest : ::testing::Test {
  Target target;
  WorkCoalescer work{[this](WorkCoalescer::Work job) { return target.post(std::move(job)); }};
};

TEST_F(WorkCoalescerTest, WorkAddedBeforeTheWakeRanRidesAlongWithIt) {
  std::vector<int> ran;
  EXPECT_TRUE(work.add([&ran] { ran.push_back(1); }));
  EXPECT_TRUE(work.add([&ran] { ran.push_back(2); }));
  EXPECT_TRUE(work.add([&ran] { ran.push_back(3); }));
  EXPECT_EQ(work.wakes(), 1u);
  EXPECT_EQ(target.runPosted(), 1u);
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3}));
}

TEST_F(WorkCoalescerTest, WorkAddedOnceTheWakeTookTheQueueWakesAgain) {
  std::vector<int> ran;
  // Added by the running batch itself: after the take, so it needs a wake of its own.
  EXPECT_TRUE(work.add([&] {
    ran.push_back(1);
    EXPECT_TRUE(work.add([&ran] { ran.push_back(2); }));
  }));
  EXPECT_EQ(target.runPosted(), 1u);
  EXPECT_EQ(ran, (std::vector<int>{1}));
  EXPECT_EQ(work.wakes(), 2u);
  EXPECT_EQ(target.runPosted(), 1u);
  EXPECT_EQ(ran, (std::vector<int>{1, 2}));
  EXPECT_EQ(target.runPosted(), 0u);  // nothing left on its way
}

TEST_F(WorkCoalescerTest, ARefusedPostLosesOnlyTheWorkThatAskedForIt) {
  target.refuse();
  bool ran = false;
  EXPECT_FALSE(work.add([&ran] { ran = true; }));
  EXPECT_FALSE(work.add([&ran] { ran = true; }));  // not counted as on its way
  EXPECT_EQ(work.wakes(), 0u);
  EXPECT_EQ(target.runPosted(), 0u);
  EXPECT_FALSE(ran);
}

TEST_F(WorkCoalescerTest, ClosedItTakesNothingButRunsWhatWasQueued) {
  int ran = 0;
  EXPECT_TRUE(work.add([&ran] { ++ran; }));
  work.close();
  EXPECT_FALSE(work.add([&ran] { ++ran; }));
  target.runPosted();
  EXPECT_EQ(ran, 1);
}

TEST_F(WorkCoalescerTest, AWakeOutlivesItsCoalescer) {
  int ran = 0;
  {
    WorkCoalescer gone{[this](WorkCoalescer::Work job) { return target.post(std::move(job)); }};
    EXPECT_TRUE(gone.add([&ran] { ++ran; }));
  }
  target.runPosted();
  EXPECT_EQ(ran, 1);
}

TEST_F(WorkCoalescerTest, UnderAHoldTheFirstWakeOfABurstGoesAtOnceTheRestAtItsEnd) {
  flows::WakeHold hold;
  std::vector<int> ran;
  EXPECT_TRUE(work.add([&ran] { ran.push_back(1); }, &hold));
  EXPECT_EQ(work.wakes(), 1u);  // at once: the target starts while the burst is read
  EXPECT_FALSE(hold.holding());
  EXPECT_EQ(target.runPosted(), 1u);
  for (int i = 2; i <= 4; ++i) EXPECT_TRUE(work.add([&ran, i] { ran.push_back(i); }, &hold));
  EXPECT_TRUE(hold.holding());
  EXPECT_EQ(target.runPosted(), 0u);  // held: one wake for the rest of the burst
  EXPECT_EQ(ran, (std::vector<int>{1}));
  hold.flush();
  EXPECT_FALSE(hold.holding());
  EXPECT_EQ(work.wakes(), 2u);
  EXPECT_EQ(target.runPosted(), 1u);
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3, 4}));
  // A new burst: at once again.
  EXPECT_TRUE(work.add([&ran] { ran.push_back(5); }, &hold));
  EXPECT_EQ(work.wakes(), 3u);
  EXPECT_EQ(target.runPosted(), 1u);
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3, 4, 5}));
}

TEST_F(WorkCoalescerTest, WorkAddedWithoutTheHoldIsNotHeld) {
  flows::WakeHold hold;
  EXPECT_TRUE(work.add([] {}, &hold));  // this burst's first: at once
  target.runPosted();
  EXPECT_TRUE(work.add([] {}));  // the same burst, but not through its hold
  target.runPosted();
  EXPECT_FALSE(hold.holding());
  EXPECT_EQ(work.wakes(), 2u);
}

TEST_F(WorkCoalescerTest, AHeldWakeTheTargetRefusesLosesItsWorkAndHoldsNothingBack) {
  flows::WakeHold hold;
  int ran = 0;
  EXPECT_TRUE(work.add([&ran] { ++ran; }, &hold));
  target.runPosted();
  EXPECT_TRUE(work.add([&ran] { ++ran; }, &hold));
  target.refuse();
  hold.flush();
  EXPECT_EQ(target.runPosted(), 0u);
  EXPECT_EQ(ran, 1);
  EXPECT_FALSE(work.add([&ran] { ++ran; }));  // not counted as on its way
}

TEST_F(WorkCoalescerTest, AHeldWakeOutlivesItsCoalescer) {
  flows::WakeHold hold;
  int ran = 0;
  {
    WorkCoalescer gone{[this](WorkCoalescer::Work job) { return target.post(std::move(job)); }};
    EXPECT_TRUE(gone.add([&ran] { ++ran; }, &hold));
    target.runPosted();
    EXPECT_TRUE(gone.add([&ran] { ++ran; }, &hold));
  }
  hold.flush();
  target.runPosted();
  EXPECT_EQ(ran, 2);
}

// Many producers, one consumer thread: every item runs exactly once, each
// producer's in its order, and no item costs more than one wake.
TEST_F(WorkCoalescerTest, ManyProducersOneConsumerRunEverythingOnceInOrder) {
  constexpr int kProducers = 4;
  constexpr int kItems = 20000;
  std::vector<std::vector<int>> seen(kProducers);  // the consumer's alone
  std::atomic<int> producing{kProducers};
  std::thread consumer([&] { target.serve([&] { return producing.load() == 0; }); });
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      // Half of them read bursts of 10 under a hold of their own.
      flows::WakeHold hold;
      for (int i = 0; i < kItems; ++i) {
        ASSERT_TRUE(
            work.add([&seen, p, i] { seen[p].push_back(i); }, p % 2 == 0 ? &hold : nullptr));
        if (i % 10 == 9) hold.flush();
      }
      hold.flush();
      producing.fetch_sub(1);
    });
  }
  for (auto& t : producers) t.join();
  consumer.join();
  target.runPosted();  // a wake posted as the consumer stopped looking
  for (int p = 0; p < kProducers; ++p) {
    ASSERT_EQ(seen[p].size(), static_cast<size_t>(kItems)) << "producer " << p;
    for (int i = 0; i < kItems; ++i) ASSERT_EQ(seen[p][i], i) << "producer " << p;
  }
  EXPECT_GE(work.wakes(), 1u);
  EXPECT_LE(work.wakes(), static_cast<uint64_t>(kProducers) * kItems);
  std::printf("%d items, %llu wakes\n", kProducers * kItems,
              static_cast<unsigned long long>(work.wakes()));
}

}  // namespace
}  // namespace cepbus::services::amqp
