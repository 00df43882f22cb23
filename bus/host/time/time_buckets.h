#pragma once

// TimeBuckets: events held by timestamp over a bounded span of time, let go
// in (ts, arrival) order — the storage of the reorder buffer (reorder.h).
//
// A binary heap costs O(log n) moves per event both ways, which on a stream
// reordered within a delay of 1,000 was a third of what the nfa engine spends
// per event. The reorder buffer's events have a property a heap does not use:
// they all lie within one span of `span` time units, and they leave in
// timestamp order as the low end of that span moves up. So they are kept in a
// ring of buckets, each covering `width` consecutive timestamps (a calendar
// queue): pushing appends to a bucket, and releasing walks the buckets from
// the low end, skipping empty ones by a bitmap. With width 1 (a span of up to
// kMaxBuckets - 2, the usual case) an event costs O(1) both ways and a bucket
// is already in arrival order; wider buckets are sorted by ts, stably, when
// they are released. A bucket's first event is kept in a ring of pointers
// and only the others in a vector of its own, flagged by a second bitmap:
// with about one event per timestamp, pushing and releasing touch one
// small contiguous ring (16 bytes a slot) and the bitmaps.
//
// Thread safety: none (one per reorder buffer). Storage is reused, so steady
// state allocates nothing.

#include <cstdint>
#include <memory>
#include <vector>

#include "bus/core/event.h"

namespace cepbus::plugin {

class TimeBuckets {
 public:
  // The most buckets a ring has (spans longer than this share buckets).
  static constexpr uint64_t kMaxBuckets = 8192;

  // Holds events whose timestamps all lie within `span` + 1 consecutive
  // values (span >= 0).
  explicit TimeBuckets(Timestamp span);

  // Holds `event`. Every event held must have its ts in
  // [low, low + span], where low is above the last `upto` given to
  // releaseUpTo() and never goes down — the reorder buffer's invariant.
  // Inline: the reorder buffer's every event comes through here.
  void push(EventPtr event) {
    const int64_t bucket = bucketOf(event->ts());
    if (held_ == 0 || bucket < low_) low_ = bucket;
    const size_t slot = slotOf(bucket);
    const uint64_t bit = uint64_t{1} << (slot & 63);
    if ((occupied_[slot >> 6] & bit) == 0) {
      // An empty slot holds a null pointer (released ones are moved from):
      // constructed over rather than assigned, the slot is only written.
      std::construct_at(&first_[slot], std::move(event));
      occupied_[slot >> 6] |= bit;
    } else {
      pushCrowded(slot, std::move(event));
    }
    ++held_;
  }
  // Appends every event held with ts <= `upto` to `out`, in (ts, arrival)
  // order, and lets go of them.
  void releaseUpTo(Timestamp upto, std::vector<EventPtr>& out);
  // Appends every event held to `out`, in (ts, arrival) order.
  void releaseAll(std::vector<EventPtr>& out);

  size_t size() const { return held_; }

 private:
  // The bucket number of `ts` (floor(ts / width)), and its place in the ring.
  int64_t bucketOf(Timestamp ts) const {
    if (width_ == 1) return ts;
    int64_t q = ts / width_;
    if (ts % width_ != 0 && ts < 0) --q;
    return q;
  }
  // push() into a slot that holds an event already.
  void pushCrowded(size_t slot, EventPtr event);
  size_t slotOf(int64_t bucket) const { return static_cast<uint64_t>(bucket) & mask_; }
  // The first bucket in [from, to] holding events, or to + 1: whole empty
  // words of the bitmap are skipped at once.
  int64_t nextOccupied(int64_t from, int64_t to) const;
  // Moves the events of `bucket` with ts <= upto to `out`.
  void release(int64_t bucket, Timestamp upto, std::vector<EventPtr>& out);

  const Timestamp width_;
  const uint64_t mask_;
  // A bucket's first event (set while its bit in occupied_ is), and the
  // events that came after it, in arrival order (while its bit in crowded_ is).
  std::vector<EventPtr> first_;
  std::vector<std::vector<EventPtr>> more_;
  std::vector<uint64_t> occupied_;  // a bit per slot of the ring
  std::vector<uint64_t> crowded_;   // a bit per slot: more_ holds events
  std::vector<EventPtr> sorting_;   // release()'s, for a wide bucket: reused
  size_t held_ = 0;
  int64_t low_ = 0;  // no bucket below it holds events (valid while held_ > 0)
};

}  // namespace cepbus::plugin
