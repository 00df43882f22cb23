#pragma once

// When a partition's input message may be settled.
//
// The broker is the only state store: a node accepts an input message only
// once nothing it does can still need it, so that the messages a node holds
// unsettled are exactly what a successor must replay to rebuild its windows
// and partial matches. A message with timestamp t is no longer needed when
//
//   1. every event released to the detectors so far is newer than t + W
//      (W: the longest WITHIN of the cluster's queries): no later event can
//      join it in a match, since a match spans at most W, and events reach
//      the detectors in timestamp order; and
//   2. every output published up to that moment — composite events it may
//      be part of, or the message itself re-published as late — was
//      accepted by the broker.
//
// The ledger tracks held messages in arrival order (settling is ordered by
// arrival, which the reorder max-delay keeps close to timestamp order) and the
// outputs by sequence number, and hands back the tags of messages that may
// now be settled.
//
// Thread-safety: none; one per partition, on the node's container thread.

#include <cstdint>
#include <deque>
#include <set>
#include <vector>

#include "bus/core/event.h"

namespace cepbus::services::cluster {

class PartitionLedger {
 public:
  // `window`: the longest WITHIN of the queries run on the partition.
  explicit PartitionLedger(Timestamp window) : window_(window) {}

  // A message the node received and holds (`tag` identifies its delivery).
  void hold(uint64_t tag, Timestamp ts) { held_.push_back({tag, ts, 0}); }
  // A message that needs nothing more than the outputs published so far to
  // be accepted (a duplicate, a late event once re-published).
  void holdUntilOutputsAccepted(uint64_t tag) { waiting_.push_back({tag, 0, last_output_}); }
  // Every event up to `ts` was released to the detectors.
  void released(Timestamp ts) {
    if (ts > released_) released_ = ts;
  }
  // The stream ended (everything was released): what follows is a new
  // stream, whose events start their windows afresh. Messages still waiting
  // for outputs keep waiting.
  void newStream() {
    while (!held_.empty()) {
      Held h = held_.front();
      held_.pop_front();
      h.barrier = last_output_;
      waiting_.push_back(h);
    }
    released_ = INT64_MIN;
  }
  // An output was published; returns its sequence number.
  uint64_t published() {
    unaccepted_.insert(++last_output_);
    return last_output_;
  }
  // The broker accepted output `seq`.
  void accepted(uint64_t seq) { unaccepted_.erase(seq); }

  // Tags of the messages that may be settled now, in arrival order, removed
  // from the ledger.
  std::vector<uint64_t> settleable();

  size_t held() const { return held_.size() + waiting_.size(); }
  size_t unacceptedOutputs() const { return unaccepted_.size(); }

 private:
  struct Held {
    uint64_t tag;
    Timestamp ts;
    uint64_t barrier;  // outputs up to this sequence must be accepted first
  };

  const Timestamp window_;
  Timestamp released_ = INT64_MIN;
  uint64_t last_output_ = 0;
  std::set<uint64_t> unaccepted_;
  std::deque<Held> held_;     // still needed by windows, arrival order
  std::deque<Held> waiting_;  // out of every window, waiting for outputs
};

}  // namespace cepbus::services::cluster
