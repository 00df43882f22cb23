#pragma once

// FlatSet<Key, Hash>: a hash set of small, trivially copyable keys kept in one
// array (open addressing with linear probing; erase shifts the following
// entries back instead of leaving tombstones). Why: a reliable flow asks its
// dedupe window and its in-flight set several times per event, under its
// lock; std::unordered_set allocates and frees a node per insert and erase and
// follows a pointer per lookup, which showed as ~10% of the AMQP thread and
// most of its malloc time under an at-least-once flood. Here a lookup is one
// probe into a contiguous array (the table stays at most half full) and
// nothing is allocated except when the table doubles.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace cepbus::flows {

// Thread-safety: none. Ownership: holds copies of its keys.
template <typename Key, typename Hash>
class FlatSet {
  static_assert(std::is_trivially_copyable_v<Key>, "keys are moved around by copying");

 public:
  // Sized so that `expected` keys fit without growing.
  explicit FlatSet(size_t expected = 0) { resize(capacityFor(expected)); }

  bool contains(const Key& key) const { return slots_[probe(key)].used; }
  // False when `key` was there already.
  bool insert(const Key& key) {
    if ((size_ + 1) * 2 > slots_.size()) resize(slots_.size() * 2);
    Slot& slot = slots_[probe(key)];
    if (slot.used) return false;
    slot = Slot{key, true};
    ++size_;
    return true;
  }
  // False when `key` was not there.
  bool erase(const Key& key) {
    size_t hole = probe(key);
    if (!slots_[hole].used) return false;
    // Backward shift: an entry after the hole moves into it unless its home
    // slot lies cyclically in (hole, entry], where a lookup still finds it.
    for (size_t next = (hole + 1) & mask_; slots_[next].used; next = (next + 1) & mask_) {
      const size_t home = homeOf(slots_[next].key);
      const bool stays =
          hole <= next ? (hole < home && home <= next) : (hole < home || home <= next);
      if (stays) continue;
      slots_[hole] = slots_[next];
      hole = next;
    }
    slots_[hole].used = false;
    --size_;
    return true;
  }
  void clear() {
    for (Slot& slot : slots_) slot.used = false;
    size_ = 0;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  template <typename Fn>
  void forEach(Fn&& fn) const {
    for (const Slot& slot : slots_) {
      if (slot.used) fn(slot.key);
    }
  }

 private:
  struct Slot {
    Key key{};
    bool used = false;
  };

  static size_t capacityFor(size_t expected) {
    return std::bit_ceil(std::max<size_t>(16, expected * 2));
  }
  // Where a probe for `key` starts. The hash is mixed again (murmur3's
  // finalizer) because linear probing needs well spread low bits: with an
  // identity hash (std::hash<uint64_t>) dense keys such as slot numbers fill
  // one long run, and every erase then shifts along all of it.
  size_t homeOf(const Key& key) const {
    uint64_t h = Hash{}(key);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return static_cast<size_t>(h) & mask_;
  }
  // The slot holding `key`, or the free slot where its probe ends.
  size_t probe(const Key& key) const {
    size_t i = homeOf(key);
    while (slots_[i].used && !(slots_[i].key == key)) i = (i + 1) & mask_;
    return i;
  }
  void resize(size_t capacity) {
    std::vector<Slot> old(capacity);
    old.swap(slots_);
    mask_ = capacity - 1;
    size_ = 0;
    for (const Slot& slot : old) {
      if (!slot.used) continue;
      slots_[probe(slot.key)] = slot;
      ++size_;
    }
  }

  std::vector<Slot> slots_;  // a power of two, at most half used
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace cepbus::flows
