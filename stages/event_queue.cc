#include "stages/event_queue.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace cepbus::stages {
namespace {

// Rings start small and double on demand: a stage of capacity 1M that never
// queues more than a few hundred items keeps a few kilobytes per class.
constexpr size_t kInitialRing = 256;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

// The eventcounts below need, on each side, "my store is visible before I
// read the other side's": a Dekker pattern. A fence (or locked instruction)
// on the publishing side would stall every push until its stores reach the
// other core (~200 ns on a VM across cores). With membarrier(2) the sleeping
// side pays instead, once per sleep, and the publishing side needs only a
// compiler barrier (the asymmetric-fence technique of folly and of the Linux
// kernel's own RCU). ThreadSanitizer does not model membarrier, so sanitized
// builds use read-modify-writes on the waiter count on both sides, which the
// C++ memory model orders by itself.
bool membarrierEnabled() {
#if defined(__SANITIZE_THREAD__)
  return false;
#else
  static const bool enabled = [] {
    const long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
    return syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  }();
  return enabled;
#endif
}

// Publishing side: the number of waiters, read after this thread's earlier stores.
uint32_t waitersAfterPublish(std::atomic<uint32_t>& waiters) {
  if (membarrierEnabled()) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    return waiters.load(std::memory_order_relaxed);
  }
  return waiters.fetch_add(0, std::memory_order_acq_rel);
}

// Waiting side: registers a waiter, ordered before the re-check that follows.
void announceWaiter(std::atomic<uint32_t>& waiters) {
  waiters.fetch_add(1, std::memory_order_acq_rel);
  if (membarrierEnabled()) syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

}  // namespace

AdaptiveMutex::AdaptiveMutex() {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
  pthread_mutex_init(&mu_, &attr);
  pthread_mutexattr_destroy(&attr);
}

AdaptiveMutex::~AdaptiveMutex() { pthread_mutex_destroy(&mu_); }
void AdaptiveMutex::lock() { pthread_mutex_lock(&mu_); }
bool AdaptiveMutex::try_lock() { return pthread_mutex_trylock(&mu_) == 0; }
void AdaptiveMutex::unlock() { pthread_mutex_unlock(&mu_); }

uint64_t EventCount::epoch() const {
  MutexLock lock(mu_);
  return epoch_;
}

void EventCount::waitPast(uint64_t seen, Clock::time_point deadline) const {
  MutexLock lock(mu_);
  cv_.waitUntil(mu_, deadline, [&]() REQUIRES(mu_) { return epoch_ != seen; });
}

void EventCount::notifyOne() {
  {
    MutexLock lock(mu_);
    ++epoch_;
  }
  cv_.notify_one();
}

void EventCount::notifyAll() {
  {
    MutexLock lock(mu_);
    ++epoch_;
  }
  cv_.notify_all();
}

CostClassifier::CostClassifier(std::vector<int32_t> thresholds)
    : thresholds_(std::move(thresholds)) {
  for (size_t i = 1; i < thresholds_.size(); ++i) {
    if (thresholds_[i] <= thresholds_[i - 1]) {
      throw std::invalid_argument(
          "cost thresholds must be strictly ascending: " + std::to_string(thresholds_[i - 1]) +
          " is followed by " + std::to_string(thresholds_[i]));
    }
  }
}

size_t CostClassifier::classOf(int32_t cost) const {
  return static_cast<size_t>(std::upper_bound(thresholds_.begin(), thresholds_.end(), cost) -
                             thresholds_.begin());
}

size_t CostClassifier::classOf(const StageItem& item) const {
  return item.event ? classOf(item.event->cost()) : 0;
}

EventQueue::EventQueue(size_t capacity, CostClassifier classifier, std::chrono::nanoseconds spin,
                       size_t watermark)
    : capacity_(capacity),
      classifier_(std::move(classifier)),
      classes_(classifier_.classes()),
      spin_(spin),
      max_ring_(std::bit_ceil(std::max<size_t>(capacity, 1))),
      watermark_(watermark == 0 ? capacity : std::min(watermark, capacity)),
      rings_(std::make_unique<Ring[]>(classes_)) {
  if (capacity_ == 0) throw std::invalid_argument("queue capacity must be positive");
  const size_t initial = std::min(max_ring_, kInitialRing);
  for (size_t c = 0; c < classes_; ++c) {
    rings_[c].slots = std::make_unique<StageItem[]>(initial);
    rings_[c].mask = initial - 1;
  }
  membarrierEnabled();  // registers with the kernel once, off the hot path
}

