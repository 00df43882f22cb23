#include "services/amqp/listener/broker_subscriptions.h"

#include <utility>

#include "router/topic.h"
#include "services/protocols/amqp/message_mapping.h"

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
        // A parked one ends when the bus stops or another attach replaces
        // it: not closed, so open() or the next start decides its record.
        (void)end(endpoint, *sub.outbox, &sub.owner, /*closed=*/false,
                  router::EndpointExit::kMayReturn);
      }) {}

Result<BrokerSubscriptions::Restored> BrokerSubscriptions::restore(
    std::unique_ptr<DurableStore> store, const AccessControl& access) {
  store_ = std::move(store);
  Result<DurableStore::Loaded> loaded = store_->load();
  if (!loaded) return loaded.status();
  Restored restored;
  restored.dropped = std::move(loaded->corrupt);
  for (const DurableRecord& record : loaded->records) {
    const std::string endpoint = subscriptionEndpoint(record.container_id, record.link_name);
    std::optional<std::string> why;
    if (!access.maySubscribe(record.user, record.pattern)) {
      why = record.user.empty()
                ? std::string("anonymous clients are no longer allowed")
                : "user \"" + record.user + "\" is not declared or may not subscribe to it";
    } else if (auto refusal = admission_->admitDurable(record.owner)) {
      why = std::move(*refusal);
    } else {
      std::shared_ptr<SubscriberOutbox> outbox = newOutbox();
      if (auto refused = addEndpoint(endpoint, record.container_id, record.link_name,
                                     record.pattern, outbox)) {
        admission_->durableEnded(record.owner);
        why = std::move(refused->description);
      } else {
        parking_.park(endpoint, DurableSubscription{record.pattern, outbox, record.owner}, {});
        recorded_.insert(endpoint);
        ++restored.restored;
        continue;
      }
    }
    std::string line = "durable subscription " + endpoint + " on \"" + record.pattern +
                       "\" not restored: " + *why + "; its record is removed";
    if (Status removed = store_->remove(endpoint); !removed) {
      line += " (failed: " + removed.message() + ")";
    }
    restored.dropped.push_back(std::move(line));
  }
  counters_->durable_restored.add(restored.restored);
  counters_->durable_not_restored.add(restored.dropped.size());
  return restored;
}

std::variant<BrokerSubscriptions::Opened, BrokerSubscriptions::Refusal> BrokerSubscriptions::open(
    const std::string& container_id, const std::string& link_name, const std::string& pattern,
    bool durable, const std::string& user, std::string owner, SubscriberOutbox::Wake wake) {
  Opened opened{subscriptionEndpoint(container_id, link_name), nullptr, std::move(owner)};
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
  std::shared_ptr<SubscriberOutbox> outbox = newOutbox();
  outbox->bind(std::move(wake));
  std::optional<Refusal> refused =
      addEndpoint(opened.endpoint, container_id, link_name, pattern, outbox);
  if (!refused) {
    Status kept = keepRecord(opened.endpoint, durable,
                             DurableRecord{container_id, link_name, pattern, user, opened.owner});
    if (!kept) {
      outbox->close();
      (void)broker_.removeEndpoint(opened.endpoint);  // undoing; the store's error is the one
      refused = Refusal{kInternalError, kept.message()};
    }
  }
  if (refused) {
    if (!opened.owner.empty()) admission_->durableEnded(opened.owner);
    return std::move(*refused);
  }
  opened.outbox = std::move(outbox);
  return opened;
}

std::optional<BrokerSubscriptions::Refusal> BrokerSubscriptions::addEndpoint(
    const std::string& endpoint, const std::string& container_id, const std::string& link_name,
    const std::string& pattern, const std::shared_ptr<SubscriberOutbox>& outbox) {
  Status added = broker_.addEndpoint(
      endpoint,
      [outbox](const flows::Exchange& ex, flows::DeliveryContext& context) {
        return outbox->offer(ex, context);
      },
      config_.owner);
  if (!added) {
    outbox->close();
    if (added.code() == Status::Code::kAlreadyExists) {
      return Refusal{kResourceLocked, "link \"" + link_name + "\" of container \"" + container_id +
                                          "\" is already attached"};
    }
    return Refusal{kInternalError, added.message()};
  }
  auto subscribed = broker_.subscribe(endpoint, pattern);
  if (!subscribed) {
    outbox->close();
    (void)broker_.removeEndpoint(endpoint);  // undoing; the subscription's error is the one
    return Refusal{kInvalidField, subscribed.status().message()};
  }
  // A subscriber of a plain address is also its provider for in-out
  // requests, unless something else already provides it (AlreadyExists,
  // the expected refusal).
  if (!router::hasWildcard(pattern)) (void)broker_.provide(pattern, endpoint);
  return std::nullopt;
}

Status BrokerSubscriptions::keepRecord(const std::string& endpoint, bool durable,
                                       const DurableRecord& record) {
  if (!store_) return Status::ok();
  if (durable) {
    Status recorded = store_->record(record);
    if (recorded) recorded_.insert(endpoint);
    return recorded;
  }
  // A durable subscription of this name ended without its link being
  // closed (a different attach replaced it while parked): its record goes.
  if (recorded_.erase(endpoint) == 0) return Status::ok();
  return store_->remove(endpoint);
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

Status BrokerSubscriptions::end(const std::string& endpoint, SubscriberOutbox& outbox,
                                const std::string* durable_owner, bool closed,
                                router::EndpointExit exit) {
  if (durable_owner != nullptr) admission_->durableEnded(*durable_owner);
  outbox.close();
  if (!endpoint.empty()) (void)broker_.removeEndpoint(endpoint, exit);
  if (!closed || durable_owner == nullptr || !store_ || recorded_.erase(endpoint) == 0) {
    return Status::ok();
  }
  return store_->remove(endpoint);
}

void BrokerSubscriptions::endParked() { parking_.endAll(); }

std::shared_ptr<SubscriberOutbox> BrokerSubscriptions::newOutbox() const {
  return std::make_shared<SubscriberOutbox>(config_.subscriber_buffer, config_.durable_buffer,
                                            config_.sender, counters_);
}

}  // namespace cepbus::services::amqp
