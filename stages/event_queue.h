#pragma once

// The bounded incoming queue of a stage (P1 SEDA, parts 1 and 3): items are
// classified by their event's cost into priority classes and enqueued by
// class; a consumer takes the highest-priority class first, FIFO within a
// class. The capacity bounds all classes together and is the hard limit of
// admission.
//
// Built for a fast hand-off between threads on machines where moving a cache
// line between cores costs ~200 ns:
//  - producers and consumers never share a lock: producers serialize on one
//    lock, consumers on another, and they meet only through ring indices
//    published with plain release stores (one ring per class);
//  - a consumer takes up to N items per lock acquisition;
//  - an idle consumer spins briefly before sleeping, and a producer wakes it
//    only when it sleeps; the ordering that makes "only when it sleeps" safe
//    costs the sleeping consumer an asymmetric barrier (membarrier), not the
//    producer a fence per item;
//  - rings grow by doubling up to the capacity: no allocation per item once warm.

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/base/thread_annotations.h"
#include "bus/core/status.h"
#include "stages/stage_types.h"

namespace cepbus::stages {

// Maps an event's cost to a priority class; class 0 is dequeued first.
// `thresholds` (strictly ascending) are the class boundaries: a cost below
// thresholds[0] is class 0, a cost in [thresholds[i-1], thresholds[i]) is
// class i. Cheap work goes first: an event's cost is what it will consume
// (P1: "the throughput it will cost"), and under load serving cheap events
// first keeps the most events within their latency.
// Thread-safety: immutable after construction.
class CostClassifier {
 public:
  // Throws std::invalid_argument when thresholds are not strictly ascending.
  explicit CostClassifier(std::vector<int32_t> thresholds = {});

  size_t classes() const { return thresholds_.size() + 1; }
  size_t classOf(int32_t cost) const;
  // The class of an item; an item without an event is class 0.
  size_t classOf(const StageItem& item) const;

 private:
  std::vector<int32_t> thresholds_;
};

enum class PushResult : uint8_t { kOk, kFull, kClosed };

// A pthread mutex of the adaptive kind: under contention it spins briefly
// before sleeping in the kernel. The queue's critical sections last tens of
// nanoseconds, so a contended lock is almost always free again within the
// spin, whereas a futex sleep and wake-up costs microseconds.
class CAPABILITY("mutex") AdaptiveMutex {
 public:
  AdaptiveMutex();
  ~AdaptiveMutex();
  AdaptiveMutex(const AdaptiveMutex&) = delete;
  AdaptiveMutex& operator=(const AdaptiveMutex&) = delete;
  void lock() ACQUIRE();
  bool try_lock() TRY_ACQUIRE(true);  // NOLINT(readability-identifier-naming): Lockable
  void unlock() RELEASE();

 private:
  pthread_mutex_t mu_;
};

// Holds an AdaptiveMutex for its scope.
class SCOPED_CAPABILITY AdaptiveLock {
 public:
  explicit AdaptiveLock(AdaptiveMutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~AdaptiveLock() RELEASE() { mu_.unlock(); }
  AdaptiveLock(const AdaptiveLock&) = delete;
  AdaptiveLock& operator=(const AdaptiveLock&) = delete;

 private:
  AdaptiveMutex& mu_;
};

// An eventcount: a waiter reads epoch(), re-checks its condition, and only
// then sleeps until the epoch moves past what it read; a notifier moves the
// epoch on. A notification between the read and the sleep is never lost.
// Thread-safety: every member may be called from any thread.
class EventCount {
 public:
  using Clock = std::chrono::steady_clock;

  uint64_t epoch() const EXCLUDES(mu_);
  // Sleeps until the epoch is past `seen` or `deadline` passes.
  void waitPast(uint64_t seen, Clock::time_point deadline) const EXCLUDES(mu_);
  // Moves the epoch on and wakes one sleeper / every sleeper.
  void notifyOne() EXCLUDES(mu_);
  void notifyAll() EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  mutable CondVar cv_;
  uint64_t epoch_ GUARDED_BY(mu_) = 0;
};

// Thread-safety: every member may be called from any thread; any number of
// producers and consumers. Items are owned by the queue between push and pop.
class EventQueue {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::nanoseconds kDefaultSpin{20'000};

  // `watermark` (at most the capacity; 0 means the capacity) is the length
  // below which sizeAtMost() may stay stale: producers re-read the consumers'
  // progress only when their own estimate reaches it.
  // Throws std::invalid_argument when capacity is 0.
  EventQueue(size_t capacity, CostClassifier classifier,
             std::chrono::nanoseconds spin = kDefaultSpin, size_t watermark = 0);
  ~EventQueue();
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  // Never blocks. Moves from `item` only when the result is kOk.
  PushResult tryPush(StageItem& item);
  // Waits until there is room, the queue closes, or `deadline`.
  PushResult pushWait(StageItem& item, Clock::time_point deadline);
  // Waits until size() < level, the queue closes, or `deadline`; true when
  // size() < level on return. The backpressure wait of upstream stages.
  bool waitBelow(size_t level, Clock::time_point deadline) const;

