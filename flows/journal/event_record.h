#pragma once

// The bytes a journaled event is stored as (the `event` column of the
// journal's `pending` table, journal.h): a snapshot (bus/core/plugin/
// snapshot.h: checksummed, read without ever reading out of bounds) of
// engine "journal-event", state version kEventRecordVersion, whose body is
// the event's fields in binary (writeEventFields()).
//
// Why not its JSON line, as before: a checkpointed query's input is written
// to the journal event by event (its acknowledgements wait for the
// checkpoint), and encoding the JSON was the largest single cost of the
// journal's thread. A journal written before holds JSON lines, and any
// record may still be one (an event a binary record cannot hold exactly, see
// encodeEventRecord()): decodeEventRecord() reads both, told apart by their
// first bytes (a JSON line begins with '{', a record with "CEPBSNAP").
//
// Thread-safety: plain functions over their arguments.

#include <cstdint>
#include <string>
#include <string_view>

#include "bus/core/event.h"
#include "bus/core/status.h"

namespace cepbus::flows {

inline constexpr uint32_t kEventRecordVersion = 1;

// The binary record of `event`; its full-format JSON line (event_json.h)
// when a constituent cannot be written exactly (a string that is not valid
// UTF-8: the snapshot's event table holds constituents as JSON).
std::string encodeEventRecord(const Event& event);

// The event of a binary record or a JSON line. InvalidArgument saying what
// does not parse and where (which check of the record, or the JSON error)
// for anything else: truncated, corrupted, of another engine or a newer version.
Result<EventPtr> decodeEventRecord(std::string_view bytes);

// Whether `bytes` are a binary record (not a JSON line), by their first bytes.
bool isBinaryEventRecord(std::string_view bytes);

}  // namespace cepbus::flows
