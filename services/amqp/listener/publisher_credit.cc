#include "services/amqp/listener/publisher_credit.h"

#include <algorithm>

namespace cepbus::services::amqp {

void PublisherCredit::feeds(size_t capacity, int64_t load, size_t publishers, bool stalled) {
  if (stalled) return;
  const auto sharing = static_cast<int64_t>(std::max<size_t>(1, publishers));
  room_ = std::min(room_, (static_cast<int64_t>(capacity) - load) / sharing);
  if (load > lowWater(capacity)) above_low_water_ = true;
}

CreditGrant PublisherCredit::grant(int credit) const {
  if (room_ <= 0) return {true, 0};
  if (credit > room_ / 2) return {false, 0};
  return {false, static_cast<int>(room_) - credit};
}

}  // namespace cepbus::services::amqp
