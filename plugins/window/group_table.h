#pragma once

// The window engine's index from a group's key to its group: open addressing
// with linear probing over one array of slots, each holding the key's hash
// beside the group. A lookup hashes the key's values where they are (in the
// event, no key built), reads the slots (a few kilobytes for a thousand
// groups, so in cache) and compares the key of the group whose hash matches
// only; a std::unordered_map from the key vector cost a node and a key
// vector to reach per event. Deletion shifts the following slots back, so
// the table keeps no tombstones.
//
// Thread safety: none. Ownership: the groups belong to the caller; the table
// holds pointers to them.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cepbus::plugins::window {

template <typename Group>
class GroupTable {
 public:
  size_t size() const { return size_; }

  // The group filed under `hash` for which `same(group)` holds, or nullptr.
  template <typename Same>
  Group* find(uint64_t hash, const Same& same) const {
    if (slots_.empty()) return nullptr;
    for (size_t i = home(hash);; i = (i + 1) & mask_) {
      const Slot& slot = slots_[i];
      if (slot.group == nullptr) return nullptr;
      if (slot.hash == hash && same(*slot.group)) return slot.group;
    }
  }

  // Asks for the slot where a lookup of `hash` starts, ahead of find().
  void prefetchSlot(uint64_t hash) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[home(hash)]);
  }

  // Files `group`, which is not in the table, under `hash`.
  void insert(uint64_t hash, Group* group) {
    // At most half full, so that probes stay short.
    if (2 * (size_ + 1) > slots_.size()) grow();
    place(hash, group);
    ++size_;
  }

  // Removes `group`, filed under `hash`.
  void erase(uint64_t hash, const Group* group) {
    size_t i = home(hash);
    while (slots_[i].group != group) i = (i + 1) & mask_;
    // Backward shift: a later slot of the probe run moves into the hole
    // unless its home lies cyclically after the hole (then it is reachable).
    for (size_t j = (i + 1) & mask_; slots_[j].group != nullptr; j = (j + 1) & mask_) {
      const size_t at = home(slots_[j].hash);
      if (((j - at) & mask_) >= ((j - i) & mask_)) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = Slot{};
    --size_;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    Group* group = nullptr;  // nullptr: empty
  };

  // Where a hash's probe run starts: its high bits after a Fibonacci
  // multiply, so that keys whose hashes differ in high bits only spread too.
  size_t home(uint64_t hash) const {
    return static_cast<size_t>((hash * 0x9e3779b97f4a7c15ULL) >> shift_);
  }

  void place(uint64_t hash, Group* group) {
    size_t i = home(hash);
    while (slots_[i].group != nullptr) i = (i + 1) & mask_;
    slots_[i] = Slot{hash, group};
  }

  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 16 : 2 * old.size(), Slot{});
    mask_ = slots_.size() - 1;
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(slots_.size()));
    for (const Slot& slot : old) {
      if (slot.group != nullptr) place(slot.hash, slot.group);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t size_ = 0;
};

}  // namespace cepbus::plugins::window
