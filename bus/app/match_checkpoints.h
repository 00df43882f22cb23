#pragma once

// The checkpoint steps of `cepbus match` (docs/checkpoints.md). Before the
// first event, --resume FILE reads the detection's state back (the same
// queries', or an edit's that keeps it) and says where the run goes on;
// --checkpoint FILE refuses a detection that cannot write one. After the
// last event read, --checkpoint writes the state without ending the stream;
// a run without it ends the stream instead.
//
// Thread safety: none; used by the command's one thread.

#include <cstdint>
#include <ostream>
#include <string>

#include "bus/app/match_command.h"
#include "bus/core/status.h"
#include "bus/host/detection/checkpoint.h"
#include "bus/host/detection/detection.h"

namespace cepbus::app {

class MatchCheckpoints {
 public:
  MatchCheckpoints(const MatchCommandOptions& options, detection::CheckpointIdentity identity);

  // Before the first event: checks that a --checkpoint can be written and
  // restores a --resume file, reporting what it read on `err`. An error
  // names the flag and the file.
  Status start(detection::Detection& detection, std::ostream& err);

  // The events before this one ran before the checkpoint (0 without --resume).
  uint64_t resumeAt() const { return resume_at_; }
  // The run reads no event past this one (--stop-after; none without it).
  uint64_t stopAt() const { return stop_at_; }

  // After `position` events were read: writes the --checkpoint file, or
  // ends the stream when there is none.
  Status finish(detection::Detection& detection, uint64_t position, std::ostream& err);

 private:
  const MatchCommandOptions& options_;
  const detection::CheckpointIdentity identity_;
  uint64_t resume_at_ = 0;
  uint64_t stop_at_;
};

}  // namespace cepbus::app
