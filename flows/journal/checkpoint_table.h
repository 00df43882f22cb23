#pragma once

// Reads a checkpoint back from a journal's `checkpoints` table (journal.h):
// a second connection to the journal's file, as the AMQP listener's durable
// store is, so a consumer can restore its state before the flow redelivers
// anything to it. Writing goes through the journal's own transactions
// (Journal::commit()), never through here.
//
// Thread-safety: the function touches only its arguments.

#include <optional>
#include <string>

#include "bus/core/status.h"
#include "flows/journal/checkpoint_record.h"

namespace cepbus::flows {

// The checkpoint stored under `name` in the journal at `path`; nullopt when
// there is none (no such file or table yet: nothing was ever stored). An
// IoError naming the journal, and InvalidArgument naming the row when it
// holds something that is no checkpoint (a column of the wrong type).
Result<std::optional<CheckpointRecord>> readCheckpoint(const std::string& path,
                                                       const std::string& name);

}  // namespace cepbus::flows
