#pragma once

// ResolvedRoute: everything the broker needs to dispatch an exchange to one
// address, computed once on a route-cache miss and then shared read-only by
// every publish to that address: the matching targets (deduplicated; a target
// with several subscriptions is delivered once, unconditionally if any of them
// has no filter, else when any of its filters matches) and the delivery
// decision for each QoS a sender can ask for.

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "bus/core/event_filter.h"
#include "bus/core/status.h"
#include "bus/core/symbol.h"
#include "flows/delivery_target.h"
#include "router/delivery_policy.h"

namespace cepbus::router {

struct FilteredTarget {
  flows::DeliveryTarget* target = nullptr;
  std::vector<EventFilterPtr> filters;  // delivered when any matches
};

// Thread-safety: immutable once installed in the route cache.
// Ownership: keeps its targets alive (keep_alive) while any reader may use it.
struct ResolvedRoute {
  Symbol address;
  // Of a held address, the incarnation of the name it was built for
  // (heldNameIncarnation()); 0 for a permanent one.
  uint64_t incarnation = 0;
  Status invalid;  // not OK: the address is malformed or undeliverable; publishing fails with it
  std::vector<flows::DeliveryTarget*> targets;  // delivered unconditionally
  std::vector<FilteredTarget> filtered;
  std::vector<std::shared_ptr<flows::DeliveryTarget>> keep_alive;
  std::array<DeliveryDecision, 2> decisions{};  // indexed by the QoS asked (flows::Qos)
};

}  // namespace cepbus::router
