#include "flows/source_ends.h"

#include <algorithm>
#include <vector>

namespace cepbus::flows {

void SourceEnds::end(uint64_t source) {
  MutexLock lock(mu_);
  const uint64_t at = count_.load(std::memory_order_relaxed);
  ring_[at % kKept] = source;
  // Published after the slot: a reader that sees the count sees the source.
  count_.store(at + 1, std::memory_order_release);
}

uint64_t SourceEnds::read(uint64_t from, uint64_t to,
                          const std::function<void(uint64_t)>& fn) const {
  std::vector<uint64_t> ended;
  uint64_t lost = 0;
  {
    MutexLock lock(mu_);
    const uint64_t now = count_.load(std::memory_order_relaxed);
    to = std::min(to, now);
    if (from >= to) return 0;
    // Positions before now - kKept were overwritten.
    const uint64_t oldest = now > kKept ? now - kKept : 0;
    if (from < oldest) {
      lost = std::min(to, oldest) - from;
      from = std::min(to, oldest);
    }
    for (uint64_t at = from; at < to; ++at) ended.push_back(ring_[at % kKept]);
  }
  // Called without the lock: fn may take the reader's own locks.
  for (const uint64_t source : ended) fn(source);
  return lost;
}

SourceEnds& sourceEnds() {
  static SourceEnds log;
  return log;
}

}  // namespace cepbus::flows
