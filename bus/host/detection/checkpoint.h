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
// An edited query may take over the state of the one it replaces: when the
// edit changes only the clauses that say which of the kept partial matches
// and windows become results — WITHIN, WHERE, HAVING, RETURN, PROBABILITY,
// EMIT (the queries' shape is the same) — the state is carried over,
// provided every engine and host stage on the way finds its own state's
// shape unchanged (plugin::SnapshotReader::carryOver()); any other edit is
// refused as another query's checkpoint.
//
// Thread safety: the functions touch only their arguments; the detection's
// own rules apply (one thread on its event path).

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "bus/core/pattern/ast.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"
#include "bus/host/detection/detection.h"

namespace cepbus::detection {

// Which detection a checkpoint belongs to.
struct CheckpointIdentity {
  std::string engine;
  // plugin::snapshotFingerprint() of the queries' canonical text, names and
  // options.
  uint64_t fingerprint = 0;
  // The same without the clauses an edit may change and keep the state.
  uint64_t shape = 0;
};

// One query of a detection and the name its matches carry.
struct CheckpointedQuery {
  std::string_view name;
  const pattern::Query& query;
};

// The identity of a detection of `queries` on `engine` with `options`.
CheckpointIdentity checkpointIdentity(std::string engine,
                                      std::span<const CheckpointedQuery> queries,
                                      const plugin::DetectorOptions& options);

// Where a restored detection goes on from.
struct RestoredCheckpoint {
  uint64_t position = 0;
  // The checkpoint was written for an edit of these queries, whose state
  // they took over.
  bool carried_over = false;
};

// OK when `detection` can write a checkpoint; otherwise why not, naming what
// refuses (an engine that does not snapshot, a host stage that does not).
// Cheap before the first event, which is when a host asks.
Status checkCheckpointable(const Detection& detection);

// Writes `detection`'s state and `position` to `file`, atomically; the
// file's size goes to `bytes` when given.
Status writeCheckpoint(const std::string& file, const Detection& detection,
                       const CheckpointIdentity& identity, uint64_t position,
                       size_t* bytes = nullptr);

// Reads `file` into `detection` (just made, before any event): the state of
// the same queries, or carried over from an edit of them.
Result<RestoredCheckpoint> restoreCheckpoint(const std::string& file, Detection& detection,
                                             const CheckpointIdentity& identity);

}  // namespace cepbus::detection
