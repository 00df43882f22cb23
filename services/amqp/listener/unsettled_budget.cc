#include "services/amqp/listener/unsettled_budget.h"

#include <algorithm>

namespace cepbus::services::amqp {

std::optional<UnsettledBudget::Refusal> UnsettledBudget::hold(uint64_t bytes) {
  if (deliveries_ >= max_deliveries_) {
    return Refusal{Limit::kDeliveries, "unsettled deliveries per connection (max-unsettled): " +
                                           std::to_string(max_deliveries_) + " reached"};
  }
  if (bytes_ + bytes > max_bytes_) {
    return Refusal{Limit::kBytes, "bytes in flight per connection (max-bytes-in-flight): " +
                                      std::to_string(bytes_) + " held, a message of " +
                                      std::to_string(bytes) + " bytes would pass " +
                                      std::to_string(max_bytes_)};
  }
  ++deliveries_;
  bytes_ += bytes;
  return std::nullopt;
}

void UnsettledBudget::settled(uint64_t bytes) {
  deliveries_ -= std::min<uint64_t>(deliveries_, 1);
  bytes_ -= std::min(bytes_, bytes);
}

}  // namespace cepbus::services::amqp
