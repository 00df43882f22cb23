#include "services/amqp/listener/publisher_wake.h"

namespace cepbus::services::amqp {

bool PublisherWake::post() {
  if (!waiting() || posted_.exchange(true, std::memory_order_acq_rel)) return false;
  if (waker_->add(resume_)) return true;
  // The connection is going away: nothing will run, nothing is on its way.
  posted_.store(false, std::memory_order_release);
  return false;
}

}  // namespace cepbus::services::amqp
