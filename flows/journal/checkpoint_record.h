#pragma once

// CheckpointRecord: the stored state of one consumer of a reliable flow (a
// CEP query, services/cep/query_checkpoints.h), as a row of the journal's
// `checkpoints` table. The flow knows nothing of what the bytes mean: it
// writes a record in the same transaction as the acknowledgements of the
// deliveries the state covers (DeferredAck::acknowledgeWithCheckpoint()), so
// after a crash the journal redelivers exactly what came after it.
//
// Thread-safety: a plain value.

#include <cstdint>
#include <functional>
#include <string>

#include "bus/core/status.h"

namespace cepbus::flows {

struct CheckpointRecord {
  std::string name;  // whose state: unique in the journal (the row's key)
  // What the state is, for a reader to refuse a foreign one before it
  // parses the bytes (the bytes say it again, checksummed).
  std::string engine;
  uint32_t version = 0;
  uint64_t fingerprint = 0;
  uint64_t position = 0;  // input events the state covers
  std::string state;      // the snapshot (bus/core/plugin/snapshot.h)
  std::string published;  // the consumer's own bytes kept beside it
};

// Called once the transaction that should have stored a checkpoint ended:
// OK when it is durable together with its acknowledgements; otherwise
// neither happened.
using CheckpointDone = std::function<void(const Status&)>;

}  // namespace cepbus::flows
