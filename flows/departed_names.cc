#include "flows/departed_names.h"

namespace cepbus::flows {

void DepartedNames::add(std::string_view name) {
  if (capacity_ == 0) return;
  const uint64_t generation = next_generation_++;
  generations_[std::string(name)] = generation;
  order_.emplace_back(name, generation);
  while (order_.size() > capacity_) {
    auto it = generations_.find(order_.front().first);
    if (it != generations_.end() && it->second == order_.front().second) generations_.erase(it);
    order_.pop_front();
  }
}

}  // namespace cepbus::flows
