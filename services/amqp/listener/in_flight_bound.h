#pragma once

// InFlightBound: how many events the AMQP listener may send a subscribing
// link now. A link may have at most its buffer's worth in flight (sent and
// not settled, or not written out yet) whatever credit it grants: one that
// grants a lot and then reads nothing would otherwise have the listener hold
// all of it. The rest waits in the subscription's outbox, which holds its
// publishers back until the subscriber counts as stuck, then refuses
// (buffer_full; services/amqp/listener/amqp_listener.h).
//
// Thread-safety: not thread-safe; one per subscribing link, used by that
// link's connection only.

#include <algorithm>
#include <cstddef>

namespace cepbus::services::amqp {

class InFlightBound {
 public:
  // The events to send to a link granting `credit` with `in_flight` events
  // in flight and a buffer of `capacity`: its credit, but no more than
  // brings it to `capacity` in flight. 0 or less: none.
  int take(int credit, size_t in_flight, size_t capacity) {
    const int room = in_flight >= capacity ? 0 : static_cast<int>(capacity - in_flight);
    capped_ = room < credit;
    return std::min(credit, room);
  }

  // True when the last take() stopped at the bound rather than at the
  // credit: a settlement makes room, so the link is worth draining again.
  bool capped() const { return capped_; }

 private:
  bool capped_ = false;
};

}  // namespace cepbus::services::amqp
