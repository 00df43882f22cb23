#include "services/amqp/listener/unsettled_budget.h"

#include <algorithm>

namespace cepbus::services::amqp {
namespace {

// The refusal of a delivery of `bytes` beyond `max_deliveries` or
// `max_bytes`, given what is held, by a connection or (`user`) a user.
std::optional<UnsettledRefusal> refusal(uint64_t deliveries, uint64_t held_bytes, uint64_t bytes,
                                        uint64_t max_deliveries, uint64_t max_bytes, bool user) {
  const char* whose = user ? "user" : "connection";
  const char* prefix = user ? "max-user-" : "max-";
  if (deliveries >= max_deliveries) {
    return UnsettledRefusal{user ? UnsettledLimit::kUserDeliveries : UnsettledLimit::kDeliveries,
                            std::string("unsettled deliveries per ") + whose + " (" + prefix +
                                "unsettled): " + std::to_string(max_deliveries) + " reached"};
  }
  if (held_bytes + bytes > max_bytes) {
    return UnsettledRefusal{user ? UnsettledLimit::kUserBytes : UnsettledLimit::kBytes,
                            std::string("bytes in flight per ") + whose + " (" + prefix +
                                "bytes-in-flight): " + std::to_string(held_bytes) +
                                " held, a message of " + std::to_string(bytes) +
                                " bytes would pass " + std::to_string(max_bytes)};
  }
  return std::nullopt;
}

}  // namespace

std::optional<UnsettledRefusal> UserUnsettledBudget::hold(uint64_t bytes) {
  MutexLock lock(mu_);
  if (auto refused = refusal(deliveries_, bytes_, bytes, max_deliveries_, max_bytes_, true)) {
    return refused;
  }
  ++deliveries_;
  bytes_ += bytes;
  return std::nullopt;
}

void UserUnsettledBudget::settled(uint64_t bytes) {
  MutexLock lock(mu_);
  deliveries_ -= std::min<uint64_t>(deliveries_, 1);
  bytes_ -= std::min(bytes_, bytes);
}

uint64_t UserUnsettledBudget::deliveries() const {
  MutexLock lock(mu_);
  return deliveries_;
}

uint64_t UserUnsettledBudget::bytes() const {
  MutexLock lock(mu_);
  return bytes_;
}

std::optional<UnsettledRefusal> UnsettledBudget::hold(uint64_t bytes) {
  if (auto refused = refusal(deliveries_, bytes_, bytes, max_deliveries_, max_bytes_, false)) {
    return refused;
  }
  if (user_) {
    if (auto refused = user_->hold(bytes)) return refused;
  }
  ++deliveries_;
  bytes_ += bytes;
  return std::nullopt;
}

void UnsettledBudget::settled(uint64_t bytes) {
  deliveries_ -= std::min<uint64_t>(deliveries_, 1);
  bytes_ -= std::min(bytes_, bytes);
  if (user_) user_->settled(bytes);
}

}  // namespace cepbus::services::amqp
