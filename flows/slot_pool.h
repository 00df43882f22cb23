#pragma once

// SlotPool<T>: parks values under 64-bit tokens while they sit in a stage
// queue. A stage item carries only an event and a token; the rest of an
// exchange waits here and is taken back by the stage handler. Freed slots are
// reused, so a flow in steady state parks without allocating.

#include <cassert>
#include <cstdint>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

namespace cepbus::flows {

// Thread-safety: every member may be called from any thread. A token is valid
// from park() until the take() that consumes it; using it after that is a bug.
// T must be default-constructible and movable; a taken slot is reset to T{}
// so that it keeps no shared references alive.
template <typename T>
class SlotPool {
 public:
  uint64_t park(T value) {
    std::lock_guard lock(mu_);
    uint64_t index;
    if (free_.empty()) {
      index = slots_.size();
      slots_.push_back(std::move(value));
    } else {
      index = free_.back();
      free_.pop_back();
      slots_[index] = std::move(value);
    }
    ++parked_;
    return index;
  }

  T take(uint64_t token) {
    std::lock_guard lock(mu_);
    assert(token < slots_.size());
    T value = std::exchange(slots_[token], T{});
    free_.push_back(token);
    --parked_;
    return value;
  }

  // Calls `read` with the value parked under `token`, which stays parked.
  template <typename F>
  void peek(uint64_t token, F&& read) const {
    std::lock_guard lock(mu_);
    assert(token < slots_.size());
    read(slots_[token]);
  }

  size_t size() const {
    std::lock_guard lock(mu_);
    return parked_;
  }

 private:
  mutable std::mutex mu_;
  std::deque<T> slots_;  // a deque: growing it never moves parked values
  std::vector<uint64_t> free_;
  size_t parked_ = 0;
};

}  // namespace cepbus::flows
