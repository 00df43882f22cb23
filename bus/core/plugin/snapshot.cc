#include "bus/core/plugin/snapshot.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <optional>

#include "bus/core/event_json.h"
#include "bus/core/wire_names.h"

namespace cepbus::plugin {
namespace {

constexpr std::string_view kMagic = "CEPBSNAP";
constexpr size_t kVersionBytes = 4;
constexpr size_t kChecksumBytes = 4;

// Slicing-by-8 (Intel's): eight tables, eight bytes per step. A bus
// checkpointing once a second checksums every outbox and state it stores,
// megabytes a second on a query with many composites; a byte per step made
// the CRC a few percent of such a query's CPU.
using CrcTables = std::array<std::array<uint32_t, 256>, 8>;

CrcTables crcTables() {
  CrcTables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) != 0 ? 0xEDB88320U ^ (c >> 1) : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (size_t k = 1; k < 8; ++k) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
  }
  return t;
}

uint32_t load32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

void appendFixed(std::string& out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

void appendVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void appendString(std::string& out, std::string_view s) {
  appendVarint(out, s.size());
  out.append(s);
}

std::span<const unsigned char> bytesOf(std::string_view s) {
  return {reinterpret_cast<const unsigned char*>(s.data()), s.size()};
}

// A name read back: held like a decoder's, or made permanent when the
// budget of held names cannot take it, rather than lose the composite.
NameHold holdName(std::string_view name) {
  if (std::optional<NameHold> hold = holdWireName(name)) return std::move(*hold);
  return NameHold::of(Symbol::intern(name));
}

}  // namespace

uint64_t snapshotFingerprint(std::string_view canonical) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : canonical) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

