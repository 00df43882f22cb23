#include "flows/wake_hold.h"

#include <algorithm>
#include <utility>

namespace cepbus::flows {

bool WakeHold::holds(const std::shared_ptr<Target>& target) {
  // A burst feeds few writers: a linear search is cheaper than a set.
  if (std::find(woken_.begin(), woken_.end(), target) == woken_.end()) {
    woken_.push_back(target);
    return false;
  }
  held_.push_back(target);
  return true;
}

void WakeHold::flush() {
  std::vector<std::shared_ptr<Target>> held;
  held.swap(held_);
  woken_.clear();
  for (const auto& target : held) target->wakeHeld();
}

}  // namespace cepbus::flows
