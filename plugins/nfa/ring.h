#pragma once

// A growable ring buffer addressed by absolute position, the storage of every
// active instance stack.
//
// Entries are appended at the back and expire from the front, so an entry
// keeps its absolute index for life and a link to it (an index into the
// previous stack) stays valid until it expires: validity is `index >=
// head()`. The storage doubles when full and is never shrunk, so a stack
// that reached its steady-state size allocates nothing more.

#include <cassert>
#include <cstdint>
#include <utility>
#include <vector>

namespace cepbus::plugins::nfa {

template <typename T>
class Ring {
 public:
  uint64_t head() const { return head_; }
  uint64_t tail() const { return tail_; }
  bool empty() const { return head_ == tail_; }
  size_t size() const { return static_cast<size_t>(tail_ - head_); }

  T& at(uint64_t index) {
    assert(index >= head_ && index < tail_);
    return slots_[index & mask_];
  }
  const T& at(uint64_t index) const {
    assert(index >= head_ && index < tail_);
    return slots_[index & mask_];
  }
  T& back() { return at(tail_ - 1); }
  T& front() { return at(head_); }

  // Appends a slot and returns it; its previous contents are overwritten by
  // the caller (slots are reused, so e.g. an EventPtr member is reassigned,
  // not constructed).
  T& pushBack() {
    if (tail_ - head_ == slots_.size()) grow();
    return slots_[tail_++ & mask_];
  }
  void popBack() {
    assert(!empty());
    --tail_;
  }
  void popFront() {
    assert(!empty());
    ++head_;
  }
  // Drops every entry (their slots keep their contents until reused).
  void clear() { head_ = tail_; }
  // Drops every entry and moves the next index to `head`: a restored stack
  // keeps the absolute indices the links into it were written with.
  void restartAt(uint64_t head) { head_ = tail_ = head; }

 private:
  void grow() {
    const size_t capacity = slots_.empty() ? 16 : slots_.size() * 2;
    std::vector<T> bigger(capacity);
    for (uint64_t i = head_; i < tail_; ++i) bigger[i & (capacity - 1)] = std::move(at(i));
    slots_ = std::move(bigger);
    mask_ = capacity - 1;
  }

  std::vector<T> slots_;
  uint64_t mask_ = 0;
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
};

}  // namespace cepbus::plugins::nfa