uint32_t crc32(std::span<const unsigned char> bytes) {
  static const CrcTables kT = crcTables();
  uint32_t c = 0xFFFFFFFFU;
  const unsigned char* p = bytes.data();
  size_t n = bytes.size();
  for (; n >= 8; p += 8, n -= 8) {
    const uint32_t lo = c ^ load32(p);
    const uint32_t hi = load32(p + 4);
    c = kT[7][lo & 0xFF] ^ kT[6][(lo >> 8) & 0xFF] ^ kT[5][(lo >> 16) & 0xFF] ^ kT[4][lo >> 24] ^
        kT[3][hi & 0xFF] ^ kT[2][(hi >> 8) & 0xFF] ^ kT[1][(hi >> 16) & 0xFF] ^ kT[0][hi >> 24];
  }
  for (; n > 0; ++p, --n) c = kT[0][(c ^ *p) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFU;
}

// --- writer -----------------------------------------------------------------

void SnapshotWriter::varint(uint64_t v) {
  while (v >= 0x80) {
    body_.push_back(static_cast<unsigned char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  body_.push_back(static_cast<unsigned char>(v));
}

void SnapshotWriter::signedVarint(int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  varint((u << 1) ^ (v < 0 ? ~uint64_t{0} : 0));
}

void SnapshotWriter::real(double v) {
  const uint64_t bits = std::bit_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) body_.push_back(static_cast<unsigned char>(bits >> (8 * i)));
}

void SnapshotWriter::string(std::string_view s) {
  varint(s.size());
  body_.insert(body_.end(), s.begin(), s.end());
}

void SnapshotWriter::value(const Value& v) {
  u8(static_cast<uint8_t>(v.kind()));
  switch (v.kind()) {
    case Value::Kind::kNull:
      break;
    case Value::Kind::kBool:
      flag(v.asBool());
      break;
    case Value::Kind::kInt:
      signedVarint(v.asInt());
      break;
    case Value::Kind::kDouble:
      real(v.asDouble());
      break;
    case Value::Kind::kString:
      string(v.asString());
      break;
  }
}

void SnapshotWriter::event(const EventPtr& event) {
  if (!event) {
    varint(0);
    return;
  }
  auto [it, added] = index_.try_emplace(event.get(), events_.size());
  if (added) {
    events_.push_back(event.get());
    keep_.push_back(event);
  }
  varint(it->second + 1);
}

void SnapshotWriter::section(std::string_view name, uint32_t version, uint64_t shape) {
  string(name);
  varint(version);
  varint(shape);
}

Result<std::string> SnapshotWriter::finish(const SnapshotHeader& header) const {
  std::string out(kMagic);
  appendFixed(out, kSnapshotFormatVersion, kVersionBytes);
  appendString(out, header.engine);
  appendVarint(out, header.engine_version);
  appendFixed(out, header.fingerprint, 8);
  appendFixed(out, header.shape, 8);
  appendVarint(out, header.position);
  appendVarint(out, events_.size());
  for (const Event* e : events_) {
    auto line = encodeEventExactly(*e, EventFormat::kFull);
    if (!line)
      return Status::invalidArgument("snapshot: event not writable: " + line.status().message());
    appendString(out, *line);
  }
  appendVarint(out, body_.size());
  out.append(reinterpret_cast<const char*>(body_.data()), body_.size());
  appendFixed(out, crc32(bytesOf(out)), kChecksumBytes);
  return out;
}

// --- reader -----------------------------------------------------------------

Result<SnapshotReader> SnapshotReader::open(std::string_view bytes) {
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic) {
    return Status::invalidArgument("not a cepbus snapshot (no CEPBSNAP magic)");
  }
  if (bytes.size() < kMagic.size() + kVersionBytes + kChecksumBytes) {
    return Status::invalidArgument("truncated snapshot (" + std::to_string(bytes.size()) +
                                   " bytes)");
  }
  SnapshotReader r;
  r.data_ = std::string(bytes);
  r.pos_ = kMagic.size();
  r.end_ = r.data_.size() - kChecksumBytes;
  const auto version = static_cast<uint32_t>(r.fixed(kVersionBytes));
  if (version > kSnapshotFormatVersion) {
    return Status::invalidArgument("snapshot format version " + std::to_string(version) +
                                   " was written by a newer cepbus; this one reads version " +
                                   std::to_string(kSnapshotFormatVersion) + " and older");
  }
  if (version < kSnapshotFormatVersion) {
    // Version 1 had no shapes; nothing was deployed with it.
    return Status::invalidArgument("snapshot format version " + std::to_string(version) +
                                   " is not read by this cepbus (it reads version " +
                                   std::to_string(kSnapshotFormatVersion) + ")");
  }
  const size_t end = r.end_;
  const uint32_t stored = static_cast<uint32_t>(
      static_cast<unsigned char>(r.data_[end]) | static_cast<unsigned char>(r.data_[end + 1]) << 8 |
      static_cast<unsigned char>(r.data_[end + 2]) << 16 |
      static_cast<uint32_t>(static_cast<unsigned char>(r.data_[end + 3])) << 24);
  if (crc32(bytesOf(std::string_view(r.data_).substr(0, end))) != stored) {
    return Status::invalidArgument("snapshot corrupted or truncated (checksum mismatch over " +
                                   std::to_string(bytes.size()) + " bytes)");
  }
  r.header_.format_version = version;
  r.header_.engine = r.string();
  r.header_.engine_version = static_cast<uint32_t>(r.varint());
  r.header_.fingerprint = r.fixed(8);
  r.header_.shape = r.fixed(8);
  r.header_.position = r.varint();
  const uint64_t events = r.count(2);
  r.events_.reserve(events);
  for (uint64_t i = 0; i < events && r.ok(); ++i) {
    const std::string line = r.string();
    if (!r.ok()) break;
    auto event = decodeEvent(line);
    if (!event) {
      r.fail("event " + std::to_string(i) + " of the table: " + event.status().message());
      break;
    }
    r.events_.push_back(std::move(event).value());
  }
  const uint64_t body = r.count(1);
  if (r.ok() && r.pos_ + body != r.end_) {
    r.fail("the body's length (" + std::to_string(body) + " bytes) does not end the file");
  }
  if (!r.ok()) return r.status_;
  r.end_ = r.pos_ + body;
  return r;
}

void SnapshotReader::fail(const std::string& why) {
  if (status_.isOk()) {
    status_ =
        Status::invalidArgument("snapshot unreadable at byte " + std::to_string(pos_) + ": " + why);
  }
  pos_ = end_;
}

bool SnapshotReader::need(size_t n) {
  if (!ok()) return false;
  if (end_ - pos_ < n) {
    fail("needs " + std::to_string(n) + " more bytes, " + std::to_string(end_ - pos_) + " left");
    return false;
  }
  return true;
}

uint64_t SnapshotReader::fixed(size_t n) {
  if (!need(n)) return 0;
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v |= uint64_t{static_cast<unsigned char>(data_[pos_ + i])} << (8 * i);
  pos_ += n;
  return v;
}

uint64_t SnapshotReader::varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (!need(1)) return 0;
    const auto b = static_cast<unsigned char>(data_[pos_++]);
    v |= uint64_t{b & 0x7FU} << shift;
    if ((b & 0x80) == 0) return v;
  }
  fail("varint longer than 10 bytes");
  return 0;
}

int64_t SnapshotReader::signedVarint() {
  const uint64_t u = varint();
  return static_cast<int64_t>((u >> 1) ^ (~(u & 1) + 1));
}

uint8_t SnapshotReader::u8() {
  if (!need(1)) return 0;
  return static_cast<uint8_t>(data_[pos_++]);
}

