#pragma once

// The bytes of one row of the journal's `pending_batches` table (journal.h):
// the records one transaction wrote, as a snapshot (bus/core/plugin/
// snapshot.h: checksummed, read without ever reading out of bounds) of
// engine "journal-batch", state version kBatchRecordVersion, whose body is
// a count and then per record its sequence number, target, event id,
// address, sender, pattern, correlation id and event: its fields in binary
// (writeEventFields(), as an event record holds them, without a snapshot of
// its own per event: half of a record's bytes and checksumming were that),
// or bytes stored already (event_record.h: a record read from an older
// journal, or an event whose constituents the fields cannot hold exactly).
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

// The records of a row in their order, each with its event (`event`) or,
// when stored as bytes, those (`stored_event`). InvalidArgument saying
// which check failed and where (the snapshot's, or the record where it
// stops parsing) for anything else.
Result<std::vector<JournalRecord>> decodeBatchRecord(std::string_view bytes);

}  // namespace cepbus::flows