EventQueue::~EventQueue() = default;

template <typename Ready>
bool EventQueue::spinUntil(Clock::time_point deadline, Ready ready) const {
  // Spinning on lock-free counters: when the wait ends within the spin, the
  // waiter pays for neither a sleep nor a wake-up, and the other side skips
  // the notification because nobody sleeps.
  if (ready() || closed()) return true;
  if (spin_.count() <= 0) return false;
  const auto spin_until = std::min(deadline, Clock::now() + spin_);
  for (uint32_t i = 1;; ++i) {
    cpuRelax();
    if (ready() || closed()) return true;
    if (i % 64 == 0 && Clock::now() >= spin_until) return false;
  }
}

template <typename Ready>
bool EventQueue::sleepUntil(std::atomic<uint32_t>& waiters, const EventCount& wakes,
                            Clock::time_point deadline, Ready ready) const {
  const uint64_t seen = wakes.epoch();
  announceWaiter(waiters);
  // Either the waker sees this waiter (and moves the epoch on), or this
  // re-check sees what the waker published.
  bool ok = ready() || closed();
  if (!ok) {
    wakes.waitPast(seen, deadline);
    ok = ready() || closed();
  }
  waiters.fetch_sub(1, std::memory_order_relaxed);
  return ok;
}

void EventQueue::wakeConsumer() {
  if (waitersAfterPublish(sleeping_consumers_) == 0) return;
  items_.notifyOne();
}

void EventQueue::wakeSpaceWaiters() const {
  if (waitersAfterPublish(space_waiters_) == 0) return;
  space_.notifyAll();
}

size_t EventQueue::size() const {
  // Popped first: pushed only grows, so the difference never goes negative.
  const uint64_t popped = popped_total_.load(std::memory_order_acquire);
  const uint64_t pushed = pushed_total_.load(std::memory_order_acquire);
  return static_cast<size_t>(pushed - popped);
}

size_t EventQueue::sizeAtMost() const {
  // cached_popped_ first: it copies a popped_total_ that never exceeded a
  // pushed_total_ written before it, so the difference never goes negative.
  const uint64_t popped = cached_popped_.load(std::memory_order_acquire);
  const uint64_t pushed = pushed_total_.load(std::memory_order_acquire);
  return static_cast<size_t>(pushed - popped);
}

bool EventQueue::pushLocked(StageItem& item) {
  const uint64_t pushed = pushed_total_.load(std::memory_order_relaxed);
  uint64_t popped = cached_popped_.load(std::memory_order_relaxed);
  // Refreshed at the watermark (not only when full) so that sizeAtMost()
  // stays below it while the queue is short.
  if (pushed - popped >= watermark_) {
    popped = popped_total_.load(std::memory_order_acquire);
    cached_popped_.store(popped, std::memory_order_release);
    if (pushed - popped >= capacity_) return false;
  }
  Ring& ring = rings_[classifier_.classOf(item)];
  const uint64_t tail = ring.tail.load(std::memory_order_relaxed);
  if (tail - ring.cached_head > ring.mask) {
    ring.cached_head = ring.head.load(std::memory_order_acquire);
    // The total is below the capacity, so a ring at max_ring_ is never full here.
    if (tail - ring.cached_head > ring.mask) growLocked(ring);
  }
  ring.slots[tail & ring.mask] = std::move(item);
  ring.tail.store(tail + 1, std::memory_order_release);
  pushed_total_.store(pushed + 1, std::memory_order_release);
  return true;
}

