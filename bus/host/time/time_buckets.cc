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
      ring_(ringSize(span)),
      occupied_(ringSize(span) / 64, 0) {}

int64_t TimeBuckets::bucketOf(Timestamp ts) const {
  if (width_ == 1) return ts;
  int64_t q = ts / width_;
  if (ts % width_ != 0 && ts < 0) --q;
  return q;
}

void TimeBuckets::push(Timestamp ts, EventPtr event) {
  const int64_t bucket = bucketOf(ts);
  if (held_ == 0 || bucket < low_) low_ = bucket;
  const size_t slot = slotOf(bucket);
  ring_[slot].push_back(Item{ts, std::move(event)});
  occupied_[slot >> 6] |= uint64_t{1} << (slot & 63);
  ++held_;
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
  std::vector<Item>& items = ring_[slot];
  auto byTs = [](const Item& a, const Item& b) { return a.ts < b.ts; };
  size_t taken = items.size();
  if (width_ > 1) {
    // Stable: equal timestamps keep their arrival order.
    if (!std::is_sorted(items.begin(), items.end(), byTs)) {
      std::stable_sort(items.begin(), items.end(), byTs);
    }
    taken = std::upper_bound(items.begin(), items.end(), Item{upto, nullptr}, byTs) - items.begin();
  }
  for (size_t i = 0; i < taken; ++i) out.push_back(std::move(items[i].event));
  items.erase(items.begin(), items.begin() + static_cast<ptrdiff_t>(taken));
  held_ -= taken;
  if (items.empty()) occupied_[slot >> 6] &= ~(uint64_t{1} << (slot & 63));
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
