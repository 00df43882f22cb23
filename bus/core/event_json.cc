#include "bus/core/event_json.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "bus/core/fast_event_decoder.h"
#include "bus/core/wire_names.h"

namespace cepbus {
namespace {

using Json = nlohmann::json;

Result<Value> toValue(const Json& j, std::string_view what) {
  switch (j.type()) {
    case Json::value_t::boolean:
      return Value(j.get<bool>());
    case Json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case Json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) {
        return Status::invalidArgument(std::string(what) + ": integer out of range");
      }
      return Value(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float:
      return Value(j.get<double>());
    case Json::value_t::string:
      return Value(j.get<std::string>());
    case Json::value_t::null:
      return Value();
    default:
      return Status::invalidArgument(std::string(what) + ": expected a scalar, got " +
                                     j.type_name());
  }
}

Result<int64_t> toInteger(const Json& j, std::string_view field) {
  if (j.is_number_integer() && !(j.is_number_unsigned() && j.get<uint64_t>() > INT64_MAX)) {
    return j.get<int64_t>();
  }
  return Status::invalidArgument("\"" + std::string(field) + "\": expected an integer, got " +
                                 (j.is_number() ? j.dump() : std::string(j.type_name())));
}

Result<EventPtr> fromJson(const Json& j, WireNameQuota* names) {
  if (!j.is_object()) {
    return Status::invalidArgument(std::string("expected a JSON object, got ") + j.type_name());
  }
  auto type_it = j.find("type");
  if (type_it == j.end()) return Status::invalidArgument("missing field \"type\"");
  if (!type_it->is_string() || type_it->get_ref<const std::string&>().empty()) {
    return Status::invalidArgument("\"type\": expected a non-empty string");
  }
  auto ts_it = j.find("ts");
  if (ts_it == j.end()) return Status::invalidArgument("missing field \"ts\"");
  auto ts = toInteger(*ts_it, "ts");
  if (!ts) return ts.status();

  const std::string& type_name = type_it->get_ref<const std::string&>();
  // An event type goes out as an AMQP subject, a C string in Proton's core:
  // with a NUL it would arrive cut short.
  if (type_name.find('\0') != std::string::npos) {
    return Status::invalidArgument("\"type\": must not contain a NUL character");
  }
  std::optional<NameHold> type = holdWireName(type_name, names);
  if (!type) return Status::rejected(wireNameRefusal("event type", type_name, names));
  EventBuilder b(std::move(*type));
  Timestamp start = *ts;
  bool has_start = false;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const Json& v = it.value();
    if (k == "type" || k == "ts") continue;
    if (k == "attrs") {
      if (!v.is_object()) return Status::invalidArgument("\"attrs\": expected an object");
      for (auto a = v.begin(); a != v.end(); ++a) {
        auto value = toValue(a.value(), "attrs." + a.key());
        if (!value) return value.status();
        std::optional<NameHold> name = holdWireName(a.key(), names);
        if (!name) return Status::rejected(wireNameRefusal("attribute name", a.key(), names));
        b.set(std::move(*name), std::move(*value));
      }
    } else if (k == "prob") {
      if (!v.is_number()) return Status::invalidArgument("\"prob\": expected a number");
      const double p = v.get<double>();
      if (!(p >= 0.0 && p <= 1.0)) {
        return Status::invalidArgument("\"prob\": expected a probability in [0,1], got " +
                                       v.dump());
      }
      b.probability(p);
    } else if (k == "key") {
      if (!v.is_string() && !v.is_number_integer()) {
        return Status::invalidArgument("\"key\": expected a string or an integer");
      }
      auto key = toValue(v, "key");
      if (!key) return key.status();
      b.key(std::move(*key));
    } else if (k == "cost") {
      auto cost = toInteger(v, "cost");
      if (!cost) return cost.status();
      if (*cost < INT32_MIN || *cost > INT32_MAX) {
        return Status::invalidArgument("\"cost\": out of range");
      }
      b.cost(static_cast<int32_t>(*cost));
    } else if (k == "id") {
      if (!v.is_number_unsigned() || v.get<uint64_t>() == 0) {
        return Status::invalidArgument("\"id\": expected a positive integer");
      }
      b.id(v.get<uint64_t>());
    } else if (k == "source") {
      if (!v.is_string()) return Status::invalidArgument("\"source\": expected a string");
      std::optional<NameHold> source = holdWireName(v.get_ref<const std::string&>(), names);
      if (!source) {
        return Status::rejected(wireNameRefusal("source", v.get_ref<const std::string&>(), names));
      }
      b.source(std::move(*source));
    } else if (k == "start") {
      auto s = toInteger(v, "start");
      if (!s) return s.status();
      start = *s;
      has_start = true;
    } else if (k == "events") {
      if (!v.is_array()) return Status::invalidArgument("\"events\": expected an array");
      for (const Json& part : v) {
        auto e = fromJson(part, names);
        if (!e) return Status::invalidArgument("\"events\": " + e.status().message());
        b.constituent(std::move(*e));
      }
    } else {
      return Status::invalidArgument("unknown field \"" + k + "\"");
    }
  }
  if (has_start && start > *ts) {
    return Status::invalidArgument("\"start\" is after \"ts\"");
  }
  b.interval(start, *ts);
  return b.build();
}

Json toJson(const Event& e, EventFormat format) {
  Json j = Json::object();
  j["type"] = std::string(e.type().name());
  j["ts"] = e.ts();
  Json attrs = Json::object();
  for (const Attribute& a : e.attributes()) {
    Json& slot = attrs[std::string(a.name.name())];
    switch (a.value.kind()) {
      case Value::Kind::kNull:
        slot = nullptr;
        break;
      case Value::Kind::kBool:
        slot = a.value.asBool();
        break;
      case Value::Kind::kInt:
        slot = a.value.asInt();
        break;
      case Value::Kind::kDouble:
        slot = a.value.asDouble();
        break;
      case Value::Kind::kString:
        slot = a.value.asString();
        break;
    }
  }
  j["attrs"] = std::move(attrs);
  if (e.probability() != 1.0) j["prob"] = e.probability();
  if (!e.key().isNull()) {
    if (e.key().kind() == Value::Kind::kInt) {
      j["key"] = e.key().asInt();
    } else {
      j["key"] = e.key().asString();
    }
  }
  if (e.cost() != 0) j["cost"] = e.cost();
  if (format == EventFormat::kFull) {
    if (e.start() != e.end()) j["start"] = e.start();
    j["id"] = e.id();
    if (!e.source().empty()) j["source"] = std::string(e.source().name());
    if (e.isComposite()) {
      Json parts = Json::array();
      for (const EventPtr& p : e.constituents()) parts.push_back(toJson(*p, format));
      j["events"] = std::move(parts);
    }
  } else if (e.start() != e.end()) {
    j["start"] = e.start();
  }
  return j;
}

}  // namespace

