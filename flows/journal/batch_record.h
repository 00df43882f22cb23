#pragma once

// The bytes of one row of the journal's `pending_batches` table (journal.h):
// the records one transaction wrote, as a snapshot (bus/core/plugin/
// snapshot.h: checksummed, read without ever reading out of bounds) of
// engine "journal-batch", state version kBatchRecordVersion, whose body is
// a count and then per record its sequence number, target, event id,
// address, sender, pattern, correlation id and event record (event_record.h).
//
// Why one row per transaction: a checkpointed query leaves every input
// event to be written and deleted again by its checkpoint, and SQLite's
// work for a row per event (its B-tree, the pages written to the WAL and
// copied back) was most of what the journal's own writes cost.
//
// Thread-safety: plain functions over their arguments.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/status.h"
#include "flows/journal/journal_record.h"

namespace cepbus::flows {

inline constexpr uint32_t kBatchRecordVersion = 1;

// The row of `records` (encoding the events of those without stored bytes).
std::string encodeBatchRecord(std::span<const JournalRecord* const> records);

// The records of a row, oldest first, with their events as stored bytes
// (stored_event). InvalidArgument saying which check failed and where (the
// snapshot's, or the record past which it does not parse) for anything else.
Result<std::vector<JournalRecord>> decodeBatchRecord(std::string_view bytes);

}  // namespace cepbus::flows
