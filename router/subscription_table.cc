#include "router/subscription_table.h"

#include <algorithm>
#include <utility>

#include "router/topic.h"

namespace cepbus::router {

Result<SubscriptionId> SubscriptionTable::add(std::string_view pattern,
                                              std::shared_ptr<flows::DeliveryTarget> target,
                                              EventFilterPtr filter) {
  if (Status s = validatePattern(pattern); !s.isOk()) return s;
  if (target == nullptr)
    return Status::invalidArgument("subscription to '" + std::string(pattern) + "' has no target");
  const SubscriptionId id = next_id_++;
  if (hasWildcard(pattern)) {
    wildcards_.insert(normalizedPattern(pattern), id);
  } else {
    auto it = exact_.find(pattern);
    if (it == exact_.end())
      it = exact_.emplace(std::string(pattern), std::vector<SubscriptionId>{}).first;
    it->second.push_back(id);
  }
  subscriptions_.emplace(
      id, Subscription{id, std::string(pattern), std::move(target), std::move(filter)});
  return id;
}

bool SubscriptionTable::remove(SubscriptionId id) {
  auto it = subscriptions_.find(id);
  if (it == subscriptions_.end()) return false;
  const std::string& pattern = it->second.pattern;
  if (hasWildcard(pattern)) {
    wildcards_.erase(normalizedPattern(pattern), id);
  } else {
    auto entry = exact_.find(pattern);
    std::erase(entry->second, id);
    if (entry->second.empty()) exact_.erase(entry);
  }
  subscriptions_.erase(it);
  return true;
}

size_t SubscriptionTable::removeTarget(const flows::DeliveryTarget* target) {
  std::vector<SubscriptionId> ids;
  for (const auto& [id, subscription] : subscriptions_) {
    if (subscription.target.get() == target) ids.push_back(id);
  }
  for (SubscriptionId id : ids) remove(id);
  return ids.size();
}

void SubscriptionTable::match(std::string_view address,
                              std::vector<const Subscription*>& out) const {
  if (auto it = exact_.find(address); it != exact_.end()) {
    for (SubscriptionId id : it->second) out.push_back(&subscriptions_.at(id));
  }
  if (wildcards_.size() == 0) return;
  std::vector<SubscriptionId> ids;
  wildcards_.match(splitTopic(address), ids);
  for (SubscriptionId id : ids) out.push_back(&subscriptions_.at(id));
}

const Subscription* SubscriptionTable::find(SubscriptionId id) const {
  auto it = subscriptions_.find(id);
  return it == subscriptions_.end() ? nullptr : &it->second;
}

}  // namespace cepbus::router
