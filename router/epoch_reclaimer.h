#pragma once

// EpochReclaimer: safe memory reclamation for read-mostly structures whose
// readers never lock (the broker's route cache). Readers enter a guard; a
// writer unlinks an object, retires it, and it is freed only when no reader
// that could have seen it is still inside a guard.
//
// Two-epoch scheme with two global reader counters, one per epoch parity:
// - enter(): read the epoch e, count yourself in readers[e % 2], and re-check
//   the epoch (if it moved, uncount and retry); leave: uncount.
// - retire(): the object joins the bag of the current epoch e.
// - reclaim(): if readers[(e+1) % 2] — those of epoch e-1 — is zero, free the
//   bag of epoch e-1 and advance to e+1. Readers of e-2 were already gone when
//   the epoch advanced to e, and a reader of epoch e or later found the object
//   already unlinked, so nobody can still hold it. Repeated once to free the
//   bag of epoch e as well when possible.
// reclaim() never waits: a reader inside a long delivery (or a delivery that
// subscribes again, re-entering the writer) only postpones freeing.
//
// Cost for a reader: two atomic read-modify-writes (enter and leave) on
// counters shared by all readers.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace cepbus::router {

// Thread-safety: enter() and the guards from any thread, re-entrantly.
// retire(), reclaim() and retiredCount() must be serialized by the caller
// (the writer lock). Ownership: owns retired objects until they are freed;
// the destructor frees everything, so no reader may be inside a guard then.
class EpochReclaimer {
 public:
  class Guard {
   public:
    Guard(Guard&& other) noexcept : counter_(other.counter_) { other.counter_ = nullptr; }
    Guard& operator=(Guard&&) = delete;
    Guard(const Guard&) = delete;
    ~Guard() {
      if (counter_ != nullptr) counter_->fetch_sub(1, std::memory_order_release);
    }

   private:
    friend class EpochReclaimer;
    explicit Guard(std::atomic<int64_t>* counter) : counter_(counter) {}
    std::atomic<int64_t>* counter_;
  };

  EpochReclaimer() = default;
  EpochReclaimer(const EpochReclaimer&) = delete;
  EpochReclaimer& operator=(const EpochReclaimer&) = delete;

  // While the returned guard lives, everything the caller reads from the
  // shared structure stays allocated, even if a writer retires it meanwhile.
  Guard enter();

  // `object` was unlinked from the shared structure; frees it once safe.
  void retire(std::shared_ptr<const void> object);
  // Frees what no reader can hold any more; never blocks.
  void reclaim();
  size_t retiredCount() const { return bags_[0].size() + bags_[1].size(); }

 private:
  struct alignas(64) Counter {
    std::atomic<int64_t> readers{0};
  };

  std::atomic<uint64_t> epoch_{0};
  std::array<Counter, 2> counters_{};
  std::array<std::vector<std::shared_ptr<const void>>, 2> bags_;  // by epoch parity
};

}  // namespace cepbus::router
