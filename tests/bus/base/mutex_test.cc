#include "bus/base/mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace cepbus {
namespace {

// A counter in the form the tree's classes take: the guarded state, the
// mutex, and the annotations the thread-safety build checks.
class Counter {
 public:
  void add() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ++value_;
    changed_.notify_all();
  }
  // True when the value reached `n` before `timeout`.
  bool waitFor(int n, std::chrono::milliseconds timeout) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return changed_.waitFor(mu_, timeout, [&]() REQUIRES(mu_) { return value_ >= n; });
  }
  int value() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return value_;
  }

 private:
  Mutex mu_;
  CondVar changed_;
  int value_ GUARDED_BY(mu_) = 0;
};

TEST(MutexTest, IncrementsFromManyThreadsAreNotLost) {
  Counter counter;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&counter] {
      for (int i = 0; i < 10000; ++i) counter.add();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter.value(), 40000);
}

TEST(MutexTest, AWaiterWakesWhenTheConditionHolds) {
  Counter counter;
  std::thread adder([&counter] {
    for (int i = 0; i < 3; ++i) counter.add();
  });
  EXPECT_TRUE(counter.waitFor(3, std::chrono::seconds(30)));
  adder.join();
}

TEST(MutexTest, AWaitGivesUpAtItsTimeoutWithTheMutexHeldAgain) {
  Counter counter;
  EXPECT_FALSE(counter.waitFor(1, std::chrono::milliseconds(20)));
  counter.add();  // the mutex was released by the timed-out wait's lock
  EXPECT_EQ(counter.value(), 1);
}

TEST(MutexTest, AnUnlockedScopeLetsAnotherThreadIn) {
  Mutex mu;
  MutexLock lock(mu);
  lock.unlock();
  std::thread other([&mu] {
    MutexLock inner(mu);  // would deadlock if unlock() had not released it
  });
  other.join();
  lock.lock();
  EXPECT_FALSE(mu.try_lock());  // held again by `lock`
}

// A counter its readers read together and its writers change one at a time.
class SharedCounter {
 public:
  void add() EXCLUDES(mu_) {
    WriterMutexLock lock(mu_);
    ++value_;
  }
  int value() EXCLUDES(mu_) {
    ReaderMutexLock lock(mu_);
    return value_;
  }

 private:
  SharedMutex mu_;
  int value_ GUARDED_BY(mu_) = 0;
};

TEST(SharedMutexTest, WritesFromManyThreadsAreNotLost) {
  SharedCounter counter;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&counter] {
      for (int i = 0; i < 10000; ++i) {
        counter.add();
        (void)counter.value();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(counter.value(), 40000);
}

TEST(SharedMutexTest, ReadersHoldItTogether) {
  SharedMutex mu;
  ReaderMutexLock lock(mu);
  std::thread other([&mu] {
    ReaderMutexLock inner(mu);  // would deadlock if a reader held it alone
  });
  other.join();
}

TEST(SharedMutexTest, AReaderKeepsTheWriterOut) {
  SharedMutex mu;
  bool writer_got_in = false;
  {
    ReaderMutexLock lock(mu);
    std::thread writer([&] {
      if (mu.try_lock()) {
        writer_got_in = true;
        mu.unlock();
      }
    });
    writer.join();
  }
  EXPECT_FALSE(writer_got_in);
  const bool released = mu.try_lock();  // the reader's scope ended
  if (released) mu.unlock();
  EXPECT_TRUE(released);
}

}  // namespace
}  // namespace cepbus
