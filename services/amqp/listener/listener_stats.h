#pragma once

// The AMQP listener's statistics (services/amqp/listener/amqp_listener.h):
// the families it reports, the counters it keeps, the plain copy stats()
// returns, and the listener's registry entry; each link's counters, its
// stats scope and its own registry entry.
//
// ListenerCounters come from the listener's stats scope "amqp" {name}
// (kAmqpSchema) and are bumped by the listener's container threads and by
// its endpoint consumers on router threads, which may still run for a
// moment after the service is gone (an in-flight straight-through
// delivery): the listener shares them rather than owning them alone. The
// refusal counters are not among them: AmqpAdmission keeps those, and the
// scope reads them (reportRefusals()); stats() merges both.
//
// Thread-safety: every counter is a relaxed atomic; stats() and the
// registry entries' probes may run on any thread. A copy is a set of
// independent reads, not a consistent snapshot.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "bus/base/stats/store.h"
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
  uint64_t connections_refused = 0;      // connections beyond max-connections
  uint64_t sessions_refused = 0;         // sessions beyond max-sessions on their connection
  uint64_t links_refused = 0;            // links beyond max-links on their connection
  uint64_t durable_refused = 0;          // durable subscriptions beyond max-durable for their user
  uint64_t requests_refused = 0;         // requests beyond max-pending-requests on their connection
  uint64_t user_sessions_refused = 0;    // sessions beyond max-user-sessions for their user
  uint64_t user_links_refused = 0;       // links beyond max-user-links for their user
  uint64_t names_refused = 0;            // new names beyond max-names on their connection
  uint64_t user_names_refused = 0;       // new names beyond max-user-names for their user
  uint64_t unsettled_refused = 0;        // messages beyond max-unsettled on their connection
  uint64_t bytes_in_flight_refused = 0;  // messages beyond max-bytes-in-flight
  uint64_t user_unsettled_refused = 0;   // beyond max-user-unsettled for their user
  uint64_t user_bytes_in_flight_refused = 0;  // beyond max-user-bytes-in-flight
  // Rejected with amqp:link:message-size-exceeded: encoded beyond max-message-size.
  uint64_t messages_too_large = 0;
  // Connections ended because their client had not authenticated within
  // handshake-timeout (handshake_watch.h).
  uint64_t handshake_timeouts = 0;
};

