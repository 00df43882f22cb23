#include "router/epoch_reclaimer.h"

#include <utility>

namespace cepbus::router {

EpochReclaimer::Guard EpochReclaimer::enter() {
  while (true) {
    const uint64_t epoch = epoch_.load(std::memory_order_seq_cst);
    std::atomic<int64_t>& counter = counters_[epoch & 1].readers;
    counter.fetch_add(1, std::memory_order_seq_cst);
    // Counted under the epoch we read: the writer's check of this counter
    // cannot miss us unless the epoch already moved, which we detect here.
    if (epoch_.load(std::memory_order_seq_cst) == epoch) return Guard(&counter);
    counter.fetch_sub(1, std::memory_order_release);
  }
}

void EpochReclaimer::retire(std::shared_ptr<const void> object) {
  bags_[epoch_.load(std::memory_order_relaxed) & 1].push_back(std::move(object));
}

void EpochReclaimer::reclaim() {
  for (int round = 0; round < 2; ++round) {
    const uint64_t epoch = epoch_.load(std::memory_order_relaxed);
    const size_t previous = (epoch + 1) & 1;  // the parity of epoch - 1
    if (counters_[previous].readers.load(std::memory_order_seq_cst) != 0) return;
    if (bags_[previous].empty() && bags_[epoch & 1].empty()) return;
    bags_[previous].clear();
    epoch_.store(epoch + 1, std::memory_order_seq_cst);
  }
}

}  // namespace cepbus::router
