#include "router/epoch_reclaimer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace cepbus::router {
namespace {

std::shared_ptr<const void> tracked(std::atomic<int>& freed) {
  return std::shared_ptr<const int>(new int(7), [&freed](const int* p) {
    freed.fetch_add(1);
    delete p;
  });
}

TEST(EpochReclaimerTest, UnreadObjectsAreFreedByReclaim) {
  EpochReclaimer reclaimer;
  std::atomic<int> freed{0};
  reclaimer.retire(tracked(freed));
  EXPECT_EQ(reclaimer.retiredCount(), 1u);
  reclaimer.reclaim();
  EXPECT_EQ(freed.load(), 1);
  EXPECT_EQ(reclaimer.retiredCount(), 0u);
}

TEST(EpochReclaimerTest, AnActiveGuardKeepsRetiredObjectsAlive) {
  EpochReclaimer reclaimer;
  std::atomic<int> freed{0};
  {
    EpochReclaimer::Guard guard = reclaimer.enter();
    reclaimer.retire(tracked(freed));
    reclaimer.reclaim();
    reclaimer.reclaim();
    EXPECT_EQ(freed.load(), 0);
    // A nested guard (a delivery that publishes again) changes nothing.
    EpochReclaimer::Guard nested = reclaimer.enter();
    reclaimer.reclaim();
    EXPECT_EQ(freed.load(), 0);
  }
  reclaimer.reclaim();
  EXPECT_EQ(freed.load(), 1);
}

TEST(EpochReclaimerTest, AGuardEnteredAfterRetireDoesNotDelayIt) {
  EpochReclaimer reclaimer;
  std::atomic<int> freed{0};
  reclaimer.retire(tracked(freed));
  reclaimer.reclaim();  // frees: nobody could see it
  EpochReclaimer::Guard late = reclaimer.enter();
  reclaimer.retire(tracked(freed));
  reclaimer.reclaim();
  EXPECT_EQ(freed.load(), 1);  // the second is protected by `late`
}

TEST(EpochReclaimerTest, TheDestructorFreesEverything) {
  std::atomic<int> freed{0};
  {
    EpochReclaimer reclaimer;
    {
      EpochReclaimer::Guard guard = reclaimer.enter();
      reclaimer.retire(tracked(freed));
    }
  }
  EXPECT_EQ(freed.load(), 1);
}

// Readers dereference whatever they load while a writer keeps replacing and
// retiring it: under ASan a premature free is a use-after-free report, and the
// magic number check catches it without ASan.
TEST(EpochReclaimerTest, ConcurrentReadersNeverSeeFreedObjects) {
  struct Box {
    explicit Box(uint64_t v) : value(v) {}
    ~Box() { magic = 0; }
    uint64_t magic = 0xC0FFEE;
    uint64_t value;
  };
  EpochReclaimer reclaimer;
  std::atomic<Box*> current{new Box(0)};
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bad{0}, reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        EpochReclaimer::Guard guard = reclaimer.enter();
        const Box* box = current.load(std::memory_order_acquire);
        if (box->magic != 0xC0FFEE) bad.fetch_add(1);
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  // Overlap for sure: start writing once the readers read, and keep writing
  // until they have read a good deal.
  while (reads.load() == 0) std::this_thread::yield();
  for (uint64_t i = 1; i <= 20000 || reads.load() < 20000; ++i) {
    Box* old = current.exchange(new Box(i), std::memory_order_acq_rel);
    reclaimer.retire(std::shared_ptr<const Box>(old));
    reclaimer.reclaim();
  }
  stop.store(true);
  for (auto& t : readers) t.join();
  delete current.load();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_GT(reads.load(), 0u);
  reclaimer.reclaim();
  EXPECT_EQ(reclaimer.retiredCount(), 0u);  // no reader left: everything freed
}

}  // namespace
}  // namespace cepbus::router
