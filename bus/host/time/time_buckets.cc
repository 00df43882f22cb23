#include "bus/host/time/time_buckets.h"

#include <algorithm>
#include <bit>

namespace cepbus::plugin {
namespace {

// A ring no smaller than one word of the bitmap, no larger than the cap, and
// large enough that each timestamp of the span, and the one before it (the
// last released), has a bucket of its own when it can.
uint64_t ringSize(Timestamp span) {
  const uint64_t wanted = std::bit_ceil(static_cast<uint64_t>(span) + 2);
  return std::clamp<uint64_t>(wanted, 64, TimeBuckets::kMaxBuckets);
}

// The last timestamp released and the span + 1 after it must fall in
// distinct slots: ceil((span + 1) / width) + 1 <= ring buckets.
Timestamp bucketWidth(Timestamp span, uint64_t ring) {
  const uint64_t buckets = ring - 1;
  return static_cast<Timestamp>(
      std::max<uint64_t>(1, (static_cast<uint64_t>(span) + 1 + buckets - 1) / buckets));
}

}  // namespace

TimeBuckets::TimeBuckets(Timestamp span)
    : width_(bucketWidth(span, ringSize(span))),
      mask_(ringSize(span) - 1),
      first_(ringSize(span)),
      more_(ringSize(span)),
      occupied_(ringSize(span) / 64, 0),
      crowded_(ringSize(span) / 64, 0) {}

void TimeBuckets::pushCrowded(size_t slot, EventPtr event) {
  more_[slot].push_back(std::move(event));
  crowded_[slot >> 6] |= uint64_t{1} << (slot & 63);
}

int64_t TimeBuckets::nextOccupied(int64_t from, int64_t to) const {
  int64_t b = from;
  while (b <= to) {
    const size_t slot = slotOf(b);
    const uint64_t word = occupied_[slot >> 6] >> (slot & 63);
    if (word & 1) return b;
    // To the next occupied slot of this word, or past the word.
    b += word == 0 ? static_cast<int64_t>(64 - (slot & 63)) : std::countr_zero(word);
  }
  return to + 1;
}

void TimeBuckets::release(int64_t bucket, Timestamp upto, std::vector<EventPtr>& out) {
  const size_t slot = slotOf(bucket);
  const uint64_t bit = uint64_t{1} << (slot & 63);
  const bool crowded = (crowded_[slot >> 6] & bit) != 0;
  if (width_ == 1 || (!crowded && first_[slot]->ts() <= upto)) {
    // Every event of the bucket is at most `upto` (width 1: it has one ts).
    out.push_back(std::move(first_[slot]));
    --held_;
    if (crowded) {
      std::vector<EventPtr>& more = more_[slot];
      for (EventPtr& event : more) out.push_back(std::move(event));
      held_ -= more.size();
      more.clear();
      crowded_[slot >> 6] &= ~bit;
    }
    occupied_[slot >> 6] &= ~bit;
    return;
  }
  // Stable: equal timestamps keep their arrival order.
  sorting_.clear();
  sorting_.push_back(std::move(first_[slot]));
  for (EventPtr& event : more_[slot]) sorting_.push_back(std::move(event));
  more_[slot].clear();
  auto byTs = [](const EventPtr& x, const EventPtr& y) { return x->ts() < y->ts(); };
  if (!std::is_sorted(sorting_.begin(), sorting_.end(), byTs)) {
    std::stable_sort(sorting_.begin(), sorting_.end(), byTs);
  }
  const auto kept = std::partition_point(sorting_.begin(), sorting_.end(),
                                         [upto](const EventPtr& e) { return e->ts() <= upto; });
  for (auto it = sorting_.begin(); it != kept; ++it) out.push_back(std::move(*it));
  held_ -= static_cast<size_t>(kept - sorting_.begin());
  crowded_[slot >> 6] &= ~bit;
  if (kept == sorting_.end()) {
    occupied_[slot >> 6] &= ~bit;
    return;
  }
  first_[slot] = std::move(*kept);
  for (auto it = kept + 1; it != sorting_.end(); ++it) more_[slot].push_back(std::move(*it));
  if (!more_[slot].empty()) crowded_[slot >> 6] |= bit;
}

void TimeBuckets::releaseUpTo(Timestamp upto, std::vector<EventPtr>& out) {
  const int64_t last = bucketOf(upto);
  if (held_ == 0 || last < low_) return;
  for (int64_t b = nextOccupied(low_, last); b <= last; b = nextOccupied(b + 1, last)) {
    release(b, upto, out);
  }
  // A wider bucket keeps its events after `upto`; the ring's size makes
  // sure that its slot holds no other bucket's.
  const size_t slot = slotOf(last);
  low_ = (occupied_[slot >> 6] >> (slot & 63) & 1) != 0 ? last : last + 1;
}

void TimeBuckets::releaseAll(std::vector<EventPtr>& out) {
  for (int64_t b = low_; held_ > 0; ++b) {
    b = nextOccupied(b, INT64_MAX - 1);
    release(b, INT64_MAX, out);
  }
}

}  // namespace cepbus::plugin
