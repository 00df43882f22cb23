#include "router/endpoint.h"

#include <exception>
#include <utility>

namespace cepbus::router {

Endpoint::Endpoint(std::string name, Consumer consumer, std::shared_ptr<ComponentEntry> entry)
    : name_(std::move(name)), consumer_(std::move(consumer)), entry_(std::move(entry)) {}

Status Endpoint::deliver(const flows::Exchange& exchange, flows::DeliveryContext& context) {
  Status status;
  try {
    status = consumer_(exchange, context);
  } catch (const std::exception& e) {
    status = Status::internal("endpoint " + name_ + " threw: " + e.what());
  } catch (...) {
    status = Status::internal("endpoint " + name_ + " threw a non-exception");
  }
  if (status.isOk()) {
    entry_->addDelivered();
  } else {
    entry_->addFailed();
  }
  return status;
}

}  // namespace cepbus::router
