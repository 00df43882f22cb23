#include "services/amqp/listener/durable_parking.h"

#include <utility>

namespace cepbus::services::amqp {

DurableParking::DurableParking(std::shared_ptr<ListenerCounters> counters, End end)
    : counters_(std::move(counters)), end_(std::move(end)) {}

void DurableParking::park(const std::string& endpoint, DurableSubscription subscription,
                          std::vector<OutboxEntry> unsettled) {
  // Unbound first: what the flows redeliver from here on counts against
  // the away capacity.
  subscription.outbox->unbind();
  subscription.outbox->returnUnsettled(std::move(unsettled), /*keep=*/true);
  parked_[endpoint] = std::move(subscription);
  counters_->parked_subscriptions.inc();
}

std::optional<DurableSubscription> DurableParking::resume(const std::string& endpoint,
                                                          const std::string& pattern,
                                                          bool durable) {
  auto parked = parked_.find(endpoint);
  if (parked == parked_.end()) return std::nullopt;
  std::optional<DurableSubscription> resumed;
  if (parked->second.pattern == pattern && durable) {
    resumed = std::move(parked->second);
  } else {
    end_(endpoint, parked->second);
  }
  parked_.erase(parked);
  counters_->parked_subscriptions.dec();
  return resumed;
}

void DurableParking::endAll() {
  for (auto& [endpoint, subscription] : parked_) end_(endpoint, subscription);
  counters_->parked_subscriptions.sub(static_cast<int64_t>(parked_.size()));
  parked_.clear();
}

}  // namespace cepbus::services::amqp
