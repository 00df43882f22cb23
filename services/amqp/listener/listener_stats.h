#pragma once

// The AMQP listener's statistics (services/amqp/listener/amqp_listener.h): the
// counters it keeps, the plain copy stats() returns, every counter by name,
// and the listener's registry entry that shows them; each link's counters
// and its own registry entry.
//
// ListenerCounters are bumped by the listener's container threads and by its
// endpoint consumers on router threads, which may still run for a moment
// after the service is gone (an in-flight straight-through delivery): the
// listener shares them rather than owning them alone. The refusal counters
// are not among them: AmqpAdmission keeps those, and stats() merges both.
//
// Thread-safety: every counter is a relaxed atomic; stats(), statsFields()
// and the registry entries' probes may run on any thread. A copy is a set of
// independent reads, not a consistent snapshot.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bus/core/status.h"
#include "router/component_entry.h"
#include "router/registry.h"
#include "services/amqp/listener/admission.h"

namespace cepbus::services::amqp {

// A plain copy of the counters (AmqpListenerService::stats()).
struct AmqpListenerStats {
  uint64_t connections = 0;           // accepted since start
  uint64_t published = 0;             // messages published on the router
  uint64_t accepted = 0;              // unsettled messages accepted
  uint64_t released = 0;              // unsettled messages released (admission or target refused)
  uint64_t malformed = 0;             // messages that could not be mapped (rejected if unsettled)
  uint64_t credit_pauses = 0;         // times a publishing link stopped getting credit
  uint64_t sent = 0;                  // messages sent to subscribing links
  uint64_t acknowledged = 0;          // of `sent`: accepted by the subscriber
  uint64_t not_acknowledged = 0;      // of `sent`: rejected, released or modified by the subscriber
  uint64_t buffer_full = 0;           // deliveries refused because a subscriber's buffer was full
  uint64_t paused_links = 0;          // publishing links waiting for backpressure to ease (now)
  uint64_t subscriber_links = 0;      // open subscribing links (now)
  uint64_t publish_credit = 0;        // credit granted to publishing links and not yet used (now)
  uint64_t redelivered = 0;           // of `sent`: marked as redeliveries (delivery-count > 0)
  uint64_t parked_subscriptions = 0;  // durable subscriptions whose subscriber is away (now)
  uint64_t parked_overflow = 0;       // events refused because an away subscription was full
  uint64_t durable_restored = 0;      // durable subscriptions re-created from the journal at start
  uint64_t durable_not_restored = 0;  // ... not re-created (corrupt, user gone, max-durable)
  uint64_t subscriber_waits = 0;      // of credit_pauses: because a subscriber buffer was full
  uint64_t subscriber_stalls = 0;     // times a stuck subscriber stopped holding publishers back
  uint64_t awaiting_commit = 0;       // unsettled publishes waiting for their journal commit (now)
  uint64_t unsettled = 0;  // messages sent to subscribers, waiting for their outcome (now)
  uint64_t rejected = 0;   // requests and replies rejected (no provider, unknown id, ...)
  // Request/response.
  uint64_t requests = 0;            // messages with reply-to sent to a provider as in-out
  uint64_t answers = 0;             // replies sent back to requesters
  uint64_t faults = 0;              // fault messages sent back (fault, rejected, timeout)
  uint64_t answers_unroutable = 0;  // answers dropped: no link has their reply-to address
  uint64_t provider_requests = 0;   // in-out requests sent to AMQP providers
  uint64_t provider_replies = 0;    // their answers (replies or faults) received
  uint64_t late_replies = 0;        // answers to requests no longer open (rejected)
  // Refused at a limit (AmqpLimits), with amqp:resource-limit-exceeded.
  uint64_t connections_refused = 0;  // connections beyond max-connections
  uint64_t sessions_refused = 0;     // sessions beyond max-sessions on their connection
  uint64_t links_refused = 0;        // links beyond max-links on their connection
  uint64_t durable_refused = 0;      // durable subscriptions beyond max-durable for their user
  uint64_t requests_refused = 0;     // requests beyond max-pending-requests on their connection
  // Rejected with amqp:link:message-size-exceeded: encoded beyond max-message-size.
  uint64_t messages_too_large = 0;
  // Connections ended because their client had not authenticated within
  // handshake-timeout (handshake_watch.h).
  uint64_t handshake_timeouts = 0;
};

// Every counter by name (the registry entry's metadata keys).
std::vector<std::pair<std::string, uint64_t>> statsFields(const AmqpListenerStats& stats);

// What the listener counts, one member per counter of AmqpListenerStats but
// the refusals (AmqpAdmission's). publish_credit is signed: the listener
// adds each link's change in credit, which may be negative.
struct ListenerCounters {
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> published{0};
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> released{0};
  std::atomic<uint64_t> malformed{0};
  std::atomic<uint64_t> credit_pauses{0};
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> acknowledged{0};
  std::atomic<uint64_t> not_acknowledged{0};
  std::atomic<uint64_t> buffer_full{0};
  std::atomic<uint64_t> paused_links{0};
  std::atomic<uint64_t> subscriber_links{0};
  std::atomic<int64_t> publish_credit{0};
  std::atomic<uint64_t> redelivered{0};
  std::atomic<uint64_t> parked_subscriptions{0};
  std::atomic<uint64_t> parked_overflow{0};
  std::atomic<uint64_t> durable_restored{0};
  std::atomic<uint64_t> durable_not_restored{0};
  std::atomic<uint64_t> subscriber_waits{0};
  std::atomic<uint64_t> subscriber_stalls{0};
  std::atomic<uint64_t> awaiting_commit{0};
  std::atomic<uint64_t> unsettled{0};
  std::atomic<uint64_t> requests{0};
  std::atomic<uint64_t> answers{0};
  std::atomic<uint64_t> faults{0};
  std::atomic<uint64_t> answers_unroutable{0};
  std::atomic<uint64_t> provider_requests{0};
  std::atomic<uint64_t> provider_replies{0};
  std::atomic<uint64_t> late_replies{0};
  std::atomic<uint64_t> rejected{0};
  std::atomic<uint64_t> handshake_timeouts{0};

