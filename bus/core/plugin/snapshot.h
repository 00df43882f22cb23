#pragma once

// Detector snapshots: the bytes a detector's state is written to and read
// back from (Detector::snapshot() and Detector::restore(), plugin ABI 8), and
// the file around them. docs/plugins.md ("Snapshots") is the format's
// reference; in short, all integers little-endian:
//
//   "CEPBSNAP"                 8 bytes, the magic
//   format version             4 bytes (kSnapshotFormatVersion); fixed here
//                              in every version, so a newer file is told apart
//   engine                     string: the engine whose state it holds
//   engine state version       varint: Detector::snapshotVersion()
//   fingerprint                8 bytes: the query's (snapshotFingerprint())
//   shape                      8 bytes: the fingerprint of the query without
//                              the clauses an edit may change (format 2)
//   position                   varint: the host's input position
//   event table                varint count, then each event as one string
//                              (its JSON line in full format, event_json.h)
//   body                       varint length, then the detectors' state
//   CRC-32                     4 bytes, of every byte before it
//
// A string is a varint length and its bytes; a signed integer a zigzag
// varint; a double its 8 IEEE-754 bytes; a Value a kind byte and its payload.
// An event in the body is its index in the event table plus one (0: none),
// so an event that several partial matches share is written once and
// restored as one shared event. A section is its name, its state version
// and its shape (a varint; 0 for state that is never carried over).
//
// Carrying state over an edited query: a host that replaces a query by an
// edit keeping its elements (another WITHIN, WHERE, RETURN, ...) may restore
// the old query's snapshot into the new query's detector. The reader is then
// told so (carryOver()), and every section must have been written with a
// shape — a hash of what the section's state depends on, from the writer's
// compiled query — equal to the one its reader expects from the new query:
// an engine whose state the edit changes, or that gives no shape, refuses
// by name instead of misreading.
//
// The reader never throws and never reads out of bounds: the first thing
// that does not parse (a length beyond the end, an unknown kind, an event
// index outside the table) makes the reader fail, every later read returns a
// zero value, and status() says what and where. A restoring detector checks
// ok() before it trusts what it read.
//
// Thread safety: none; a writer or reader is used by one thread.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bus/core/api.h"
#include "bus/core/event.h"
#include "bus/core/status.h"
#include "bus/core/value.h"

namespace cepbus::plugin {

// The layout above. A file of a later version is refused as written by a
// newer cepbus.
inline constexpr uint32_t kSnapshotFormatVersion = 2;

// What a snapshot file says about itself, before the state.
struct CEPBUS_API SnapshotHeader {
  uint32_t format_version = kSnapshotFormatVersion;
  std::string engine;
  uint32_t engine_version = 0;
  uint64_t fingerprint = 0;
  // The fingerprint of the query without the clauses an edit may change
  // while its state is carried over (the host's choice; 0 for none).
  uint64_t shape = 0;
  // Where the host's input stood (for `cepbus match`, the events consumed).
  uint64_t position = 0;
};

// A stable 64-bit hash (FNV-1a) of `canonical`: the text of a query as
// printed (pattern/printer.h) and its options, the same on every build.
CEPBUS_API uint64_t snapshotFingerprint(std::string_view canonical);

// CRC-32 (IEEE 802.3, the zlib one) of `bytes`.
CEPBUS_API uint32_t crc32(std::span<const unsigned char> bytes);

class CEPBUS_API SnapshotWriter {
 public:
  void varint(uint64_t v);
  void signedVarint(int64_t v);
  void u8(uint8_t v) { body_.push_back(v); }
  void flag(bool v) { u8(v ? 1 : 0); }
  void real(double v);
  void string(std::string_view s);
  void value(const Value& v);
  // `event` (may be null) by its place in the event table.
  void event(const EventPtr& event);
  // A section: `name` and its state version, checked by
  // SnapshotReader::section() so that state read by the wrong code is
  // refused by name rather than misread. `shape` (non-zero) lets the state
  // be carried over into an edited query whose reader expects the same
  // shape; 0 refuses that.
  void section(std::string_view name, uint32_t version, uint64_t shape = 0);

  // The whole file: `header` (its format version is kSnapshotFormatVersion),
  // the events, the body written so far and the checksum. An error when an
  // event cannot be written exactly (event_json.h, encodeEventExactly).
  Result<std::string> finish(const SnapshotHeader& header) const;

