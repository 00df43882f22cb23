#include "flows/dedupe_window.h"

namespace cepbus::flows {

void DedupeWindow::insert(const DeliveryKey& key) {
  if (capacity_ == 0 || !set_.insert(key)) return;
  if (order_.size() < capacity_) {
    order_.push_back(Remembered{key.target, key.event_id});
    return;
  }
  set_.erase(order_[oldest_].key());
  order_[oldest_] = Remembered{key.target, key.event_id};
  oldest_ = (oldest_ + 1) % capacity_;
}

}  // namespace cepbus::flows