  // Moves up to `max` items into out[0..max): highest class first, FIFO within
  // a class. When empty, spins briefly then sleeps until an item arrives, the
  // queue closes, or `deadline`. Returns the number moved; 0 means the
  // deadline passed or the queue is closed and empty (see drained()).
  size_t popBatch(StageItem* out, size_t max, Clock::time_point deadline);
  // Never blocks (beyond the consumers' own lock).
  size_t tryPopBatch(StageItem* out, size_t max);

  // Refuses further pushes; queued items can still be popped. Idempotent.
  void close();
  // Closes with `reason` (unless already closed) and hands back every queued
  // item, so the caller can report each one: nothing is dropped silently.
  std::vector<StageItem> abort(Status reason);

  bool closed() const { return closed_.load(std::memory_order_acquire); }
  // Closed and empty: no item will ever be popped again.
  bool drained() const { return closed() && size() == 0; }
  // OK after close(); the abort reason after abort().
  Status closeReason() const;
  size_t size() const;
  // An upper bound on size(), exact as of the last time a producer refreshed
  // its view of the consumers; below the watermark it may be stale but needs
  // no cross-core traffic. Admission reads it first and size() only when it
  // reaches a level that matters.
  size_t sizeAtMost() const;
  // Items ever pushed / popped; monotonic.
  uint64_t pushedTotal() const { return pushed_total_.load(std::memory_order_acquire); }
  uint64_t poppedTotal() const { return popped_total_.load(std::memory_order_acquire); }
  size_t capacity() const { return capacity_; }
  size_t classes() const { return classes_; }
  const CostClassifier& classifier() const { return classifier_; }

 private:
  static constexpr size_t kCacheLine = 64;

  // A FIFO of one class: absolute head/tail counters over a power-of-two
  // array. Producers own `tail` and `cached_head`, consumers own `head`;
  // `slots`/`mask` are read under either lock and replaced under both.
  struct Ring {
    std::unique_ptr<StageItem[]> slots;
    size_t mask = 0;
    alignas(kCacheLine) std::atomic<uint64_t> tail{0};
    uint64_t cached_head = 0;
    alignas(kCacheLine) std::atomic<uint64_t> head{0};
  };

  // Pushes under push_mu_; false when the queue is full.
  bool pushLocked(StageItem& item) REQUIRES(push_mu_);
  void growLocked(Ring& ring) REQUIRES(push_mu_) EXCLUDES(pop_mu_);
  size_t takeLocked(StageItem* out, size_t max) REQUIRES(pop_mu_);
  // After a push: wakes a sleeping consumer, if any.
  void wakeConsumer();
  // After a pop: wakes threads waiting for room, if any.
  void wakeSpaceWaiters() const;
  // Spins (bounded by the spin time and `deadline`) until ready() or the
  // queue closes; true if so.
  template <typename Ready>
  bool spinUntil(Clock::time_point deadline, Ready ready) const;
  // Sleeps until `ready()`, the queue closes, or `deadline`, on one of the
  // two eventcounts below; returns ready() || closed().
  template <typename Ready>
  bool sleepUntil(std::atomic<uint32_t>& waiters, const EventCount& wakes,
                  Clock::time_point deadline, Ready ready) const;

  // Read-mostly.
  const size_t capacity_;
  const CostClassifier classifier_;
  const size_t classes_;
  const std::chrono::nanoseconds spin_;
  const size_t max_ring_;
  const size_t watermark_;
  std::unique_ptr<Ring[]> rings_;
  std::atomic<bool> closed_{false};

  // Producer side.
  alignas(kCacheLine) mutable AdaptiveMutex push_mu_;
  std::atomic<uint64_t> pushed_total_{0};   // written under push_mu_
  std::atomic<uint64_t> cached_popped_{0};  // written under push_mu_
  Status close_reason_ GUARDED_BY(push_mu_);

  // Consumer side.
  alignas(kCacheLine) AdaptiveMutex pop_mu_;
  std::atomic<uint64_t> popped_total_{0};  // written under pop_mu_

  // Sleeping consumers and waiters for room: how many there are (so that a
  // notifier with nobody to wake takes no lock) and their eventcounts.
  alignas(kCacheLine) mutable std::atomic<uint32_t> sleeping_consumers_{0};
  mutable std::atomic<uint32_t> space_waiters_{0};
  EventCount items_;
  mutable EventCount space_;
};

}  // namespace cepbus::stages
