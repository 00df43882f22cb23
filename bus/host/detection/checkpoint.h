#pragma once

// Checkpoints: a detection's state in a file (the snapshot format of
// bus/core/plugin/snapshot.h), written after some input and read back into a
// new detection of the same queries, which then goes on with the input after
// it as if it had never stopped. `cepbus match --checkpoint/--resume` uses
// them (docs/checkpoints.md).
//
// The file names the engine, its state version, the queries' fingerprint and
// the input position; a file of another engine, state version or query, of a
// newer format, or corrupted or truncated, is refused with the file's name and
// which of these it is. A file is written whole or not at all: to a
// temporary file beside it, renamed over it.
//
// Thread safety: the functions touch only their arguments; the detection's
// own rules apply (one thread on its event path).

#include <cstdint>
#include <string>
#include <string_view>

#include "bus/core/status.h"
#include "bus/host/detection/detection.h"

namespace cepbus::detection {

// Which detection a checkpoint belongs to.
struct CheckpointIdentity {
  std::string engine;
  // plugin::snapshotFingerprint() of the queries' canonical text and options.
  uint64_t fingerprint = 0;
};

// OK when `detection` can write a checkpoint; otherwise why not, naming what
// refuses (an engine that does not snapshot, a host stage that does not).
// Cheap before the first event, which is when a host asks.
Status checkCheckpointable(const Detection& detection);

// `detection`'s state and `position` as the bytes of a checkpoint file.
Result<std::string> checkpointBytes(const Detection& detection, const CheckpointIdentity& identity,
                                    uint64_t position);

// Reads the checkpoint `data` into `detection` (just made, before any
// event) and returns the input position it was written at. An error says
// what is refused, after `what` (e.g. "checkpoint 'FILE'").
Result<uint64_t> restoreCheckpointBytes(std::string_view data, const std::string& what,
                                        Detection& detection, const CheckpointIdentity& identity);

// Writes `detection`'s state and `position` to `file`, atomically; the
// file's size goes to `bytes` when given.
Status writeCheckpoint(const std::string& file, const Detection& detection,
                       const CheckpointIdentity& identity, uint64_t position,
                       size_t* bytes = nullptr);

// Reads `file` into `detection` (just made, before any event) and returns
// the input position it was written at.
Result<uint64_t> restoreCheckpoint(const std::string& file, Detection& detection,
                                   const CheckpointIdentity& identity);

}  // namespace cepbus::detection