  // A copy of every counter, with `admission`'s refusals.
  AmqpListenerStats stats(const AmqpAdmission& admission) const;
};

// One link's counters, shown in its registry entry "amqp-link:<client
// container id>/<link name>". A subscription's live in its outbox, so a
// durable one keeps them while its subscriber is away. Bumped by the
// container threads and by endpoint consumers on router threads.
struct LinkCounters {
  std::atomic<uint64_t> accepted{0};          // publishing: unsettled messages accepted
  std::atomic<uint64_t> rejected{0};          // publishing: messages rejected
  std::atomic<uint64_t> released{0};          // publishing: messages released
  std::atomic<uint64_t> credit_withheld{0};   // publishing: times credit stopped
  std::atomic<uint64_t> delivered{0};         // subscribing: messages sent
  std::atomic<uint64_t> acknowledged{0};      // subscribing: accepted by the subscriber
  std::atomic<uint64_t> not_acknowledged{0};  // subscribing: rejected/released/modified
  std::atomic<uint64_t> redelivered{0};       // subscribing: sent again
  std::atomic<uint64_t> parked_overflow{0};   // subscribing: refused while away and full

  // Every counter by name (the link entry's metadata keys).
  std::vector<std::pair<const char*, uint64_t>> fields() const;
};

inline void bump(std::atomic<uint64_t>& counter) {
  counter.fetch_add(1, std::memory_order_relaxed);
}

// Adds a link's registry entry `name` (kind endpoint, owned by the listener
// `owner`): metadata "role" and "address", and a probe that sets every
// counter of `counters` as metadata and the live numbers delivered =
// delivered + accepted, rejected, failed = released. Like the listener's,
// the probe holds the counters and its entry only weakly. Fails as
// Registry::add() does (a link of that name already has one: another
// connection with the same container id).
Result<std::shared_ptr<router::ComponentEntry>> reportLink(
    router::Registry& registry, const std::string& name, const std::string& owner,
    const std::string& role, const std::string& address,
    std::shared_ptr<const LinkCounters> counters);

// Adds the listener's registry entry `name` (kind service, state started):
// metadata "type" = "amqp-listener" and "address"; a probe that, whenever
// the registry takes a snapshot (the admin API, /metrics), sets every
// counter of statsFields() as metadata and the live numbers delivered =
// sent, failed = released, rejected = rejected + malformed +
// messages_too_large, queue length = awaiting_commit. The probe holds
// `counters` and `admission`, never the listener (the registry may still run
// it for a moment after the entry was removed), and its entry only weakly
// (the entry owns the probe). Fails as Registry::add() does (a name already
// taken).
Result<std::shared_ptr<router::ComponentEntry>> reportListener(
    router::Registry& registry, const std::string& name, const std::string& address,
    std::shared_ptr<const ListenerCounters> counters,
    std::shared_ptr<const AmqpAdmission> admission);

}  // namespace cepbus::services::amqp
