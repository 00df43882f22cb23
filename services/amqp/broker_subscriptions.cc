#include "services/amqp/broker_subscriptions.h"

#include <utility>

#include "router/topic.h"
#include "services/amqp/message_mapping.h"

namespace cepbus::services::amqp {
namespace {

constexpr char kInternalError[] = "amqp:internal-error";
constexpr char kResourceLocked[] = "amqp:resource-locked";

}  // namespace

BrokerSubscriptions::BrokerSubscriptions(router::Broker& broker,
                                         std::shared_ptr<AmqpAdmission> admission,
                                         std::shared_ptr<ListenerCounters> counters,
                                         SubscriptionConfig config)
    : broker_(broker),
      admission_(std::move(admission)),
      counters_(std::move(counters)),
      config_(std::move(config)),
      parking_(counters_, [this](const std::string& endpoint, DurableSubscription& sub) {
        end(endpoint, *sub.outbox, &sub.owner);
      }) {}

std::variant<BrokerSubscriptions::Opened, BrokerSubscriptions::Refusal> BrokerSubscriptions::open(
    const std::string& container_id, const std::string& link_name, const std::string& pattern,
    bool durable, std::string owner, SubscriberOutbox::Wake wake) {
  Opened opened{"amqp:" + container_id + "/" + link_name, nullptr, std::move(owner)};
  if (auto parked = parking_.resume(opened.endpoint, pattern, durable)) {
    opened.outbox = std::move(parked->outbox);
    opened.owner = std::move(parked->owner);
    opened.outbox->bind(std::move(wake));
    return opened;
  }
  if (durable) {
    if (auto refusal = admission_->admitDurable(opened.owner)) {
      return Refusal{kResourceLimitExceeded, std::move(*refusal)};
    }
  }
  // From here on a refusal undoes the durable admission.
  auto refuse = [&](std::string condition, std::string description) {
    if (!opened.owner.empty()) admission_->durableEnded(opened.owner);
    return Refusal{std::move(condition), std::move(description)};
  };
  std::shared_ptr<SubscriberOutbox> outbox = newOutbox();
  outbox->bind(std::move(wake));
  Status added = broker_.addEndpoint(
      opened.endpoint, [outbox](const flows::Exchange& ex) { return outbox->offer(ex); },
      config_.owner);
  if (!added) {
    outbox->close();
    if (added.code() == Status::Code::kAlreadyExists) {
      return refuse(kResourceLocked, "link \"" + link_name + "\" of container \"" + container_id +
                                         "\" is already attached");
    }
    return refuse(kInternalError, added.message());
  }
  auto subscribed = broker_.subscribe(opened.endpoint, pattern);
  if (!subscribed) {
    outbox->close();
    (void)broker_.removeEndpoint(opened.endpoint);  // undoing; the subscription's error is the one
    return refuse(kInvalidField, subscribed.status().message());
  }
  // A subscriber of a plain address is also its provider for in-out
  // requests, unless something else already provides it (AlreadyExists,
  // the expected refusal).
  if (!router::hasWildcard(pattern)) (void)broker_.provide(pattern, opened.endpoint);
  opened.outbox = std::move(outbox);
  return opened;
}

std::shared_ptr<SubscriberOutbox> BrokerSubscriptions::replyOutbox(
    SubscriberOutbox::Wake wake) const {
  std::shared_ptr<SubscriberOutbox> outbox = newOutbox();
  outbox->bind(std::move(wake));
  return outbox;
}

void BrokerSubscriptions::park(const std::string& endpoint, DurableSubscription subscription,
                               std::vector<OutboxEntry> unsettled) {
  parking_.park(endpoint, std::move(subscription), std::move(unsettled));
}

void BrokerSubscriptions::end(const std::string& endpoint, SubscriberOutbox& outbox,
                              const std::string* durable_owner) {
  if (durable_owner != nullptr) admission_->durableEnded(*durable_owner);
  outbox.close();
  if (!endpoint.empty()) (void)broker_.removeEndpoint(endpoint);
}

void BrokerSubscriptions::endParked() { parking_.endAll(); }

std::shared_ptr<SubscriberOutbox> BrokerSubscriptions::newOutbox() const {
  return std::make_shared<SubscriberOutbox>(config_.subscriber_buffer, config_.durable_buffer,
                                            config_.sender, counters_);
}

}  // namespace cepbus::services::amqp
