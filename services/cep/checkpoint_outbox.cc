#include "services/cep/checkpoint_outbox.h"

#include <utility>

#include "bus/core/event_json.h"
#include "bus/core/plugin/snapshot.h"

namespace cepbus::services::cep {
namespace {

constexpr std::string_view kEngine = "outbox";
constexpr std::string_view kSection = "outbox";
// Snapshot bytes begin so; an older outbox begins with the u32 length of a
// window of at most kPublishedWindow ids, never these bytes.
constexpr std::string_view kSnapshotMagic = "CEPBSNAP";

template <typename T>
void appendLe(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

template <typename T>
T readLe(std::string_view bytes) {
  T v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    v |= static_cast<T>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  }
  return v;
}

// The bytes of an outbox written before kOutboxVersion (see the header).
Status decodeLegacy(std::string_view bytes, size_t members, Outbox& outbox) {
  auto damaged = [] {
    return Status::invalidArgument(
        "its published composite ids and held composites (the format before outbox version 1) "
        "do not decode");
  };
  auto u32 = [&bytes](uint32_t& v) {
    if (bytes.size() < 4) return false;
    v = readLe<uint32_t>(bytes);
    bytes.remove_prefix(4);
    return true;
  };
  uint32_t length = 0;
  if (!u32(length) || bytes.size() < length || !outbox.published.decode(bytes.substr(0, length))) {
    return damaged();
  }
  bytes.remove_prefix(length);
  uint32_t count = 0;
  if (!u32(count)) return damaged();
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t member = 0;
    if (!u32(member) || member >= members || !u32(length) || bytes.size() < length) {
      return damaged();
    }
    Result<EventPtr> event = decodeEvent(bytes.substr(0, length));
    if (!event) return damaged();
    bytes.remove_prefix(length);
    outbox.held.push_back(OutboxEntry{member, std::move(event).value()});
  }
  if (bytes.empty()) return Status::ok();
  if (bytes.size() != 16) return damaged();
  outbox.clock =
      plugin::SourceClock::Saved{static_cast<Timestamp>(readLe<uint64_t>(bytes)),
                                 static_cast<Timestamp>(readLe<uint64_t>(bytes.substr(8)))};
  return Status::ok();
}

}  // namespace

bool PublishedWindow::insert(uint64_t id) {
  if (!ids_.insert(id).second) return false;
  order_.push_back(id);
  if (order_.size() > capacity_) {
    ids_.erase(order_.front());
    order_.pop_front();
  }
  return true;
}

std::string PublishedWindow::encode() const {
  std::string out;
  out.reserve(4 + 8 * order_.size());
  appendLe(out, static_cast<uint32_t>(order_.size()));
  for (uint64_t id : order_) appendLe(out, id);
  return out;
}

bool PublishedWindow::decode(std::string_view bytes) {
  if (bytes.size() < 4) return false;
  const auto count = readLe<uint32_t>(bytes);
  bytes.remove_prefix(4);
  if (bytes.size() != 8 * static_cast<size_t>(count)) return false;
  order_.clear();
  ids_.clear();
  for (uint32_t i = 0; i < count; ++i) insert(readLe<uint64_t>(bytes.substr(size_t{8} * i, 8)));
  return true;
}

Result<std::string> encodeOutbox(const PublishedWindow& published,
                                 std::span<const OutboxEntry> held,
                                 const std::optional<plugin::SourceClock::Saved>& clock) {
  plugin::SnapshotWriter w;
  w.section(kSection, kOutboxVersion);
  w.string(published.encode());
  w.varint(held.size());
  for (const OutboxEntry& entry : held) {
    w.varint(entry.member);
    plugin::writeEventFields(w, *entry.composite);
  }
  w.flag(clock.has_value());
  if (clock) {
    w.signedVarint(clock->time);
    w.signedVarint(clock->newest);
  }
  plugin::SnapshotHeader header;
  header.engine = std::string(kEngine);
  header.engine_version = kOutboxVersion;
  return w.finish(header);
}

Status decodeOutbox(std::string_view bytes, size_t members, Outbox& outbox) {
  if (!bytes.starts_with(kSnapshotMagic)) return decodeLegacy(bytes, members, outbox);
  Result<plugin::SnapshotReader> opened = plugin::SnapshotReader::open(bytes);
  if (!opened) return Status::invalidArgument("its outbox: " + opened.status().message());
  plugin::SnapshotReader& r = *opened;
  if (r.header().engine != kEngine || r.header().engine_version > kOutboxVersion) {
    return Status::invalidArgument("its outbox is '" + r.header().engine + "' version " +
                                   std::to_string(r.header().engine_version) +
                                   ", this cepbus reads '" + std::string(kEngine) + "' version " +
                                   std::to_string(kOutboxVersion) + " and older");
  }
  r.section(kSection, kOutboxVersion);
  const std::string window = r.string();
  if (r.ok() && !outbox.published.decode(window)) r.fail("the published composite ids");
  const uint64_t count = r.count(2);  // a member index and a composite's type at least
  outbox.held.reserve(count);
  for (uint64_t i = 0; i < count && r.ok(); ++i) {
    const uint64_t member = r.varint();
    if (r.ok() && member >= members) {
      r.fail("composite " + std::to_string(i) + " is of query " + std::to_string(member) +
             "; the detection has " + std::to_string(members));
      break;
    }
    EventPtr composite = plugin::readEventFields(r);
    if (composite == nullptr) {
      return Status::invalidArgument("its outbox: composite " + std::to_string(i) + " of " +
                                     std::to_string(count) + ": " + r.status().message());
    }
    outbox.held.push_back(OutboxEntry{static_cast<uint32_t>(member), std::move(composite)});
  }
  if (r.flag()) {
    const Timestamp time = r.signedVarint();
    const Timestamp newest = r.signedVarint();
    outbox.clock = plugin::SourceClock::Saved{time, newest};
  }
  if (r.ok() && !r.atEnd()) r.fail("bytes after the clock");
  if (!r.ok()) return Status::invalidArgument("its outbox: " + r.status().message());
  return Status::ok();
}

}  // namespace cepbus::services::cep
