#pragma once

// DeliveryTarget: what a flow delivers to. Router endpoints implement it; so
// can anything else that consumes exchanges (tests, bridges).

#include <string>

#include "bus/core/status.h"
#include "flows/delivery_context.h"
#include "flows/exchange.h"

namespace cepbus::flows {

// Thread-safety: deliver() may be called concurrently from several threads
// (publishers through StFlow, a stage's pool through SedaFlow/ReliableFlow).
// Ownership: flows never own targets; a target must outlive its attachment to
// every flow (AbstractFlow::detach() returns only when no delivery is in flight
// from that flow's queues).
class DeliveryTarget {
 public:
  virtual ~DeliveryTarget() = default;

  // A stable name, unique among the targets of a flow; ReliableFlow journals
  // by it, so it must also be stable across restarts.
  virtual const std::string& name() const = 0;

  // Takes the exchange. OK acknowledges it (ReliableFlow then forgets it),
  // unless the target took the acknowledgement from `context` to give later;
  // any other status is a fault, counted by the flow and reported to the
  // sender when its pattern asks for faults. `context` says whether the flow
  // journaled the delivery and what the publisher lets it put off
  // (flows/delivery_context.h); it lives for this call only. Should not
  // throw; a throw is caught by the flow and treated as an Internal fault.
  virtual Status deliver(const Exchange& exchange, DeliveryContext& context) = 0;
};

}  // namespace cepbus::flows
