#include "flows/dedupe_window.h"

namespace cepbus::flows {

void DedupeWindow::insert(const DeliveryKey& key) {
  if (capacity_ == 0 || !set_.insert(key).second) return;
  order_.push_back(key);
  if (order_.size() > capacity_) {
    set_.erase(order_.front());
    order_.pop_front();
  }
}

}  // namespace cepbus::flows
