#include "services/amqp/listener/listener_stats.h"

#include <utility>

namespace cepbus::services::amqp {

namespace a = amqp_stats;

ListenerCounters::ListenerCounters(stats::ScopePtr listener_scope)
    : scope(listener_scope != nullptr ? std::move(listener_scope)
                                      : stats::Store().scope(kAmqpSchema)),
      connections(scope->counter(a::kConnections)),
      published(scope->counter(a::kPublished)),
      accepted(scope->counter(a::kAccepted)),
      released(scope->counter(a::kReleased)),
      malformed(scope->counter(a::kMalformed)),
      credit_pauses(scope->counter(a::kCreditPauses)),
      sent(scope->counter(a::kSent)),
      acknowledged(scope->counter(a::kAcknowledged)),
      not_acknowledged(scope->counter(a::kNotAcknowledged)),
      buffer_full(scope->counter(a::kBufferFull)),
      paused_links(scope->gauge(a::kPausedLinks)),
      subscriber_links(scope->gauge(a::kSubscriberLinks)),
      publish_credit(scope->gauge(a::kPublishCredit)),
      redelivered(scope->counter(a::kRedelivered)),
      parked_subscriptions(scope->gauge(a::kParkedSubscriptions)),
      parked_overflow(scope->counter(a::kParkedOverflow)),
      durable_restored(scope->counter(a::kDurableRestored)),
      durable_not_restored(scope->counter(a::kDurableNotRestored)),
      subscriber_waits(scope->counter(a::kSubscriberWaits)),
      subscriber_stalls(scope->counter(a::kSubscriberStalls)),
      awaiting_commit(scope->gauge(a::kAwaitingCommit)),
      unsettled(scope->gauge(a::kUnsettled)),
      requests(scope->counter(a::kRequests)),
      answers(scope->counter(a::kAnswers)),
      faults(scope->counter(a::kFaults)),
      answers_unroutable(scope->counter(a::kAnswersUnroutable)),
      provider_requests(scope->counter(a::kProviderRequests)),
      provider_replies(scope->counter(a::kProviderReplies)),
      late_replies(scope->counter(a::kLateReplies)),
      rejected(scope->counter(a::kRejected)),
      handshake_timeouts(scope->counter(a::kHandshakeTimeouts)),
      unsettled_refused(scope->counter(a::kUnsettledRefused)),
      bytes_in_flight_refused(scope->counter(a::kBytesInFlightRefused)),
      user_unsettled_refused(scope->counter(a::kUserUnsettledRefused)),
      user_bytes_in_flight_refused(scope->counter(a::kUserBytesInFlightRefused)) {}

AmqpListenerStats ListenerCounters::stats(const AmqpAdmission& admission) const {
  auto gauge = [](const stats::Gauge& g) { return static_cast<uint64_t>(g.value()); };
  AmqpListenerStats s;
  s.connections = connections.value();
  s.published = published.value();
  s.accepted = accepted.value();
  s.released = released.value();
  s.malformed = malformed.value();
  s.credit_pauses = credit_pauses.value();
  s.sent = sent.value();
  s.acknowledged = acknowledged.value();
  s.not_acknowledged = not_acknowledged.value();
  s.buffer_full = buffer_full.value();
  s.paused_links = gauge(paused_links);
  s.subscriber_links = gauge(subscriber_links);
  s.publish_credit = gauge(publish_credit);
  s.redelivered = redelivered.value();
  s.parked_subscriptions = gauge(parked_subscriptions);
  s.parked_overflow = parked_overflow.value();
  s.durable_restored = durable_restored.value();
  s.durable_not_restored = durable_not_restored.value();
  s.subscriber_waits = subscriber_waits.value();
  s.subscriber_stalls = subscriber_stalls.value();
  s.unsettled = gauge(unsettled);
  s.awaiting_commit = gauge(awaiting_commit);
  s.rejected = rejected.value();
  s.requests = requests.value();
  s.answers = answers.value();
  s.faults = faults.value();
  s.answers_unroutable = answers_unroutable.value();
  s.provider_requests = provider_requests.value();
  s.provider_replies = provider_replies.value();
  s.late_replies = late_replies.value();
  s.handshake_timeouts = handshake_timeouts.value();
  s.unsettled_refused = unsettled_refused.value();
  s.bytes_in_flight_refused = bytes_in_flight_refused.value();
  s.user_unsettled_refused = user_unsettled_refused.value();
  s.user_bytes_in_flight_refused = user_bytes_in_flight_refused.value();
  const AmqpRefusals refused = admission.refusals();
  s.connections_refused = refused.connections;
  s.sessions_refused = refused.sessions;
  s.links_refused = refused.links;
  s.durable_refused = refused.durable;
  s.requests_refused = refused.requests;
  s.user_sessions_refused = refused.user_sessions;
  s.user_links_refused = refused.user_links;
  s.names_refused = refused.names;
  s.user_names_refused = refused.user_names;
  s.messages_too_large = refused.messages_too_large;
  return s;
}

void reportRefusals(stats::Scope& scope, std::shared_ptr<const AmqpAdmission> admission) {
  const auto refused = [admission = std::move(admission)](uint64_t AmqpRefusals::*field) {
    return [admission, field] { return admission->refusals().*field; };
  };
  scope.counter(a::kConnectionsRefused, refused(&AmqpRefusals::connections));
  scope.counter(a::kSessionsRefused, refused(&AmqpRefusals::sessions));
  scope.counter(a::kLinksRefused, refused(&AmqpRefusals::links));
  scope.counter(a::kDurableRefused, refused(&AmqpRefusals::durable));
  scope.counter(a::kRequestsRefused, refused(&AmqpRefusals::requests));
  scope.counter(a::kUserSessionsRefused, refused(&AmqpRefusals::user_sessions));
  scope.counter(a::kUserLinksRefused, refused(&AmqpRefusals::user_links));
  scope.counter(a::kNamesRefused, refused(&AmqpRefusals::names));
  scope.counter(a::kUserNamesRefused, refused(&AmqpRefusals::user_names));
  scope.counter(a::kMessagesTooLarge, refused(&AmqpRefusals::messages_too_large));
}

Result<stats::ScopePtr> reportLink(router::Registry& registry, const std::string& name,
                                   const std::string& owner, const std::string& role,
                                   const std::string& address,
                                   std::shared_ptr<const LinkCounters> counters) {
  auto added = registry.add(name, router::ComponentKind::kEndpoint, owner);
  if (!added) return added.status();
  std::shared_ptr<router::ComponentEntry> entry = *added;
  entry->setMetadata("role", role);
  entry->setMetadata("address", address);
  entry->setProbe([counters](router::LiveNumbers& numbers) {
    numbers.delivered = counters->delivered.load(std::memory_order_relaxed) +
                        counters->accepted.load(std::memory_order_relaxed);
    numbers.rejected = counters->rejected.load(std::memory_order_relaxed);
    numbers.failed = counters->released.load(std::memory_order_relaxed);
  });
  entry->setState(router::ComponentState::kStarted);

  stats::ScopePtr scope = registry.stats().scope(kAmqpLinkSchema, {{"name", name}});
  namespace l = amqp_link_stats;
  const auto read = [&counters](const std::atomic<uint64_t> LinkCounters::*field) {
    return [counters, field] { return ((*counters).*field).load(std::memory_order_relaxed); };
  };
  scope->counter(l::kAccepted, read(&LinkCounters::accepted));
  scope->counter(l::kRejected, read(&LinkCounters::rejected));
  scope->counter(l::kReleased, read(&LinkCounters::released));
  scope->counter(l::kCreditWithheld, read(&LinkCounters::credit_withheld));
  scope->counter(l::kDelivered, read(&LinkCounters::delivered));
  scope->counter(l::kAcknowledged, read(&LinkCounters::acknowledged));
  scope->counter(l::kNotAcknowledged, read(&LinkCounters::not_acknowledged));
  scope->counter(l::kRedelivered, read(&LinkCounters::redelivered));
  scope->counter(l::kParkedOverflow, read(&LinkCounters::parked_overflow));
  return scope;
}

Result<std::shared_ptr<router::ComponentEntry>> reportListener(
    router::Registry& registry, const std::string& name, const std::string& address,
    std::shared_ptr<const ListenerCounters> counters,
    std::shared_ptr<const AmqpAdmission> admission) {
  auto added = registry.add(name, router::ComponentKind::kService);
  if (!added) return added.status();
  std::shared_ptr<router::ComponentEntry> entry = *added;
  entry->setMetadata("type", "amqp-listener");
  entry->setMetadata("address", address);
  entry->setProbe([counters = std::move(counters),
                   admission = std::move(admission)](router::LiveNumbers& numbers) {
    const AmqpListenerStats s = counters->stats(*admission);
    numbers.delivered = s.sent;
    numbers.failed = s.released;
    numbers.rejected = s.rejected + s.malformed + s.messages_too_large;
    numbers.queue_length = s.awaiting_commit;
  });
  entry->setState(router::ComponentState::kStarted);
  return entry;
}

}  // namespace cepbus::services::amqp