bool SnapshotReader::flag() {
  const uint8_t b = u8();
  if (b > 1) fail("flag byte " + std::to_string(b));
  return b == 1;
}

double SnapshotReader::real() { return std::bit_cast<double>(fixed(8)); }

std::string SnapshotReader::string() {
  const uint64_t n = count(1);
  if (!need(n)) return {};
  std::string s = data_.substr(pos_, n);
  pos_ += n;
  return s;
}

Value SnapshotReader::value() {
  switch (const uint8_t kind = u8(); static_cast<Value::Kind>(kind)) {
    case Value::Kind::kNull:
      return Value();
    case Value::Kind::kBool:
      return Value(flag());
    case Value::Kind::kInt:
      return Value(signedVarint());
    case Value::Kind::kDouble:
      return Value(real());
    case Value::Kind::kString:
      return Value(string());
    default:
      fail("unknown value kind " + std::to_string(kind));
      return Value();
  }
}

EventPtr SnapshotReader::event() {
  const uint64_t i = varint();
  if (i == 0) return nullptr;
  if (i > events_.size()) {
    fail("event " + std::to_string(i - 1) + " is not in the table of " +
         std::to_string(events_.size()));
    return nullptr;
  }
  return events_[i - 1];
}

uint64_t SnapshotReader::count(size_t min_bytes) {
  const uint64_t n = varint();
  if (ok() && n > (end_ - pos_) / std::max<size_t>(min_bytes, 1)) {
    fail("a count of " + std::to_string(n) + " exceeds the " + std::to_string(end_ - pos_) +
         " bytes left");
    return 0;
  }
  return n;
}

bool SnapshotReader::section(std::string_view name, uint32_t version, uint64_t shape) {
  const std::string got = string();
  const uint64_t got_version = varint();
  const uint64_t got_shape = varint();
  if (!ok()) return false;
  if (got != name) {
    fail("expected the state of '" + std::string(name) + "', found '" + got + "'");
    return false;
  }
  if (got_version != version) {
    fail("'" + got + "' state version " + std::to_string(got_version) + "; this build reads " +
         std::to_string(version));
    return false;
  }
  if (carrying_over_ && (shape == 0 || got_shape == 0)) {
    fail("'" + got + "' does not carry its state over an edited query");
    return false;
  }
  if (got_shape != shape) {
    fail(carrying_over_ ? "the edit changes what '" + got + "' keeps (the state's shape)"
                        : "'" + got + "' state of another shape (another query or build)");
    return false;
  }
  return true;
}

// --- event fields ------------------------------------------------------------

void writeEventFields(SnapshotWriter& w, const Event& e) {
  w.string(e.type().name());
  w.signedVarint(e.start());
  w.signedVarint(e.end());
  w.real(e.probability());
  w.signedVarint(e.cost());
  w.varint(e.id());
  w.string(e.source().name());
  w.value(e.key());
  w.varint(e.attributes().size());
  for (const Attribute& a : e.attributes()) {
    w.string(a.name.name());
    w.value(a.value);
  }
  w.varint(e.constituents().size());
  for (const EventPtr& part : e.constituents()) w.event(part);
}

EventPtr readEventFields(SnapshotReader& r) {
  const std::string type = r.string();
  const Timestamp start = r.signedVarint();
  const Timestamp end = r.signedVarint();
  const double probability = r.real();
  const int64_t cost = r.signedVarint();
  const uint64_t id = r.varint();
  const std::string source = r.string();
  Value key = r.value();
  if (!r.ok()) return nullptr;
  if (type.empty() || start > end || !(probability >= 0.0 && probability <= 1.0) ||
      cost < INT32_MIN || cost > INT32_MAX) {
    r.fail("an event's type, interval, probability or cost is out of range");
    return nullptr;
  }
  EventBuilder b(holdName(type));
  b.probability(probability).cost(static_cast<int32_t>(cost)).id(id).key(std::move(key));
  if (!source.empty()) b.source(holdName(source));
  const uint64_t attrs = r.count(2);  // a name's length and a value's kind at least
  b.reserveAttributes(attrs);
  for (uint64_t i = 0; i < attrs && r.ok(); ++i) {
    const std::string name = r.string();
    Value value = r.value();
    if (r.ok()) b.set(holdName(name), std::move(value));
  }
  const uint64_t parts = r.count(1);
  for (uint64_t i = 0; i < parts && r.ok(); ++i) {
    EventPtr part = r.event();
    if (part == nullptr && r.ok()) r.fail("an event's constituent is missing");
    if (r.ok()) b.constituent(std::move(part));
  }
  if (!r.ok()) return nullptr;
  // Last: constituent() widened the interval, the stored one is exact.
  b.interval(start, end);
  return b.build();
}

}  // namespace cepbus::plugin
