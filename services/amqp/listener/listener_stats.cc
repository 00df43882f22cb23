#include "services/amqp/listener/listener_stats.h"

#include <utility>

namespace cepbus::services::amqp {

AmqpListenerStats ListenerCounters::stats(const AmqpAdmission& admission) const {
  const ListenerCounters& c = *this;
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  AmqpListenerStats s;
  s.connections = get(c.connections);
  s.published = get(c.published);
  s.accepted = get(c.accepted);
  s.released = get(c.released);
  s.malformed = get(c.malformed);
  s.credit_pauses = get(c.credit_pauses);
  s.sent = get(c.sent);
  s.acknowledged = get(c.acknowledged);
  s.not_acknowledged = get(c.not_acknowledged);
  s.buffer_full = get(c.buffer_full);
  s.paused_links = get(c.paused_links);
  s.subscriber_links = get(c.subscriber_links);
  s.publish_credit = static_cast<uint64_t>(c.publish_credit.load(std::memory_order_relaxed));
  s.redelivered = get(c.redelivered);
  s.parked_subscriptions = get(c.parked_subscriptions);
  s.parked_overflow = get(c.parked_overflow);
  s.durable_restored = get(c.durable_restored);
  s.durable_not_restored = get(c.durable_not_restored);
  s.subscriber_waits = get(c.subscriber_waits);
  s.subscriber_stalls = get(c.subscriber_stalls);
  s.unsettled = get(c.unsettled);
  s.awaiting_commit = get(c.awaiting_commit);
  s.rejected = get(c.rejected);
  s.requests = get(c.requests);
  s.answers = get(c.answers);
  s.faults = get(c.faults);
  s.answers_unroutable = get(c.answers_unroutable);
  s.provider_requests = get(c.provider_requests);
  s.provider_replies = get(c.provider_replies);
  s.late_replies = get(c.late_replies);
  s.handshake_timeouts = get(c.handshake_timeouts);
  const AmqpRefusals refused = admission.refusals();
  s.connections_refused = refused.connections;
  s.sessions_refused = refused.sessions;
  s.links_refused = refused.links;
  s.durable_refused = refused.durable;
  s.requests_refused = refused.requests;
  s.messages_too_large = refused.messages_too_large;
  return s;
}

std::vector<std::pair<std::string, uint64_t>> statsFields(const AmqpListenerStats& s) {
  return {{"connections", s.connections},
          {"published", s.published},
          {"accepted", s.accepted},
          {"released", s.released},
          {"rejected", s.rejected},
          {"malformed", s.malformed},
          {"credit_pauses", s.credit_pauses},
          {"sent", s.sent},
          {"acknowledged", s.acknowledged},
          {"not_acknowledged", s.not_acknowledged},
          {"buffer_full", s.buffer_full},
          {"paused_links", s.paused_links},
          {"subscriber_links", s.subscriber_links},
          {"publish_credit", s.publish_credit},
          {"redelivered", s.redelivered},
          {"parked_subscriptions", s.parked_subscriptions},
          {"parked_overflow", s.parked_overflow},
          {"durable_restored", s.durable_restored},
          {"durable_not_restored", s.durable_not_restored},
          {"subscriber_waits", s.subscriber_waits},
          {"subscriber_stalls", s.subscriber_stalls},
          {"awaiting_commit", s.awaiting_commit},
          {"unsettled", s.unsettled},
          {"requests", s.requests},
          {"answers", s.answers},
          {"faults", s.faults},
          {"answers_unroutable", s.answers_unroutable},
          {"provider_requests", s.provider_requests},
          {"provider_replies", s.provider_replies},
          {"late_replies", s.late_replies},
          {"connections_refused", s.connections_refused},
          {"sessions_refused", s.sessions_refused},
          {"links_refused", s.links_refused},
          {"durable_refused", s.durable_refused},
          {"requests_refused", s.requests_refused},
          {"messages_too_large", s.messages_too_large},
          {"handshake_timeouts", s.handshake_timeouts}};
}

std::vector<std::pair<const char*, uint64_t>> LinkCounters::fields() const {
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  return {{"accepted", get(accepted)},
          {"rejected", get(rejected)},
          {"released", get(released)},
          {"credit_withheld", get(credit_withheld)},
          {"delivered", get(delivered)},
          {"acknowledged", get(acknowledged)},
          {"not_acknowledged", get(not_acknowledged)},
          {"redelivered", get(redelivered)},
          {"parked_overflow", get(parked_overflow)}};
}

Result<std::shared_ptr<router::ComponentEntry>> reportLink(
    router::Registry& registry, const std::string& name, const std::string& owner,
    const std::string& role, const std::string& address,
    std::shared_ptr<const LinkCounters> counters) {
  auto added = registry.add(name, router::ComponentKind::kEndpoint, owner);
  if (!added) return added.status();
  std::shared_ptr<router::ComponentEntry> entry = *added;
  entry->setMetadata("role", role);
  entry->setMetadata("address", address);
  const std::weak_ptr<router::ComponentEntry> weak = entry;
  entry->setProbe([weak, counters = std::move(counters)](router::LiveNumbers& numbers) {
    auto e = weak.lock();
    if (!e) return;
    for (const auto& [key, value] : counters->fields()) e->setMetadata(key, std::to_string(value));
    numbers.delivered = counters->delivered.load(std::memory_order_relaxed) +
                        counters->accepted.load(std::memory_order_relaxed);
    numbers.rejected = counters->rejected.load(std::memory_order_relaxed);
    numbers.failed = counters->released.load(std::memory_order_relaxed);
  });
  entry->setState(router::ComponentState::kStarted);
  return entry;
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
  const std::weak_ptr<router::ComponentEntry> weak = entry;
  entry->setProbe([weak, counters = std::move(counters),
                   admission = std::move(admission)](router::LiveNumbers& numbers) {
    auto e = weak.lock();
    if (!e) return;
    const AmqpListenerStats s = counters->stats(*admission);
    numbers.delivered = s.sent;
    numbers.failed = s.released;
    numbers.rejected = s.rejected + s.malformed + s.messages_too_large;
    numbers.queue_length = s.awaiting_commit;
    for (const auto& [key, value] : statsFields(s)) e->setMetadata(key, std::to_string(value));
  });
  entry->setState(router::ComponentState::kStarted);
  return entry;
}

}  // namespace cepbus::services::amqp
