#include "flows/st_flow.h"

#include <utility>

namespace cepbus::flows {

void StFlow::doSend(const Exchange& exchange, std::span<DeliveryTarget* const> targets,
                    WakeHold* wake_hold, SendOutcome& out) {
  for (DeliveryTarget* target : targets) {
    // On the publisher's thread, inside its publish: the hold applies.
    DeliveryContext context(wake_hold);
    Status status = deliverTo(*target, exchange, context);
    if (status.isOk()) {
      ++out.delivered;
    } else {
      ++out.failed;
      if (out.status.isOk()) out.status = std::move(status);
    }
  }
}

}  // namespace cepbus::flows
