#include "flows/source_ends.h"

#include <algorithm>

namespace cepbus::flows {

void SourceEnds::end(uint64_t source) {
  MutexLock lock(mu_);
  const uint64_t at = count_.load(std::memory_order_relaxed);
  ring_[at % kKept] = source;
  // Published after the slot: a reader that sees the count sees the source.
  count_.store(at + 1, std::memory_order_release);
}

SourceEnds::Ends SourceEnds::read(uint64_t from, uint64_t to) const {
  Ends ends;
  MutexLock lock(mu_);
  const uint64_t now = count_.load(std::memory_order_relaxed);
  to = std::min(to, now);
  if (from >= to) return ends;
  // Positions before now - kKept were overwritten.
  const uint64_t oldest = now > kKept ? now - kKept : 0;
  if (from < oldest) {
    ends.lost = std::min(to, oldest) - from;
    from = std::min(to, oldest);
  }
  for (uint64_t at = from; at < to; ++at) ends.sources.push_back(ring_[at % kKept]);
  return ends;
}

SourceEnds& sourceEnds() {
  static SourceEnds log;
  return log;
}

}  // namespace cepbus::flows
