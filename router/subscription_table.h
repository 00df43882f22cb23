#pragma once

// SubscriptionTable: every subscription of the router, indexed for matching:
// patterns without wildcards in a hash map keyed by address, wildcard
// patterns in a TopicTrie. The broker consults it only on a route-cache miss.

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bus/core/event_filter.h"
#include "bus/core/status.h"
#include "flows/delivery_target.h"
#include "router/topic_trie.h"

namespace cepbus::router {

struct Subscription {
  SubscriptionId id = 0;
  std::string pattern;
  std::shared_ptr<flows::DeliveryTarget> target;
  EventFilterPtr filter;  // null: every event published to a matching address
};

// Thread-safety: none; the broker serializes every call with its mutex.
// Ownership: shares ownership of the targets with the broker.
class SubscriptionTable {
 public:
  // InvalidArgument for a bad pattern (see router/topic.h) or a null target.
  Result<SubscriptionId> add(std::string_view pattern,
                             std::shared_ptr<flows::DeliveryTarget> target,
                             EventFilterPtr filter = nullptr);
  // False when there is no such subscription.
  bool remove(SubscriptionId id);
  // Removes every subscription of `target`; returns how many.
  size_t removeTarget(const flows::DeliveryTarget* target);

  // Appends every subscription whose pattern matches `address` (a valid
  // address), each once, in no particular order.
  void match(std::string_view address, std::vector<const Subscription*>& out) const;

  const Subscription* find(SubscriptionId id) const;
  size_t size() const { return subscriptions_.size(); }
  size_t wildcardCount() const { return wildcards_.size(); }

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };

  std::unordered_map<SubscriptionId, Subscription> subscriptions_;
  std::unordered_map<std::string, std::vector<SubscriptionId>, StringHash, std::equal_to<>> exact_;
  TopicTrie wildcards_;
  SubscriptionId next_id_ = 1;
};

}  // namespace cepbus::router
