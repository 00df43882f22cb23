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
// Thread-safety: not thread-safe; one per connection, used by that
// connection's events and work only.

#include <cstdint>
#include <optional>
#include <string>

namespace cepbus::services::amqp {

class UnsettledBudget {
 public:
  enum class Limit { kDeliveries, kBytes };
  struct Refusal {
    Limit limit;
    std::string description;
  };

  UnsettledBudget(uint64_t max_deliveries, uint64_t max_bytes)
      : max_deliveries_(max_deliveries), max_bytes_(max_bytes) {}

  // Holds a delivery of `bytes`: nullopt, or why not (nothing held then).
  std::optional<Refusal> hold(uint64_t bytes);
  // A delivery hold() took is settled.
  void settled(uint64_t bytes);

  // True while a new delivery would be refused whatever its size: the
  // connection's links get no more credit.
  bool full() const { return deliveries_ >= max_deliveries_ || bytes_ >= max_bytes_; }
  uint64_t deliveries() const { return deliveries_; }
  uint64_t bytes() const { return bytes_; }

 private:
  const uint64_t max_deliveries_;
  const uint64_t max_bytes_;
  uint64_t deliveries_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace cepbus::services::amqp
