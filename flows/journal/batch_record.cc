#include "flows/journal/batch_record.h"

#include "bus/core/plugin/snapshot.h"
#include "flows/journal/event_record.h"
#include "flows/kept_name.h"

namespace cepbus::flows {

namespace {

constexpr std::string_view kEngine = "journal-batch";

// The least bytes a record takes: eight fields of at least one byte and
// the event's.
constexpr size_t kMinRecordBytes = 9;

Pattern patternOf(uint8_t stored) {
  switch (stored) {
    case static_cast<uint8_t>(Pattern::kRobustInOnly):
      return Pattern::kRobustInOnly;
    case static_cast<uint8_t>(Pattern::kInOut):
      return Pattern::kInOut;
    default:
      return Pattern::kInOnly;
  }
}

// How a record's event follows it.
enum class EventForm : uint8_t {
  kFields = 0,  // its fields in binary (writeEventFields()), read back as an event
  kBytes = 1,   // its bytes as stored (event_record.h), read back as those
};

// Writes the body; `fields`: events without stored bytes as their fields,
// else as their event records.
std::string encodeWith(std::span<const JournalRecord* const> records, bool fields) {
  plugin::SnapshotWriter w;
  w.varint(records.size());
  std::string encoded;
  for (const JournalRecord* r : records) {
    w.varint(r->seq);
    w.string(r->target.name());
    w.varint(r->event_id);
    w.string(r->address.name());
    w.string(r->sender.name());
    w.u8(static_cast<uint8_t>(r->pattern));
    w.varint(r->correlation_id);
    if (r->stored_event.empty() && r->event != nullptr && fields) {
      w.u8(static_cast<uint8_t>(EventForm::kFields));
      plugin::writeEventFields(w, *r->event);
      continue;
    }
    const bool encode = r->stored_event.empty() && r->event != nullptr;
    if (encode) encoded = encodeEventRecord(*r->event);
    w.u8(static_cast<uint8_t>(EventForm::kBytes));
    w.string(encode ? encoded : r->stored_event);
  }
  plugin::SnapshotHeader header;
  header.engine = std::string(kEngine);
  header.engine_version = kBatchRecordVersion;
  Result<std::string> bytes = w.finish(header);
  return bytes ? std::move(*bytes) : std::string();
}

}  // namespace

std::string encodeBatchRecord(std::span<const JournalRecord* const> records) {
  // The fields fail only for a constituent the snapshot's event table
  // cannot hold exactly (event_record.h): the whole row then takes the
  // records' own encoding, which falls back to JSON per event.
  std::string bytes = encodeWith(records, true);
  return bytes.empty() ? encodeWith(records, false) : bytes;
}

Result<std::vector<JournalRecord>> decodeBatchRecord(std::string_view bytes) {
  Result<plugin::SnapshotReader> opened = plugin::SnapshotReader::open(bytes);
  if (!opened) return Status::invalidArgument("batch record: " + opened.status().message());
  plugin::SnapshotReader& r = *opened;
  if (r.header().engine != kEngine || r.header().engine_version > kBatchRecordVersion) {
    return Status::invalidArgument("batch record is '" + r.header().engine + "' version " +
                                   std::to_string(r.header().engine_version) +
                                   ", this cepbus reads '" + std::string(kEngine) + "' version " +
                                   std::to_string(kBatchRecordVersion) + " and older");
  }
  std::vector<JournalRecord> records(r.count(kMinRecordBytes));
  for (size_t i = 0; i < records.size() && r.ok(); ++i) {
    JournalRecord& record = records[i];
    record.seq = r.varint();
    // Names held again as before the restart (flows/kept_name.h).
    record.target = keepName(r.string());
    record.event_id = r.varint();
    record.address = keepName(r.string());
    record.sender = Symbol::intern(r.string());
    record.pattern = patternOf(r.u8());
    record.correlation_id = r.varint();
    switch (static_cast<EventForm>(r.u8())) {
      case EventForm::kFields:
        record.event = plugin::readEventFields(r);
        break;
      case EventForm::kBytes:
        record.stored_event = r.string();
        break;
      default:
        r.fail("unknown event form");
    }
    if (!r.ok()) {
      return Status::invalidArgument("batch record, record " + std::to_string(i + 1) + " of " +
                                     std::to_string(records.size()) + ": " + r.status().message());
    }
  }
  if (r.ok() && !r.atEnd()) r.fail("bytes after the records");
  if (!r.ok()) return Status::invalidArgument("batch record: " + r.status().message());
  return records;
}

}  // namespace cepbus::flows