// The families of the scope "amqp" {name}: the listener's counters and
// gauges (ListenerCounters) and its refusals (AmqpAdmission's).
namespace amqp_stats {
using stats::MetricSpec;
inline constexpr MetricSpec kConnections =
    MetricSpec::counter("connections", "AMQP connections accepted since start.");
inline constexpr MetricSpec kPublished =
    MetricSpec::counter("published", "Messages published on the router.");
inline constexpr MetricSpec kAccepted =
    MetricSpec::counter("accepted", "Unsettled messages accepted.");
inline constexpr MetricSpec kReleased = MetricSpec::counter(
    "released", "Unsettled messages released (admission or a target refused them).");
inline constexpr MetricSpec kRejected = MetricSpec::counter(
    "rejected", "Requests and replies rejected (no provider, an unknown id, ...).");
inline constexpr MetricSpec kMalformed = MetricSpec::counter(
    "malformed", "Messages that could not be mapped to events (rejected if unsettled).");
inline constexpr MetricSpec kCreditPauses =
    MetricSpec::counter("credit_pauses", "Times a publishing link stopped getting credit.");
inline constexpr MetricSpec kSent =
    MetricSpec::counter("sent", "Messages sent to subscribing links.");
inline constexpr MetricSpec kAcknowledged =
    MetricSpec::counter("acknowledged", "Sent messages the subscriber accepted.");
inline constexpr MetricSpec kNotAcknowledged = MetricSpec::counter(
    "not_acknowledged", "Sent messages the subscriber rejected, released or modified.");
inline constexpr MetricSpec kBufferFull = MetricSpec::counter(
    "buffer_full", "Deliveries refused because a subscriber's buffer was full.");
inline constexpr MetricSpec kRedelivered = MetricSpec::counter(
    "redelivered", "Sent messages marked as redeliveries (delivery-count > 0).");
inline constexpr MetricSpec kParkedOverflow = MetricSpec::counter(
    "parked_overflow", "Events refused because a subscription whose subscriber is away was full.");
inline constexpr MetricSpec kDurableRestored = MetricSpec::counter(
    "durable_restored", "Durable subscriptions re-created from the journal at start.");
inline constexpr MetricSpec kDurableNotRestored = MetricSpec::counter(
    "durable_not_restored",
    "Durable subscription records not re-created at start (corrupt, user gone, max-durable).");
inline constexpr MetricSpec kSubscriberWaits = MetricSpec::counter(
    "subscriber_waits", "Credit pauses because a subscriber's buffer was full.");
inline constexpr MetricSpec kSubscriberStalls = MetricSpec::counter(
    "subscriber_stalls", "Times a stuck subscriber stopped holding publishers back.");
inline constexpr MetricSpec kRequests = MetricSpec::counter(
    "requests", "Messages with a reply-to sent to a provider as in-out requests.");
inline constexpr MetricSpec kAnswers =
    MetricSpec::counter("answers", "Replies sent back to requesters.");
inline constexpr MetricSpec kFaults =
    MetricSpec::counter("faults", "Fault messages sent back (a fault, a rejection, a timeout).");
inline constexpr MetricSpec kAnswersUnroutable = MetricSpec::counter(
    "answers_unroutable", "Answers dropped: no link has their reply-to address.");
inline constexpr MetricSpec kProviderRequests =
    MetricSpec::counter("provider_requests", "In-out requests sent to AMQP providers.");
inline constexpr MetricSpec kProviderReplies = MetricSpec::counter(
    "provider_replies", "Answers (replies or faults) received from AMQP providers.");
inline constexpr MetricSpec kLateReplies =
    MetricSpec::counter("late_replies", "Answers to requests no longer open (rejected).");
inline constexpr MetricSpec kHandshakeTimeouts = MetricSpec::counter(
    "handshake_timeouts", "Connections ended: not authenticated within handshake-timeout.");
inline constexpr MetricSpec kConnectionsRefused =
    MetricSpec::counter("connections_refused", "Connections refused beyond max-connections.");
inline constexpr MetricSpec kSessionsRefused =
    MetricSpec::counter("sessions_refused", "Sessions refused beyond max-sessions.");
inline constexpr MetricSpec kLinksRefused =
    MetricSpec::counter("links_refused", "Links refused beyond max-links.");
inline constexpr MetricSpec kDurableRefused = MetricSpec::counter(
    "durable_refused", "Durable subscriptions refused beyond max-durable for their user.");
inline constexpr MetricSpec kRequestsRefused = MetricSpec::counter(
    "requests_refused", "Requests refused beyond max-pending-requests on their connection.");
inline constexpr MetricSpec kUserSessionsRefused = MetricSpec::counter(
    "user_sessions_refused", "Sessions refused beyond max-user-sessions for their user.");
inline constexpr MetricSpec kUserLinksRefused = MetricSpec::counter(
    "user_links_refused", "Links refused beyond max-user-links for their user.");
inline constexpr MetricSpec kNamesRefused = MetricSpec::counter(
    "names_refused", "New names (types, attributes, addresses) refused beyond max-names.");
inline constexpr MetricSpec kUserNamesRefused = MetricSpec::counter(
    "user_names_refused", "New names refused beyond max-user-names for their user.");
inline constexpr MetricSpec kUnsettledRefused = MetricSpec::counter(
    "unsettled_refused", "Messages refused beyond max-unsettled on their connection.");
inline constexpr MetricSpec kBytesInFlightRefused = MetricSpec::counter(
    "bytes_in_flight_refused", "Messages refused beyond max-bytes-in-flight on their connection.");
inline constexpr MetricSpec kUserUnsettledRefused = MetricSpec::counter(
    "user_unsettled_refused", "Messages refused beyond max-user-unsettled for their user.");
inline constexpr MetricSpec kUserBytesInFlightRefused =
    MetricSpec::counter("user_bytes_in_flight_refused",
                        "Messages refused beyond max-user-bytes-in-flight for their user.");
inline constexpr MetricSpec kMessagesTooLarge =
    MetricSpec::counter("messages_too_large", "Messages refused beyond max-message-size.");
inline constexpr MetricSpec kPausedLinks =
    MetricSpec::gauge("paused_links", "Publishing links waiting for backpressure to ease.");
inline constexpr MetricSpec kSubscriberLinks =
    MetricSpec::gauge("subscriber_links", "Subscribing links open.");
inline constexpr MetricSpec kPublishCredit =
    MetricSpec::gauge("publish_credit", "Credit granted to publishing links and not used yet.");
inline constexpr MetricSpec kParkedSubscriptions =
    MetricSpec::gauge("parked_subscriptions", "Durable subscriptions whose subscriber is away.");
inline constexpr MetricSpec kAwaitingCommit =
    MetricSpec::gauge("awaiting_commit", "Unsettled publishes waiting for their journal commit.");
inline constexpr MetricSpec kUnsettled =
    MetricSpec::gauge("unsettled", "Messages sent to subscribers and waiting for their outcome.");
inline constexpr MetricSpec kAll[] = {kConnections,
                                      kPublished,
                                      kAccepted,
                                      kReleased,
                                      kRejected,
                                      kMalformed,
                                      kCreditPauses,
                                      kSent,
                                      kAcknowledged,
                                      kNotAcknowledged,
                                      kBufferFull,
                                      kRedelivered,
                                      kParkedOverflow,
                                      kDurableRestored,
                                      kDurableNotRestored,
                                      kSubscriberWaits,
                                      kSubscriberStalls,
                                      kRequests,
                                      kAnswers,
                                      kFaults,
                                      kAnswersUnroutable,
                                      kProviderRequests,
                                      kProviderReplies,
                                      kLateReplies,
                                      kHandshakeTimeouts,
                                      kConnectionsRefused,
                                      kSessionsRefused,
                                      kLinksRefused,
                                      kDurableRefused,
                                      kRequestsRefused,
                                      kUserSessionsRefused,
                                      kUserLinksRefused,
                                      kNamesRefused,
                                      kUserNamesRefused,
                                      kUnsettledRefused,
                                      kBytesInFlightRefused,
                                      kUserUnsettledRefused,
                                      kUserBytesInFlightRefused,
                                      kMessagesTooLarge,
                                      kPausedLinks,
                                      kSubscriberLinks,
                                      kPublishCredit,
                                      kParkedSubscriptions,
                                      kAwaitingCommit,
                                      kUnsettled};
}  // namespace amqp_stats
inline constexpr stats::Schema kAmqpSchema{"amqp", amqp_stats::kAll};

