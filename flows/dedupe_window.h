#pragma once

// DedupeWindow: the most recent (target, event id) pairs a flow delivered,
// bounded; older pairs are forgotten first. ReliableFlow consults it so that
// an event reaches a target once even if it is sent or journaled twice.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/symbol.h"
#include "bus/core/wire_names.h"
#include "flows/flat_set.h"

namespace cepbus::flows {

struct DeliveryKey {
  Symbol target;
  EventId event_id = 0;
  friend bool operator==(const DeliveryKey&, const DeliveryKey&) = default;
};

struct DeliveryKeyHash {
  size_t operator()(const DeliveryKey& k) const noexcept {
    // Ids share a per-process prefix in their high bits; mix so the low bits differ.
    uint64_t h = k.event_id ^ (uint64_t{k.target.id()} << 40) ^ (k.event_id >> 29);
    h *= 0x9E3779B97F4A7C15ull;
    return static_cast<size_t>(h ^ (h >> 32));
  }
};

using DeliveryKeySet = FlatSet<DeliveryKey, DeliveryKeyHash>;

// It holds the target names of the keys it remembers: a name from a client
// (a subscribing link's) is given back once its target detached and its keys
// are forgotten, and its id is not reused for another target meanwhile, which
// would make that target's first deliveries look like duplicates.
//
// Thread-safety: none (ReliableFlow guards it with its mutex). Memory grows
// with the keys remembered, up to the capacity, and is then reused.
class DedupeWindow {
 public:
  explicit DedupeWindow(size_t capacity) : capacity_(capacity) {}

  bool contains(const DeliveryKey& key) const { return set_.contains(key); }
  // Remembers `key`, forgetting the oldest key when full. No effect if known.
  // The caller holds `key.target` meanwhile.
  void insert(const DeliveryKey& key);
  void clear() {
    set_.clear();
    order_.clear();
    oldest_ = 0;
  }
  size_t size() const { return set_.size(); }
  size_t capacity() const { return capacity_; }

 private:
  const size_t capacity_;
  DeliveryKeySet set_;
  struct Remembered {
    SharedName target;
    EventId event_id = 0;
    DeliveryKey key() const { return DeliveryKey{target, event_id}; }
  };
  // The keys in the order remembered: a ring once it holds capacity_ keys,
  // whose oldest is at oldest_.
  std::vector<Remembered> order_;
  size_t oldest_ = 0;
};

}  // namespace cepbus::flows
