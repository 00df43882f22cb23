#pragma once

// Endpoint: a named service endpoint on the router. A service supplies the
// consumer that takes exchanges; the endpoint makes it a flows::DeliveryTarget
// and counts what it delivered and failed into its registry entry. Its name
// is a plain string, not a symbol: clients name endpoints (an AMQP
// subscribing link, a WebSocket feed), and a symbol would outlive them.

#include <functional>
#include <memory>
#include <string>

#include "bus/core/status.h"
#include "flows/delivery_context.h"
#include "flows/delivery_target.h"
#include "flows/exchange.h"
#include "router/component_entry.h"

namespace cepbus::router {

// Thread-safety: deliver() may run concurrently from many threads, so the
// consumer must be thread-safe. Ownership: owns its consumer; shares its
// registry entry with the registry.
class Endpoint final : public flows::DeliveryTarget {
 public:
  // Takes one exchange. For an in-out exchange the consumer answers with
  // exchange.reply(event), now or later from any thread (keep a copy of the
  // exchange). A non-OK status is a fault that goes back to senders who asked
  // for faults. A throw is caught and counted as an Internal fault. The
  // context is the delivery's (flows/delivery_context.h): a consumer may
  // take a journaled delivery's acknowledgement to give later.
  using Consumer = std::function<Status(const flows::Exchange&, flows::DeliveryContext&)>;

  Endpoint(std::string name, Consumer consumer, std::shared_ptr<ComponentEntry> entry);

  const std::string& name() const override { return name_; }
  Status deliver(const flows::Exchange& exchange, flows::DeliveryContext& context) override;
  ComponentEntry& entry() const { return *entry_; }

 private:
  const std::string name_;
  const Consumer consumer_;
  const std::shared_ptr<ComponentEntry> entry_;
};

}  // namespace cepbus::router
