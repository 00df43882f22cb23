#pragma once

// UnsettledBudget: what one client connection may have the AMQP listener hold
// of the messages it published unsettled — deliveries the listener has not
// settled yet (waiting for their journal commits on a reliable route) and
// their encoded bytes — against max-unsettled and max-bytes-in-flight. The
// listener asks it before it publishes an unsettled message, tells it when
// the delivery is settled, and gives the connection's publishing links no
// more credit while it is full: a client that keeps sending anyway has what
// goes beyond refused with amqp:resource-limit-exceeded and a description
// naming the limit and its value; its links and connection stay up.
//
// It also bounds the credit the connection's links hold together by what
// max-unsettled leaves (creditRoom()), so that a client that sends only on
// credit is not refused for max-unsettled: when its commits are slow it
// waits for credit instead. (The listener still gives a link without credit
// one, so that idle links holding the room cannot starve it; only then may
// a client on credit pass the limit.) Bytes cannot be bounded that way
// (credit counts messages), so max-bytes-in-flight still refuses what
// passes it.
//
// An authenticated user's connections also share a UserUnsettledBudget
// (max-user-unsettled, max-user-bytes-in-flight), so that opening more
// connections does not multiply what one user may make the listener hold.
// Beyond it a message is refused the same way; credit still flows, since a
// connection cannot tell when another one's settlement makes room.
//
// Thread-safety: UnsettledBudget is not thread-safe; one per connection,
// used by that connection's events and work only. UserUnsettledBudget is
// thread-safe: its connections run on different threads.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "bus/base/mutex.h"
#include "bus/base/thread_annotations.h"

namespace cepbus::services::amqp {

// Which limit refused a delivery.
enum class UnsettledLimit { kDeliveries, kBytes, kUserDeliveries, kUserBytes };

struct UnsettledRefusal {
  UnsettledLimit limit;
  std::string description;
};

// What the connections of one authenticated user hold together.
class UserUnsettledBudget {
 public:
  UserUnsettledBudget(uint64_t max_deliveries, uint64_t max_bytes)
      : max_deliveries_(max_deliveries), max_bytes_(max_bytes) {}

  // As UnsettledBudget::hold(), over the user's connections.
  std::optional<UnsettledRefusal> hold(uint64_t bytes) EXCLUDES(mu_);
  void settled(uint64_t bytes) EXCLUDES(mu_);
  uint64_t deliveries() const EXCLUDES(mu_);
  uint64_t bytes() const EXCLUDES(mu_);

 private:
  const uint64_t max_deliveries_;
  const uint64_t max_bytes_;
  mutable Mutex mu_;
  uint64_t deliveries_ GUARDED_BY(mu_) = 0;
  uint64_t bytes_ GUARDED_BY(mu_) = 0;
};

class UnsettledBudget {
 public:
  using Limit = UnsettledLimit;
  using Refusal = UnsettledRefusal;

  UnsettledBudget(uint64_t max_deliveries, uint64_t max_bytes)
      : max_deliveries_(max_deliveries), max_bytes_(max_bytes) {}

  // The connection's user's budget, charged after the connection's own
  // (none for the anonymous client). Before the first hold().
  void shareWith(std::shared_ptr<UserUnsettledBudget> user) { user_ = std::move(user); }

  // Holds a delivery of `bytes`: nullopt, or why not (nothing held then).
  std::optional<Refusal> hold(uint64_t bytes);
  // A delivery hold() took is settled.
  void settled(uint64_t bytes);

  // True while a new delivery would be refused whatever its size on this
  // connection's own budget: its links get no more credit.
  bool full() const { return deliveries_ >= max_deliveries_ || bytes_ >= max_bytes_; }
  uint64_t deliveries() const { return deliveries_; }
  uint64_t bytes() const { return bytes_; }

  // The connection's publishing links now hold `delta` more credit.
  void countCredit(int64_t delta) { credit_ += delta; }
  // The credit a link that holds `link_credit` may hold in all: what
  // max-unsettled leaves besides the deliveries held and the credit of the
  // connection's other links. 0 or less: none.
  int64_t creditRoom(int64_t link_credit) const {
    return static_cast<int64_t>(max_deliveries_) - static_cast<int64_t>(deliveries_) -
           (credit_ - link_credit);
  }

 private:
  const uint64_t max_deliveries_;
  const uint64_t max_bytes_;
  uint64_t deliveries_ = 0;
  uint64_t bytes_ = 0;
  int64_t credit_ = 0;  // held by the connection's publishing links
  std::shared_ptr<UserUnsettledBudget> user_;
};

}  // namespace cepbus::services::amqp
