#pragma once

// BrokerSubscriptions: the broker side of the AMQP listener's subscriptions
// (services/amqp/amqp_listener.h). A client's subscribing link becomes a
// broker endpoint "amqp:<client container id>/<link name>" whose consumer is
// the subscription's outbox, subscribed to the link's source pattern and,
// for a plain address nobody else provides, its provider for in-out
// requests. Named so, a subscriber that comes back finds what was kept for
// it: the reliable flows' unacknowledged deliveries, or its durable
// subscription, which waits in the parking while it is away.
//
// Thread-safety: not thread-safe; the listener uses it on its container
// thread only (the outboxes it makes take offers from router threads).
// Ownership: shares the outboxes with the links and the endpoints'
// consumers; holds the parking. The broker and the admission outlive it.

#include <cstddef>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "bus/core/symbol.h"
#include "router/broker.h"
#include "services/amqp/admission.h"
#include "services/amqp/durable_parking.h"
#include "services/amqp/listener_stats.h"
#include "services/amqp/subscriber_outbox.h"

namespace cepbus::services::amqp {

struct SubscriptionConfig {
  size_t subscriber_buffer = 1000;  // an outbox's capacity while its link is there
  size_t durable_buffer = 1000;     // ... and while a durable one's subscriber is away
  Symbol sender;                    // the listener's own publishes (SubscriberOutbox)
  std::string owner;                // the endpoints' registry owner: the listener's name
};

class BrokerSubscriptions {
 public:
  // A subscription the link may take.
  struct Opened {
    std::string endpoint;
    std::shared_ptr<SubscriberOutbox> outbox;  // bound to the link
    std::string owner;                         // whose max-durable a durable one counts against
  };
  // Why the attach is refused: an AMQP error condition and its description.
  // Nothing of the subscription is left (its durable admission is undone).
  struct Refusal {
    std::string condition;
    std::string description;
  };

  BrokerSubscriptions(router::Broker& broker, std::shared_ptr<AmqpAdmission> admission,
                      std::shared_ptr<ListenerCounters> counters, SubscriptionConfig config);

  // Link `link_name` of client `container_id` subscribes to `pattern` (a
  // valid pattern). A parked durable subscription of that name with the
  // same pattern is resumed (when the link is `durable` still); otherwise
  // one of that name is ended and a new one starts: a durable one admitted
  // against max-durable for `owner`, a broker endpoint added and
  // subscribed. Either way the outbox is bound with `wake`.
  std::variant<Opened, Refusal> open(const std::string& container_id, const std::string& link_name,
                                     const std::string& pattern, bool durable, std::string owner,
                                     SubscriberOutbox::Wake wake);
  // An outbox with no endpoint, for a link that only receives answers.
  std::shared_ptr<SubscriberOutbox> replyOutbox(SubscriberOutbox::Wake wake) const;

  // The durable subscription's subscriber went away without closing its
  // link: it waits (DurableParking::park()).
  void park(const std::string& endpoint, DurableSubscription subscription,
            std::vector<OutboxEntry> unsettled);
  // A subscription ends for good: its durable count (`durable_owner`'s, if
  // it is durable), its outbox, its broker endpoint ("" for none), which may
  // already be gone.
  void end(const std::string& endpoint, SubscriberOutbox& outbox, const std::string* durable_owner);
  // Ends every parked subscription (the listener stops).
  void endParked();

 private:
  std::shared_ptr<SubscriberOutbox> newOutbox() const;

  router::Broker& broker_;
  const std::shared_ptr<AmqpAdmission> admission_;
  const std::shared_ptr<ListenerCounters> counters_;
  const SubscriptionConfig config_;
  DurableParking parking_;
};

}  // namespace cepbus::services::amqp
