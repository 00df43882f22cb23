#pragma once

// A first-in first-out queue in one ring of slots that keeps the elements
// that left it: pushBack() hands out the next slot, which holds a departed
// element (its storage kept, for the caller to reset) or a new one. The
// window engine keeps a group's panes in one, so that a pane costs no
// allocation and the panes of a group sit side by side in memory.
//
// Thread safety: none. Ownership: owns its elements; a reference into the
// queue is valid until the next pushBack().

#include <cstddef>
#include <utility>
#include <vector>

namespace cepbus::plugins::window {

template <typename T>
class RingQueue {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  // The i-th element from the front.
  T& operator[](size_t i) { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  const T& operator[](size_t i) const { return slots_[(head_ + i) & (slots_.size() - 1)]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }

  // Appends the next slot and returns it: a departed element, or one made
  // by `make()` when the ring grows.
  template <typename Make>
  T& pushBack(const Make& make) {
    if (size_ == slots_.size()) grow(make);
    ++size_;
    return back();
  }
  // The slot the next pushBack() hands out, or nullptr when the ring is
  // full (it grows then): for a caller to prefetch before it needs it.
  const T* nextSlot() const {
    return size_ == slots_.size() ? nullptr : &slots_[(head_ + size_) & (slots_.size() - 1)];
  }
  void popFront() {
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }

 private:
  // Twice the slots (a power of two, so that an index wraps with a mask),
  // the elements moved to the front in order.
  template <typename Make>
  void grow(const Make& make) {
    std::vector<T> slots;
    const size_t capacity = slots_.empty() ? 2 : 2 * slots_.size();
    slots.reserve(capacity);
    for (size_t i = 0; i < size_; ++i) slots.push_back(std::move((*this)[i]));
    while (slots.size() < capacity) slots.push_back(make());
    slots_ = std::move(slots);
    head_ = 0;
  }

  std::vector<T> slots_;
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace cepbus::plugins::window