Result<EventPtr> decodeEvent(std::string_view line, WireNameQuota* names) {
  // A single line has no padding after it: copy it into a buffer that has.
  // Per thread, a cache of scratch buffers that nothing else reads: no
  // protocol between components.
  thread_local FastEventDecoder decoder;
  thread_local std::string padded;
  padded.assign(line);
  padded.resize(line.size() + FastEventDecoder::kPadding);
  if (std::optional<EventPtr> e =
          decoder.decode(std::string_view(padded.data(), line.size()), padded.size(),
                         /*hold_new_names=*/names == nullptr)) {
    return std::move(*e);
  }
  return decodeEventReference(line, names);
}

Result<EventPtr> decodeEventReference(std::string_view line, WireNameQuota* names) {
  Json j;
  try {
    j = Json::parse(line);
  } catch (const Json::exception& e) {
    // Not only parse_error: a number too large for a double ("1e999") is an
    // out_of_range. nlohmann's message starts with "[json.exception.parse_error.101] ";
    // keep the reason.
    std::string what = e.what();
    if (auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
    return Status::invalidArgument("malformed JSON: " + what);
  }
  return fromJson(j, names);
}

std::string encodeEvent(const Event& event, EventFormat format) {
  // Decoders keep every event string valid UTF-8 (bus/core/utf8.h); should one
  // slip through anyway, a replacement character is better than an exception
  // on the journal or feed thread that encodes it.
  return toJson(event, format).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Result<std::string> encodeEventExactly(const Event& event, EventFormat format) {
  try {
    return toJson(event, format).dump(-1, ' ', false, nlohmann::json::error_handler_t::strict);
  } catch (const nlohmann::json::exception& e) {
    return Status::invalidArgument(std::string("cannot be encoded as JSON exactly: ") + e.what());
  }
}

// Big enough that a refill is rare, small enough to stay in cache.
constexpr size_t kReadBlock = 1 << 20;

EventLineReader::EventLineReader(std::istream& in)
    : in_(in),
      decoder_(std::make_unique<FastEventDecoder>()),
      buffer_(kReadBlock + FastEventDecoder::kPadding) {}

EventLineReader::~EventLineReader() = default;

size_t EventLineReader::fill() {
  std::streambuf* sb = in_.rdbuf();
  if (sb == nullptr) return 0;
  char* dst = buffer_.data() + end_;
  const size_t room = buffer_.size() - FastEventDecoder::kPadding - end_;
  std::streamsize avail = sb->in_avail();
  if (avail == 0) {
    if (sb->sgetc() == std::char_traits<char>::eof()) return 0;
    avail = sb->in_avail();
  }
  if (avail < 0) return 0;
  if (avail == 0) {
    // An unbuffered stream (std::cin synced with stdio): up to a newline.
    size_t n = 0;
    for (int c; n < room && (c = sb->sbumpc()) != std::char_traits<char>::eof();) {
      dst[n++] = static_cast<char>(c);
      if (c == '\n') break;
    }
    return n;
  }
  return static_cast<size_t>(sb->sgetn(dst, std::min(avail, static_cast<std::streamsize>(room))));
}

bool EventLineReader::nextLine(std::string_view& line) {
  size_t scanned = begin_;
  for (;;) {
    const char* data = buffer_.data();
    if (const void* nl = std::memchr(data + scanned, '\n', end_ - scanned)) {
      const size_t at = static_cast<const char*>(nl) - data;
      line = std::string_view(data + begin_, at - begin_);
      begin_ = at + 1;
      return true;
    }
    scanned = end_;
    if (eof_) {
      if (begin_ == end_) return false;
      line = std::string_view(data + begin_, end_ - begin_);  // a last line without '\n'
      begin_ = end_;
      return true;
    }
    // Keep the partial line, make room (a line longer than a block grows the
    // buffer), and read on.
    std::memmove(buffer_.data(), data + begin_, end_ - begin_);
    scanned -= begin_;
    end_ -= begin_;
    begin_ = 0;
    if (buffer_.size() - FastEventDecoder::kPadding - end_ < kReadBlock / 2) {
      buffer_.resize(buffer_.size() * 2);
    }
    const size_t n = fill();
    if (n == 0) eof_ = true;
    end_ += n;
  }
}

Result<EventPtr> EventLineReader::next() {
  std::string_view line;
  while (nextLine(line)) {
    ++line_no_;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const size_t capacity = buffer_.size() - static_cast<size_t>(line.data() - buffer_.data());
    if (std::optional<EventPtr> e = decoder_->decode(line, capacity)) return std::move(*e);
    auto e = decodeEventReference(line);
    if (!e) {
      return Status::invalidArgument("line " + std::to_string(line_no_) + ": " +
                                     e.status().message());
    }
    return e;
  }
  return Status::notFound("end of input");
}

}  // namespace cepbus
