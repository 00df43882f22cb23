#pragma once

// AmqpListenerService: the AMQP 1.0 binding component (Qpid Proton C++). The
// bus is the AMQP peer that endpoints connect to: a proton::container on its
// own threads listens on the descriptor's <listeners><amqp host port>.
//
// - A client's sending link publishes: its target address is the topic (no
//   wildcards) and every message becomes an event (services/protocols/amqp/message_mapping.h).
//   A message that cannot be mapped is rejected with amqp:invalid-field or
//   amqp:decode-error and a description; the link stays up.
// - Guarantees to publishers: a pre-settled message is published at most
//   once. An unsettled one is published asking for reliable QoS (the
//   delivery policy decides what it gets) and settled once the router has
//   answered: accepted when every target took or queued it (or nobody
//   subscribes), released (the client retries) when admission refused it for
//   a target or a target failed — never dropped silently.
// - Credit follows backpressure, on both sides of the bus. Stages: after a
//   refused or degraded publish the link gets no more credit until a timer
//   finds the stages of the targets that refused it no longer saturated.
//   Subscribers (services/amqp/listener/publisher_credit.h): a publishing link is
//   granted credit only up to the free room of the buffers of the
//   subscribing links its address matches —
//   room = subscriber_buffer - (buffered + in transit to it: published by
//   this listener and not yet offered to the buffer, e.g. in a stage or the
//   journal), shared equally among the publishing links that match it, and
//   at most `credit_window`. With no room the link waits (credit_pauses,
//   subscriber_waits, paused_links) until every such buffer is back at or
//   below half its size (its low-water mark): so a flood from a publisher
//   waits at the sender instead of overflowing a slow subscriber, and a
//   publisher's credit shrinks as the subscriber buffers fill. Trade-off:
//   while one subscriber is slow, the publishers it subscribes to slow down
//   to its pace, and so do the other subscribers of those publishers. A
//   subscriber that takes nothing for `subscriber_stall_timeout` while it
//   holds a publisher back is stuck: it stops holding anybody back
//   (subscriber_stalls) and alone refuses what does not fit in its buffer
//   (buffer_full; a reliable flow retries it later) until it drains to its
//   low-water mark. Events from other publishers (services, other flows)
//   and durable subscriptions whose subscriber is away hold nobody back.
// - A client's receiving link subscribes: its source address is a router
//   pattern (`*`, `#`); the link gets a broker endpoint
//   "amqp:<client container id>/<link name>" whose consumer buffers at most
//   `subscriber_buffer` events (beyond that it answers Rejected, which the
//   flow counts and a reliable flow retries without counting a failure), and events go out as
//   unsettled messages while the link has credit — at most
//   `subscriber_buffer` of them in flight (unsettled, or not written out
//   yet) whatever credit it grants, so a subscriber that grants a lot and
//   stops reading holds at most two buffers' worth
//   (services/amqp/listener/in_flight_bound.h).
// - At least once end to end: on a reliable route an unsettled publish is
//   accepted only once every target's journal commit is in, and a journaled
//   event sent to a subscriber is acknowledged to its flow only when the
//   subscriber accepts it (flows::DeliveryContext::deferAcknowledgement()). A
//   subscriber that disconnects and comes back with the same container id
//   and link name gets what it had not accepted, marked as redelivered
//   (delivery-count > 0, first-acquirer false); a released delivery is
//   redelivered the same way. A reject is final (counted, not redelivered).
// - Durable subscriptions: a link whose source asks for durability keeps its
//   endpoint and subscription when it detaches or its connection drops;
//   events collect (up to `durable_buffer`, then refused and counted in
//   `parked_overflow`) until a link with the same container id, link name
//   and source address attaches again. A close (not a detach) ends it.
//   With a `journal` they are recorded there (services/amqp/listener/durable_store.h)
//   and start() re-creates them, parked, before it listens: a restart of
//   the bus, even after kill -9, keeps them and what is published to them
//   before their subscriber re-attaches. Without one they live in memory.
// - Request/response: a message with reply-to is an in-out request to the
//   provider of its address (Broker::provide(); an AMQP client provides a
//   plain address by subscribing to it first). The answer goes to the link
//   whose address is the reply-to (a receiver attached with a dynamic source
//   gets one named by the bus, "$cepbus.reply.<n>"; a receiver on a plain
//   address works too) with the request's correlation-id (else its
//   message-id). Timeout: the message's ttl, else `request_timeout`.
//   Faults, timeouts and rejections come back as fault messages
//   (message_mapping.h: subject "cepbus.fault", properties "fault" and
//   "fault-description"); a request that cannot be sent at all is rejected
//   with amqp:not-found (no provider) or released (route paused) when
//   unsettled. Requests the bus sends to an AMQP provider carry reply-to
//   "$cepbus.replies" and a ulong correlation-id; the provider answers by
//   sending to "$cepbus.replies" (a fault property fails the request); an
//   unknown correlation-id is rejected with amqp:not-found.
// - Statistics (services/amqp/listener/listener_stats.h): every counter of
//   stats() is in the stats scope "amqp" {name}; the registry entry `name`
//   (kind service) has delivered = sent, failed = released, rejected =
//   rejected + malformed + messages_too_large; each attached link has an
//   entry "amqp-link:<client container id>/<link name>" (kind endpoint,
//   owner `name`) and its own counters (LinkCounters) in the scope
//   "amqp_link" {name}.
// - Security (services/protocols/amqp/access_control.h): SASL ANONYMOUS only with
//   allow-anonymous="true" (then anonymous clients may use any address),
//   SASL PLAIN against the descriptor's users (salted PBKDF2 hashes), TLS
//   from <tls cert key> (TLS only, then), and each user's permits checked on
//   every attach (refused with amqp:unauthorized-access).
// - Limits (AmqpLimits): beyond max-connections a connection is closed on
//   open, beyond max-sessions a begin is answered with an end, beyond
//   max-links an attach with a detach, beyond max-durable a durable
//   subscription's attach with a detach, beyond max-pending-requests a
//   request is rejected (a pre-settled one gets a fault message) — each with
//   amqp:resource-limit-exceeded and a description naming the limit; the
//   connection stays up. An authenticated user's connections together are
//   held to max-user-sessions and max-user-links as well. A new name (event
//   type, attribute name, target address) is charged to its connection
//   (max-names) and user (max-user-names): beyond either the message is
//   rejected, or the attach detached, with amqp:resource-limit-exceeded,
//   while other clients still create names (admission.h). A connection's
//   unsettled publishes the listener has not settled yet are bounded by
//   max-unsettled and max-bytes-in-flight (unsettled_budget.h): at either,
//   its links get no more credit and what is sent beyond is rejected with
//   amqp:resource-limit-exceeded. Each refusal is counted (the *_refused
//   counters).
//   Every publishing link announces max-message-size on attach, and a
//   message whose encoded size exceeds it is rejected with
//   amqp:link:message-size-exceeded (counted in messages_too_large); the
//   link stays up. A connection whose client has not authenticated (SASL)
//   within `handshake_timeout` of its accept is shut down and counted in
//   handshake_timeouts (services/amqp/listener/handshake_watch.h).
//
// Threading: the container runs `threads` threads (one per core unless the
// descriptor says <amqp threads="N">), and every connection is owned by the
// events and work Proton serializes for it: its links, deliveries, holds
// and outboxes are touched there only, so reading one connection's burst and
// writing another's proceed in parallel. What crosses connections — an
// event for a subscriber, a drained buffer giving a publisher credit back, a
// relink — goes through the target connection's proton::work_queue, with at
// most one wake on its way per connection and at most two per subscriber
// connection for a burst read from a publisher (work_coalescer.h; the
// publisher's flows::WakeHold, lent to the deliveries of each publish); what a
// publish reads of another connection's buffers is atomic. The global
// tables (admission, sessions, broker subscriptions and durable parking,
// the link directory) are locked on the control path only (open, attach,
// detach, close; and an in-out request's admission), request/response
// tables for requests and answers only: a publish takes no shared lock.
// Thread-safety: the Service life cycle calls are made by one thread;
// port() and stats() may be called from any thread. Ownership: owns the
// container, its threads, and the endpoints of its receiving links.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "services/amqp/listener/admission.h"
#include "services/amqp/listener/listener_stats.h"
#include "services/protocols/amqp/listener_config.h"
#include "services/service.h"

