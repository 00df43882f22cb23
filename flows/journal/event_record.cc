#include "flows/journal/event_record.h"

#include "bus/core/event_json.h"
#include "bus/core/plugin/snapshot.h"

namespace cepbus::flows {

namespace {

constexpr std::string_view kEngine = "journal-event";
constexpr std::string_view kSnapshotMagic = "CEPBSNAP";

}  // namespace

bool isBinaryEventRecord(std::string_view bytes) { return bytes.starts_with(kSnapshotMagic); }

std::string encodeEventRecord(const Event& event) {
  plugin::SnapshotWriter w;
  plugin::writeEventFields(w, event);
  plugin::SnapshotHeader header;
  header.engine = std::string(kEngine);
  header.engine_version = kEventRecordVersion;
  Result<std::string> bytes = w.finish(header);
  if (bytes) return std::move(*bytes);
  return encodeEvent(event, EventFormat::kFull);
}

Result<EventPtr> decodeEventRecord(std::string_view bytes) {
  if (!isBinaryEventRecord(bytes)) return decodeEvent(bytes);
  Result<plugin::SnapshotReader> opened = plugin::SnapshotReader::open(bytes);
  if (!opened) return Status::invalidArgument("event record: " + opened.status().message());
  plugin::SnapshotReader& r = *opened;
  if (r.header().engine != kEngine || r.header().engine_version > kEventRecordVersion) {
    return Status::invalidArgument("event record is '" + r.header().engine + "' version " +
                                   std::to_string(r.header().engine_version) +
                                   ", this cepbus reads '" + std::string(kEngine) + "' version " +
                                   std::to_string(kEventRecordVersion) + " and older");
  }
  EventPtr event = plugin::readEventFields(r);
  if (event != nullptr && !r.atEnd()) r.fail("bytes after the event");
  if (!r.ok()) return Status::invalidArgument("event record: " + r.status().message());
  return event;
}

}  // namespace cepbus::flows
