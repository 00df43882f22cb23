#include "services/amqp/listener/subscriber_deliveries.h"

#include <algorithm>
#include <utility>

namespace cepbus::services::amqp {

SubscriberDeliveries::SubscriberDeliveries(std::shared_ptr<SubscriberOutbox> outbox,
                                           std::shared_ptr<ListenerCounters> counters)
    : outbox_(std::move(outbox)), counters_(std::move(counters)) {}

int SubscriberDeliveries::sendable(int credit, int unsent) {
  const size_t in_flight = std::max(unsettled_.size(), static_cast<size_t>(unsent));
  return in_flight_.take(credit, in_flight, outbox_->capacity());
}

void SubscriberDeliveries::sent(const proton::tracker& tracker, OutboxEntry entry, bool settled) {
  counters_->sent.inc();
  bump(outbox_->stats().delivered);
  if (settled) {
    if (entry.ack) entry.ack(Status::ok());
    return;
  }
  unsettled_.emplace(tracker, std::move(entry));
  counters_->unsettled.inc();
}

void SubscriberDeliveries::settle(const proton::tracker& tracker, Outcome outcome,
                                  const std::function<void()>& drain) {
  bump(outcome == Outcome::kAccepted ? outbox_->stats().acknowledged
                                     : outbox_->stats().not_acknowledged);
  auto it = unsettled_.find(tracker);
  if (it == unsettled_.end()) return;
  OutboxEntry entry = std::move(it->second);
  unsettled_.erase(it);
  counters_->unsettled.dec();
  if (in_flight_.capped()) drain();
  if (outcome != Outcome::kReleased) {
    if (entry.ack) entry.ack(Status::ok());
    return;
  }
  if (entry.ack) {
    entry.ack(Status::unavailable("the AMQP subscriber released it"));
    return;
  }
  std::vector<OutboxEntry> back;
  back.push_back(std::move(entry));
  outbox_->putBack(std::move(back));
  drain();
}

std::vector<OutboxEntry> SubscriberDeliveries::takeUnsettled() {
  std::vector<OutboxEntry> out;
  for (auto& [tracker, entry] : unsettled_) out.push_back(std::move(entry));
  counters_->unsettled.sub(static_cast<int64_t>(out.size()));
  unsettled_.clear();
  return out;
}

}  // namespace cepbus::services::amqp