void EventQueue::growLocked(Ring& ring) {
  // Consumers read `slots` under pop_mu_; lock order is push_mu_ then pop_mu_.
  AdaptiveLock consumers(pop_mu_);
  const uint64_t head = ring.head.load(std::memory_order_relaxed);
  const uint64_t tail = ring.tail.load(std::memory_order_relaxed);
  const size_t bigger_size = std::min((ring.mask + 1) * 2, max_ring_);
  auto bigger = std::make_unique<StageItem[]>(bigger_size);
  for (uint64_t i = head; i < tail; ++i) {
    bigger[i & (bigger_size - 1)] = std::move(ring.slots[i & ring.mask]);
  }
  ring.slots = std::move(bigger);
  ring.mask = bigger_size - 1;
  ring.cached_head = head;
}

PushResult EventQueue::tryPush(StageItem& item) {
  {
    AdaptiveLock lock(push_mu_);
    if (closed_.load(std::memory_order_relaxed)) return PushResult::kClosed;
    if (!pushLocked(item)) return PushResult::kFull;
  }
  wakeConsumer();
  return PushResult::kOk;
}

PushResult EventQueue::pushWait(StageItem& item, Clock::time_point deadline) {
  const auto has_room = [&] { return size() < capacity_; };
  for (;;) {
    const PushResult r = tryPush(item);
    if (r != PushResult::kFull) return r;
    if (spinUntil(deadline, has_room)) continue;
    if (Clock::now() >= deadline) return PushResult::kFull;
    sleepUntil(space_waiters_, space_, deadline, has_room);
  }
}

bool EventQueue::waitBelow(size_t level, Clock::time_point deadline) const {
  const auto below = [&] { return size() < level; };
  for (;;) {
    if (spinUntil(deadline, below) || Clock::now() >= deadline) return below();
    if (sleepUntil(space_waiters_, space_, deadline, below)) return below();
  }
}

size_t EventQueue::takeLocked(StageItem* out, size_t max) {
  size_t taken = 0;
  for (size_t c = 0; c < classes_ && taken < max; ++c) {
    Ring& ring = rings_[c];
    const uint64_t head = ring.head.load(std::memory_order_relaxed);
    const uint64_t tail = ring.tail.load(std::memory_order_acquire);
    const uint64_t n = std::min<uint64_t>(tail - head, max - taken);
    for (uint64_t i = 0; i < n; ++i) out[taken++] = std::move(ring.slots[(head + i) & ring.mask]);
    if (n > 0) ring.head.store(head + n, std::memory_order_release);
  }
  if (taken > 0) {
    popped_total_.store(popped_total_.load(std::memory_order_relaxed) + taken,
                        std::memory_order_release);
  }
  return taken;
}

size_t EventQueue::tryPopBatch(StageItem* out, size_t max) {
  if (max == 0) return 0;
  size_t taken;
  {
    AdaptiveLock lock(pop_mu_);
    taken = takeLocked(out, max);
  }
  if (taken > 0) wakeSpaceWaiters();
  return taken;
}

size_t EventQueue::popBatch(StageItem* out, size_t max, Clock::time_point deadline) {
  if (max == 0) return 0;
  const auto has_items = [&] { return size() > 0; };
  for (;;) {
    // Closed before a pop that found nothing: nothing will ever come.
    const bool was_closed = closed();
    if (const size_t n = tryPopBatch(out, max)) return n;
    if (was_closed) return 0;
    if (spinUntil(deadline, has_items)) continue;
    if (Clock::now() >= deadline) return 0;
    sleepUntil(sleeping_consumers_, items_, deadline, has_items);
  }
}

void EventQueue::close() {
  {
    AdaptiveLock lock(push_mu_);
    if (closed_.load(std::memory_order_relaxed)) return;
    closed_.store(true, std::memory_order_release);
  }
  items_.notifyAll();
  space_.notifyAll();
}

std::vector<StageItem> EventQueue::abort(Status reason) {
  std::vector<StageItem> pending;
  {
    AdaptiveLock producers(push_mu_);
    if (!closed_.load(std::memory_order_relaxed)) {
      close_reason_ = std::move(reason);
      closed_.store(true, std::memory_order_release);
    }
    AdaptiveLock consumers(pop_mu_);
    pending.resize(size());
    pending.resize(takeLocked(pending.data(), pending.size()));
  }
  items_.notifyAll();
  space_.notifyAll();
  return pending;
}

Status EventQueue::closeReason() const {
  AdaptiveLock lock(push_mu_);
  return close_reason_;
}

}  // namespace cepbus::stages
