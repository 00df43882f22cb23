#include "services/cluster/stream_reader_watch.h"

namespace cepbus::services::cluster {

void StreamReaderWatch::read(Time now) {
  quiet_since_ = now;
  silences_ = 0;
}

StreamReaderWatch::Action StreamReaderWatch::tick(Time now, uint64_t read_to) {
  if (tail_ && now - tail_at_ >= grace_) {
    const bool stuck = read_to <= *tail_;
    tail_.reset();
    if (stuck) return Action::kSwitchBroker;
  }
  if (probe_opened_ && now - *probe_opened_ >= silence_) {
    probe_opened_.reset();
    // A stream that holds events always has a last chunk to give.
    if (read_to > 0) return Action::kSwitchBroker;
  }
  if (now - quiet_since_ < silence_) return Action::kNone;
  quiet_since_ = now;
  if (++silences_ < 2 || probe_opened_ || tail_) return Action::kReopen;
  probe_opened_ = now;
  return Action::kReopenAndProbe;
}

void StreamReaderWatch::probed(uint64_t offset, Time now) {
  probe_opened_.reset();
  tail_ = offset;
  tail_at_ = now;
}

}  // namespace cepbus::services::cluster
