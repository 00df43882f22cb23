#pragma once

// SubscriberDeliveries: what the AMQP listener sent one subscribing link
// and the subscriber has not settled yet, how much more it may send it, and
// what each outcome does with an entry (services/amqp/listener/amqp_listener.h):
//
// - accepted: a journaled entry is acknowledged to its reliable flow, which
//   forgets it;
// - rejected: final too (the subscriber says the message is invalid): it is
//   counted, not redelivered;
// - released or modified: a journaled entry goes back to its flow, which
//   redelivers it; a best-effort one is put back in front of the outbox.
//
// An entry sent pre-settled (an at-most-once subscriber) gets no outcome:
// a journaled one is acknowledged as it goes out, as the subscriber chose.
//
// Thread-safety: not thread-safe; one per subscribing link, used by that
// link's connection only. Ownership: owns the unsettled entries;
// shares the link's outbox. When a settlement should make the link send
// more it calls the drain callback it is given, not the listener.

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <proton/tracker.hpp>
#include <vector>

#include "services/amqp/listener/in_flight_bound.h"
#include "services/amqp/listener/listener_stats.h"
#include "services/amqp/listener/subscriber_outbox.h"

namespace cepbus::services::amqp {

class SubscriberDeliveries {
 public:
  enum class Outcome { kAccepted, kRejected, kReleased };

  SubscriberDeliveries(std::shared_ptr<SubscriberOutbox> outbox,
                       std::shared_ptr<ListenerCounters> counters);

  // How many entries may go out now to a link granting `credit` with
  // `unsent` deliveries not written out yet: its credit, but at most the
  // outbox's capacity in flight (in_flight_bound.h).
  int sendable(int credit, int unsent);
  // `entry` went out as `tracker`, pre-settled or not (`settled`).
  void sent(const proton::tracker& tracker, OutboxEntry entry, bool settled);
  // The subscriber settled `tracker` with `outcome`. `drain` runs when the
  // link may send more: the settlement made room under the in-flight bound
  // (first), or a released entry waits in front of the outbox (after it).
  // Nothing happens for a tracker this link does not hold.
  void settle(const proton::tracker& tracker, Outcome outcome, const std::function<void()>& drain);
  // The link went away: every unsettled entry, for
  // SubscriberOutbox::returnUnsettled().
  std::vector<OutboxEntry> takeUnsettled();
  size_t unsettled() const { return unsettled_.size(); }

 private:
  const std::shared_ptr<SubscriberOutbox> outbox_;
  const std::shared_ptr<ListenerCounters> counters_;
  std::map<proton::tracker, OutboxEntry> unsettled_;
  InFlightBound in_flight_;
};

}  // namespace cepbus::services::amqp
