#include "flows/st_flow.h"

#include <utility>

namespace cepbus::flows {

void StFlow::doSend(const Exchange& exchange, std::span<DeliveryTarget* const> targets,
                    SendOutcome& out) {
  for (DeliveryTarget* target : targets) {
    Status status = deliverTo(*target, exchange);
    if (status.isOk()) {
      ++out.delivered;
    } else {
      ++out.failed;
      if (out.status.isOk()) out.status = std::move(status);
    }
  }
}

}  // namespace cepbus::flows
