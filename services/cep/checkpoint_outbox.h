#pragma once

// CheckpointOutbox: what a query's checkpoint keeps beside its detector's
// state (the `published` column of the journal's `checkpoints` row,
// query_checkpoints.h): the ids of the composites published lately, the
// composites the checkpoint releases (its outbox) and the source clock.
//
// Why a format of its own: a checkpoint releases every composite found
// since the one before, so on a query that finds thousands a second the
// outbox is most of what a checkpoint writes. Each composite used to be its
// full JSON line, its constituents' JSON inside it; that made encoding and
// writing the outbox most of a checkpointed query's cost. Now the bytes are
// a snapshot (bus/core/plugin/snapshot.h: checksummed, read without ever
// reading out of bounds): each composite's own fields in binary and its
// constituents as references into the snapshot's event table, where an
// event that many composites share is written once.
//
//   snapshot header   engine "outbox", state version kOutboxVersion
//   section "outbox"  version kOutboxVersion
//   string            the published window (PublishedWindow::encode())
//   varint count      of held composites, each: varint member index, then
//                     the composite (see writeComposite() in the .cc)
//   flag              a clock follows: its time and newest ts, signed varints
//
// Bytes written before this format (a u32-length-prefixed window, then each
// composite as a u32 member index and its JSON line, then an optional 16-byte
// clock) are still read, so a checkpoint stored by an older cepbus restores.
//
// Thread-safety: plain functions over their arguments.

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/status.h"
#include "bus/host/time/source_clock.h"

namespace cepbus::services::cep {

inline constexpr uint32_t kOutboxVersion = 1;

// The newest composite ids a detection published, bounded, in the order
// published. Thread-safety: none (the detection's thread).
class PublishedWindow {
 public:
  explicit PublishedWindow(size_t capacity) : capacity_(capacity) {}
  // False when `id` is in the window already; otherwise remembers it (the
  // oldest goes once the window is full).
  bool insert(uint64_t id);
  size_t size() const { return order_.size(); }
  // A u32 count, then each id as 8 bytes, little-endian.
  std::string encode() const;
  // Replaces the window with what encode() wrote; false (window untouched)
  // when `bytes` is not that.
  bool decode(std::string_view bytes);

 private:
  size_t capacity_;
  std::deque<uint64_t> order_;
  std::unordered_set<uint64_t> ids_;
};

// A composite waiting for its checkpoint, and which of the detection's
// queries (by member index) publishes it.
struct OutboxEntry {
  uint32_t member = 0;
  EventPtr composite;
};

struct Outbox {
  explicit Outbox(size_t window_capacity) : published(window_capacity) {}
  PublishedWindow published;
  std::vector<OutboxEntry> held;
  std::optional<plugin::SourceClock::Saved> clock;  // none before any source was heard
};

// The bytes of an outbox; an error when a constituent cannot be written
// exactly (a snapshot's event table, event_json.h's encodeEventExactly()).
Result<std::string> encodeOutbox(const PublishedWindow& published,
                                 std::span<const OutboxEntry> held,
                                 const std::optional<plugin::SourceClock::Saved>& clock);

// Reads what encodeOutbox() (or an older cepbus) wrote, for a detection of
// `members` queries, into `outbox` (left partly filled on an error). The
// error says what does not decode and where.
Status decodeOutbox(std::string_view bytes, size_t members, Outbox& outbox);

}  // namespace cepbus::services::cep