// What the listener counts, one member per field of AmqpListenerStats but
// the refusals (AmqpAdmission's), taken from `scope` (kAmqpSchema; by
// default a store of its own). publish_credit may go below 0 for a moment:
// the listener adds each link's change in credit.
struct ListenerCounters {
  explicit ListenerCounters(stats::ScopePtr listener_scope = nullptr);

  // A copy of every counter, with `admission`'s refusals.
  AmqpListenerStats stats(const AmqpAdmission& admission) const;

  const stats::ScopePtr scope;
  stats::Counter& connections;
  stats::Counter& published;
  stats::Counter& accepted;
  stats::Counter& released;
  stats::Counter& malformed;
  stats::Counter& credit_pauses;
  stats::Counter& sent;
  stats::Counter& acknowledged;
  stats::Counter& not_acknowledged;
  stats::Counter& buffer_full;
  stats::Gauge& paused_links;
  stats::Gauge& subscriber_links;
  stats::Gauge& publish_credit;
  stats::Counter& redelivered;
  stats::Gauge& parked_subscriptions;
  stats::Counter& parked_overflow;
  stats::Counter& durable_restored;
  stats::Counter& durable_not_restored;
  stats::Counter& subscriber_waits;
  stats::Counter& subscriber_stalls;
  stats::Gauge& awaiting_commit;
  stats::Gauge& unsettled;
  stats::Counter& requests;
  stats::Counter& answers;
  stats::Counter& faults;
  stats::Counter& answers_unroutable;
  stats::Counter& provider_requests;
  stats::Counter& provider_replies;
  stats::Counter& late_replies;
  stats::Counter& rejected;
  stats::Counter& handshake_timeouts;
  stats::Counter& unsettled_refused;
  stats::Counter& bytes_in_flight_refused;
  stats::Counter& user_unsettled_refused;
  stats::Counter& user_bytes_in_flight_refused;
};

