#pragma once

// DurableParking: the durable AMQP subscriptions whose subscriber is away
// (services/amqp/listener/amqp_listener.h). A subscribing link whose source asks for
// durability is parked when it detaches or its connection drops: its broker
// endpoint stays subscribed and its outbox keeps collecting, up to the
// outbox's away capacity. A link with the same endpoint name (client
// container id and link name) that attaches again with the same source
// address and still durable resumes it; one that attaches differently ends
// it and starts afresh.
//
// Thread-safety: not thread-safe; used under the listener's control lock
// (through broker_subscriptions.h). Ownership: shares the parked outboxes
// (the endpoints' consumers hold them too). Ending a subscription — its
// admission, its outbox, its broker endpoint — is its owner's business
// (broker_subscriptions.h): the parking calls the End it was given.

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "services/amqp/listener/listener_stats.h"
#include "services/amqp/listener/subscriber_outbox.h"

namespace cepbus::services::amqp {

// A durable subscription, by its endpoint's name.
struct DurableSubscription {
  std::string pattern;  // the source address it subscribed with
  std::shared_ptr<SubscriberOutbox> outbox;
  std::string owner;  // whose max-durable it counts against
};

class DurableParking {
 public:
  // Ends a parked subscription that will not be resumed.
  using End = std::function<void(const std::string& endpoint, DurableSubscription& subscription)>;

  DurableParking(std::shared_ptr<ListenerCounters> counters, End end);

  // The subscriber of `endpoint` went away without closing its link. The
  // outbox is unbound, what the subscriber had not settled goes back
  // (SubscriberOutbox::returnUnsettled()), and the subscription waits.
  void park(const std::string& endpoint, DurableSubscription subscription,
            std::vector<OutboxEntry> unsettled);

  // A link attaches as `endpoint` with source `pattern`: the parked
  // subscription when it resumes it (same pattern, `durable`), to be bound
  // to the new link. Otherwise nullopt, and a parked one of that name is
  // ended.
  std::optional<DurableSubscription> resume(const std::string& endpoint, const std::string& pattern,
                                            bool durable);

  // Ends every parked subscription (the listener stops).
  void endAll();

  size_t size() const { return parked_.size(); }

 private:
  const std::shared_ptr<ListenerCounters> counters_;
  const End end_;
  std::map<std::string, DurableSubscription> parked_;  // by endpoint name
};

}  // namespace cepbus::services::amqp
