#pragma once

// BrokerSubscriptions: the broker side of the AMQP listener's subscriptions
// (services/amqp/listener/amqp_listener.h). A client's subscribing link becomes a
// broker endpoint "amqp:<client container id>/<link name>" whose consumer is
// the subscription's outbox, subscribed to the link's source pattern and,
// for a plain address nobody else provides, its provider for in-out
// requests. Named so, a subscriber that comes back finds what was kept for
// it: the reliable flows' unacknowledged deliveries, or its durable
// subscription, which waits in the parking while it is away.
//
// With a store (a bus with a journal, durable_store.h) a durable
// subscription is recorded when it is made and forgotten when its link is
// closed; restore() re-creates the recorded ones, parked, when the listener
// starts. Without one they live in memory and end with the process.
//
// Thread-safety: not thread-safe; the listener guards it with its control
// lock (the outboxes it makes take offers from router threads).
// Ownership: shares the outboxes with the links and the endpoints'
// consumers; holds the parking. The broker and the admission outlive it.

#include <cstddef>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "bus/core/status.h"
#include "bus/core/symbol.h"
#include "router/broker.h"
#include "services/amqp/listener/admission.h"
#include "services/amqp/listener/durable_parking.h"
#include "services/amqp/listener/durable_store.h"
#include "services/amqp/listener/listener_stats.h"
#include "services/amqp/listener/subscriber_outbox.h"
#include "services/protocols/amqp/access_control.h"

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

  // What restore() did: a line for each recorded subscription it did not
  // re-create (its record is removed), to be logged.
  struct Restored {
    size_t restored = 0;
    std::vector<std::string> dropped;
  };

  BrokerSubscriptions(router::Broker& broker, std::shared_ptr<AmqpAdmission> admission,
                      std::shared_ptr<ListenerCounters> counters, SubscriptionConfig config);

  // Records durable subscriptions in `store` from now on, and re-creates,
  // parked, each one it holds whose user `access` still lets subscribe to
  // its pattern and that max-durable admits (oldest first). Called once,
  // before any open(); an error of the store is the listener's to report.
  Result<Restored> restore(std::unique_ptr<DurableStore> store, const AccessControl& access);

  // Link `link_name` of client `container_id` subscribes to `pattern` (a
  // valid pattern) for `user` ("" when anonymous). A parked durable
  // subscription of that name with the same pattern is resumed (when the
  // link is `durable` still); otherwise one of that name is ended and a new
  // one starts: a durable one admitted against max-durable for `owner` and
  // recorded in the store, a broker endpoint added and subscribed. Either
  // way the outbox is bound with `wake`.
  std::variant<Opened, Refusal> open(const std::string& container_id, const std::string& link_name,
                                     const std::string& pattern, bool durable,
                                     const std::string& user, std::string owner,
                                     SubscriberOutbox::Wake wake);
  // An outbox with no endpoint, for a link that only receives answers.
  std::shared_ptr<SubscriberOutbox> replyOutbox(SubscriberOutbox::Wake wake) const;

  // The durable subscription's subscriber went away without closing its
  // link: it waits (DurableParking::park()).
  void park(const std::string& endpoint, DurableSubscription subscription,
            std::vector<OutboxEntry> unsettled);
  // A subscription ends in this process: its durable count
  // (`durable_owner`'s, if it is durable), its outbox, its broker endpoint
  // ("" for none), which may already be gone. `closed`: its link was
  // closed, which ends a durable one for good, so its record goes too; an
  // error doing so is returned (the record would bring it back at the next
  // start). `exit`: whether its endpoint may come back (a subscriber that
  // went away without closing its link, or any at a stop of the bus), so
  // that the flows keep what waits for it.
  Status end(const std::string& endpoint, SubscriberOutbox& outbox,
             const std::string* durable_owner, bool closed, router::EndpointExit exit);
  // Ends every parked subscription (the listener stops); their records stay.
  void endParked();

 private:
  std::shared_ptr<SubscriberOutbox> newOutbox() const;
  // Adds the broker endpoint `endpoint` consuming into `outbox`, subscribed
  // to `pattern` (and its provider when plain); nothing of it is left when
  // refused.
  std::optional<Refusal> addEndpoint(const std::string& endpoint, const std::string& container_id,
                                     const std::string& link_name, const std::string& pattern,
                                     const std::shared_ptr<SubscriberOutbox>& outbox);
  // Keeps the store in step with an endpoint name that was just free: a
  // durable subscription is recorded, any other forgets a stale record.
  Status keepRecord(const std::string& endpoint, bool durable, const DurableRecord& record);

  router::Broker& broker_;
  const std::shared_ptr<AmqpAdmission> admission_;
  const std::shared_ptr<ListenerCounters> counters_;
  const SubscriptionConfig config_;
  DurableParking parking_;
  std::unique_ptr<DurableStore> store_;  // nullptr: durable subscriptions live in memory
  std::set<std::string> recorded_;       // the endpoints store_ holds a record of
};

}  // namespace cepbus::services::amqp
