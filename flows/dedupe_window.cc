#include "flows/dedupe_window.h"

namespace cepbus::flows {

void DedupeWindow::insert(const DeliveryKey& key) {
  if (capacity_ == 0 || !set_.insert(key)) return;
  if (order_.size() < capacity_) {
    order_.push_back(key);
    return;
  }
  set_.erase(order_[oldest_]);
  order_[oldest_] = key;
  oldest_ = (oldest_ + 1) % capacity_;
}

}  // namespace cepbus::flows