 private:
  std::vector<unsigned char> body_;
  std::vector<const Event*> events_;  // the event table, in first-written order
  std::vector<EventPtr> keep_;        // events_, alive until finish()
  std::unordered_map<const Event*, uint64_t> index_;
};

// Objects shared by pointer (an instance several partial matches extend, a
// token that is the parent of others), numbered so that a snapshot writes
// each once, after the objects it points to, and refers to it by number; a
// restore then reads each object with its pointers already resolvable.
// add() each object held, with `pointees(object, visit)` calling visit() on
// what the object points to (null is skipped); then write order() and
// refer to objects with ref(). Header-only: it never crosses the ABI.
template <typename T>
class SnapshotTable {
 public:
  template <typename Pointees>
  void add(const T* object, const Pointees& pointees) {
    // Depth first with a stack of its own, not by recursion: a chain of
    // parents (a long Kleene run) may be far deeper than a thread's stack.
    std::vector<std::pair<const T*, bool>> pending{{object, false}};  // (object, expanded)
    while (!pending.empty()) {
      const auto [o, expanded] = pending.back();
      pending.pop_back();
      if (o == nullptr || index_.contains(o)) continue;
      if (expanded) {
        index_.emplace(o, order_.size());
        order_.push_back(o);
        continue;
      }
      pending.emplace_back(o, true);
      pointees(*o, [&](const T* p) {
        if (p != nullptr && !index_.contains(p)) pending.emplace_back(p, false);
      });
    }
  }
  // The object's place in order() plus one; 0 for null.
  uint64_t ref(const T* object) const { return object == nullptr ? 0 : index_.at(object) + 1; }
  const std::vector<const T*>& order() const { return order_; }

 private:
  std::unordered_map<const T*, uint64_t> index_;
  std::vector<const T*> order_;
};

class CEPBUS_API SnapshotReader {
 public:
  // Checks the magic, the format version (a newer one is refused as such),
  // the checksum (corruption, truncation), then reads the header and the
  // event table. The error says which check failed.
  static Result<SnapshotReader> open(std::string_view bytes);

  const SnapshotHeader& header() const { return header_; }

  uint64_t varint();
  int64_t signedVarint();
  uint8_t u8();
  bool flag();
  double real();
  std::string string();
  Value value();
  EventPtr event();
  // A count of items each at least `min_bytes` long: more than the bytes
  // left make the reader fail (no huge allocation on a corrupted count).
  uint64_t count(size_t min_bytes = 1);
  // Reads a section written by SnapshotWriter::section(): fails unless it is
  // `name` at `version`, naming both. When carrying over, it also fails
  // unless the section was written with `shape` (non-zero): the state of
  // a section without one, or of another shape, cannot serve the edited query.
  bool section(std::string_view name, uint32_t version, uint64_t shape = 0);

  // The state is read into a detector of an edited query (see above).
  void carryOver() { carrying_over_ = true; }
  bool carryingOver() const { return carrying_over_; }

  // Makes the reader fail with `why` (the first failure stays).
  void fail(const std::string& why);
  bool ok() const { return status_.isOk(); }
  const Status& status() const { return status_; }
  // Whether the body has been read to its end.
  bool atEnd() const { return pos_ == end_; }

 private:
  SnapshotReader() = default;
  // Whether `n` more bytes are there before end_; fails the reader if not.
  bool need(size_t n);
  // The fixed-width little-endian integer of `n` bytes.
  uint64_t fixed(size_t n);

  SnapshotHeader header_;
  std::string data_;  // the whole file
  size_t pos_ = 0;
  size_t end_ = 0;  // the end of what may be read now: the body's, once open
  std::vector<EventPtr> events_;
  Status status_;
  bool carrying_over_ = false;
};

// An event's own fields, in binary: type, start, end, probability, cost, id,
// source, key, the attributes (count, then name and value each) and the
// constituents (count, then each through SnapshotWriter::event()). Exact,
// where the JSON of the event table would need a string to be valid UTF-8
// only for the constituents.
CEPBUS_API void writeEventFields(SnapshotWriter& w, const Event& event);
// What writeEventFields() wrote; null when it does not parse or is out of
// range, the reader then failed saying what. Names are held like a
// decoder's (wire_names.h).
CEPBUS_API EventPtr readEventFields(SnapshotReader& r);

}  // namespace cepbus::plugin
