#pragma once

// How the listener tests hand an exchange to a SubscriberOutbox the way a
// stage's worker delivers it: best effort, with no publisher's WakeHold.

#include "bus/core/status.h"
#include "flows/delivery_context.h"
#include "flows/exchange.h"
#include "services/amqp/listener/subscriber_outbox.h"

namespace cepbus::services::amqp::testing {

inline Status offerBestEffort(SubscriberOutbox& outbox, const flows::Exchange& exchange) {
  flows::DeliveryContext context;
  return outbox.offer(exchange, context);
}

}  // namespace cepbus::services::amqp::testing
