#include "services/cluster/partition_ledger.h"

namespace cepbus::services::cluster {

std::vector<uint64_t> PartitionLedger::settleable() {
  // In 128 bits: ts + window may not fit a Timestamp.
  auto outOfWindow = [this](Timestamp ts) {
    return static_cast<__int128>(ts) + window_ < static_cast<__int128>(released_);
  };
  while (!held_.empty() && outOfWindow(held_.front().ts)) {
    Held h = held_.front();
    held_.pop_front();
    h.barrier = last_output_;
    waiting_.push_back(h);
  }
  const uint64_t first_unaccepted = unaccepted_.empty() ? UINT64_MAX : *unaccepted_.begin();
  std::vector<uint64_t> out;
  while (!waiting_.empty() && waiting_.front().barrier < first_unaccepted) {
    out.push_back(waiting_.front().tag);
    waiting_.pop_front();
  }
  return out;
}

}  // namespace cepbus::services::cluster
