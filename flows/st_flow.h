#pragma once

// StFlow: straight-through delivery on the caller's thread. The cheapest flow:
// no queue, no lock, no allocation; the publisher pays for every target's
// deliver() and learns each result before send() returns. It offers no
// buffering, so QoS is what the targets give: a reliable exchange is delivered
// exactly like a best-effort one and its outcome is known synchronously.

#include <string>
#include <utility>

#include "flows/abstract_flow.h"

namespace cepbus::flows {

// Thread-safety: as AbstractFlow; send() may run on many threads at once and
// then calls the targets concurrently.
class StFlow final : public AbstractFlow {
 public:
  explicit StFlow(std::string name = "st", const stats::Store& stats = {})
      : AbstractFlow(std::move(name), stats) {}
  ~StFlow() override { stop(); }

 protected:
  void doSend(const Exchange& exchange, std::span<DeliveryTarget* const> targets,
              WakeHold* wake_hold, SendOutcome& out) override;
};

}  // namespace cepbus::flows