// Reports `admission`'s refusals in `scope` (kAmqpSchema), read whenever
// the store is.
void reportRefusals(stats::Scope& scope, std::shared_ptr<const AmqpAdmission> admission);

// The families of the scope "amqp_link" {name}: one link's counters.
namespace amqp_link_stats {
using stats::MetricSpec;
inline constexpr MetricSpec kAccepted =
    MetricSpec::counter("accepted", "Publishing: unsettled messages accepted.");
inline constexpr MetricSpec kRejected =
    MetricSpec::counter("rejected", "Publishing: messages rejected.");
inline constexpr MetricSpec kReleased =
    MetricSpec::counter("released", "Publishing: messages released.");
inline constexpr MetricSpec kCreditWithheld =
    MetricSpec::counter("credit_withheld", "Publishing: times its credit stopped.");
inline constexpr MetricSpec kDelivered =
    MetricSpec::counter("delivered", "Subscribing: messages sent.");
inline constexpr MetricSpec kAcknowledged =
    MetricSpec::counter("acknowledged", "Subscribing: sent messages the subscriber accepted.");
inline constexpr MetricSpec kNotAcknowledged = MetricSpec::counter(
    "not_acknowledged", "Subscribing: sent messages rejected, released or modified.");
inline constexpr MetricSpec kRedelivered =
    MetricSpec::counter("redelivered", "Subscribing: messages sent again.");
inline constexpr MetricSpec kParkedOverflow = MetricSpec::counter(
    "parked_overflow", "Subscribing: events refused while its subscriber was away and full.");
inline constexpr MetricSpec kAll[] = {kAccepted,        kRejected,    kReleased,
                                      kCreditWithheld,  kDelivered,   kAcknowledged,
                                      kNotAcknowledged, kRedelivered, kParkedOverflow};
}  // namespace amqp_link_stats
inline constexpr stats::Schema kAmqpLinkSchema{"amqp_link", amqp_link_stats::kAll};

// One link's counters. A subscription's live in its outbox, so a durable one
// keeps them while its subscriber is away, and links come and go under
// them: they are plain atomics, which the scope of the link's registration
// reads (reportLink()). Bumped by the container threads and by endpoint
// consumers on router threads.
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
};

inline void bump(std::atomic<uint64_t>& counter) {
  counter.fetch_add(1, std::memory_order_relaxed);
}

// Adds a link's registry entry `name` (kind endpoint, owned by the listener
// `owner`): metadata "role" and "address", and a probe that sets the live
// numbers delivered = delivered + accepted, rejected, failed = released.
// Returns the link's stats scope (kAmqpLinkSchema, {name}), which reads
// `counters`; the caller keeps it while the entry is registered. Like the
// listener's, the probe and the scope hold the counters, never the link.
// Fails as Registry::add() does (a link of that name already has one:
// another connection with the same container id).
Result<stats::ScopePtr> reportLink(router::Registry& registry, const std::string& name,
                                   const std::string& owner, const std::string& role,
                                   const std::string& address,
                                   std::shared_ptr<const LinkCounters> counters);

// Adds the listener's registry entry `name` (kind service, state started):
// metadata "type" = "amqp-listener" and "address"; a probe that, whenever
// the registry takes a snapshot, sets the live numbers delivered = sent,
// failed = released, rejected = rejected + malformed + messages_too_large,
// queue length = awaiting_commit. The probe holds `counters` and
// `admission`, never the listener (the registry may still run it for a
// moment after the entry was removed). Fails as Registry::add() does (a
// name already taken).
Result<std::shared_ptr<router::ComponentEntry>> reportListener(
    router::Registry& registry, const std::string& name, const std::string& address,
    std::shared_ptr<const ListenerCounters> counters,
    std::shared_ptr<const AmqpAdmission> admission);

}  // namespace cepbus::services::amqp