namespace cepbus::services::amqp {

struct AmqpListenerOptions {
  std::string name = "amqp";        // the service name (and container id)
  unsigned threads = 0;             // container threads; 0: one per core
  uint32_t credit_window = 100;     // credit granted to a publishing link at a time
  size_t subscriber_buffer = 1000;  // events buffered per subscribing link
  size_t durable_buffer = 1000;  // events kept for a durable subscription whose subscriber is away
  // A subscriber whose buffer holds back publishers and that takes nothing
  // for this long is stuck: it stops holding them back (it alone then loses
  // what does not fit in its buffer) until it drains below its low-water mark.
  std::chrono::milliseconds subscriber_stall_timeout{1000};
  // How long what a subscriber that went away without closing its link (a
  // dropped connection, a detach) left unsettled on a reliable route waits
  // for a link of the same container id and link name; then it is removed
  // as for a closed link. Durable subscriptions keep theirs; 0: none waits.
  std::chrono::milliseconds subscriber_return_timeout{60000};
  // How often a publishing link that ran into backpressure checks whether it
  // may have credit again.
  std::chrono::milliseconds recheck_interval{20};
  // How long stop() waits for connections to close before aborting them.
  std::chrono::milliseconds close_timeout{2000};
  // How long a request from an AMQP client waits for its answer when the
  // message has no ttl.
  std::chrono::milliseconds request_timeout{30000};
  // How long a connection may take from its accept to its client's SASL
  // authentication before it is ended (handshake_watch.h); 0: no limit.
  std::chrono::milliseconds handshake_timeout{10000};
  // What one client may make the listener hold (services/amqp/listener/admission.h).
  AmqpLimits limits;
  // The reliable flow's journal, where durable subscriptions are recorded;
  // empty: they live in memory (services/amqp/listener/durable_store.h).
  std::string journal;
};

class AmqpListenerService final : public Service {
 public:
  AmqpListenerService(AmqpListenerConfig listener, AmqpListenerOptions options,
                      ServiceContext& context);
  ~AmqpListenerService() override;  // stops

  const std::string& name() const override;
  // Listens; an error names the descriptor location and the address.
  Status start() override;
  // Stops granting credit to publishers, so the bus can drain; subscribing
  // links keep receiving.
  void deactivate() override;
  void stop() override;

  // The bound port (the ephemeral one when the descriptor asked for 0); 0
  // before start().
  int port() const;
  AmqpListenerStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// What the Bus calls for <listeners><amqp>; `journal` as in AmqpListenerOptions.
std::unique_ptr<Service> makeAmqpListener(const AmqpListenerConfig& listener,
                                          ServiceContext& context, std::string journal);

}  // namespace cepbus::services::amqp
