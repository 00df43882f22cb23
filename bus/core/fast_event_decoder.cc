#include "bus/core/fast_event_decoder.h"

#include <simdjson.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bus/core/wire_names.h"

namespace cepbus {
namespace {

namespace od = simdjson::ondemand;

// The contract's fields this decoder reads, as bits for duplicate detection
// ("events" is left to the reference decoder).
enum Field : unsigned {
  kType = 1u << 0,
  kTs = 1u << 1,
  kAttrs = 1u << 2,
  kProb = 1u << 3,
  kKey = 1u << 4,
  kCost = 1u << 5,
  kId = 1u << 6,
  kSource = 1u << 7,
  kStart = 1u << 8,
};

unsigned fieldOf(std::string_view key) {
  if (key == "type") return kType;
  if (key == "ts") return kTs;
  if (key == "attrs") return kAttrs;
  if (key == "prob") return kProb;
  if (key == "key") return kKey;
  if (key == "cost") return kCost;
  if (key == "id") return kId;
  if (key == "source") return kSource;
  if (key == "start") return kStart;
  return 0;
}

// A JSON number the reference decoder reads as a signed integer or a double;
// false for anything else (an integer beyond INT64_MAX, not a number), and
// for a number of 19 digits or more: simdjson 3.0.1 (Debian 12's) reads a
// decimal of 19 digits or more (12345678901234567.89, or 99 digits before the
// point) as 0, found by fuzz_event_json; such numbers are left to the
// reference decoder.
bool readNumber(od::value& v, od::number& out) {
  const std::string_view raw = v.raw_json_token();
  if (std::count_if(raw.begin(), raw.end(), [](char c) { return c >= '0' && c <= '9'; }) >= 19) {
    return false;
  }
  return !v.get_number().get(out) && !out.is_uint64();
}

// An attribute value as the reference reads it; nullopt for an object, an
// array, an integer beyond INT64_MAX or anything malformed.
std::optional<Value> scalarOf(od::value& v) {
  od::json_type t;
  if (v.type().get(t)) return std::nullopt;
  switch (t) {
    case od::json_type::boolean: {
      bool b = false;
      if (v.get_bool().get(b)) return std::nullopt;
      return Value(b);
    }
    case od::json_type::number: {
      od::number n;
      if (!readNumber(v, n)) return std::nullopt;
      return n.is_int64() ? Value(n.get_int64()) : Value(n.get_double());
    }
    case od::json_type::string: {
      std::string_view text;
      if (v.get_string().get(text)) return std::nullopt;
      return Value(text);
    }
    case od::json_type::null: {
      // The type is read from the first letter only: "n48" gets here too,
      // and is_null() reports it as an error (its conversion to bool would
      // throw it).
      bool null = false;
      if (v.is_null().get(null) || !null) return std::nullopt;
      return Value();
    }
    default:
      return std::nullopt;
  }
}

std::optional<int64_t> integerOf(od::value& v) {
  od::number n;
  if (v.get_number().get(n) || !n.is_int64()) return std::nullopt;
  return n.get_int64();
}

}  // namespace

const size_t FastEventDecoder::kPadding = simdjson::SIMDJSON_PADDING;

class FastEventDecoder::Impl {
 public:
  std::optional<EventPtr> decode(std::string_view line, size_t capacity, bool hold_new_names) {
    hold_new_names_ = hold_new_names;
    od::document doc;
    od::object object;
    if (parser_.iterate(line.data(), line.size(), capacity).get(doc) ||
        doc.get_object().get(object)) {
      return std::nullopt;
    }
    attrs_.clear();
    Symbol type;
    Timestamp ts = 0;
    Timestamp start = 0;
    double probability = 1.0;
    Value key;
    int64_t cost = 0;
    EventId id = 0;
    Symbol source;
    unsigned seen = 0;
    for (auto member : object) {
      od::field field;
      std::string_view name;
      if (std::move(member).get(field) || field.unescaped_key().get(name)) return std::nullopt;
      const unsigned which = fieldOf(name);
      if (which == 0 || (seen & which) != 0) return std::nullopt;
      seen |= which;
      od::value v = field.value();
      switch (which) {
        case kType: {
          std::string_view text;
          if (v.get_string().get(text) || text.empty() || text.find('\0') != text.npos) {
            return std::nullopt;
          }
          std::optional<Symbol> s = symbol(text);
          if (!s) return std::nullopt;
          type = *s;
          break;
        }
        case kTs:
        case kStart: {
          std::optional<int64_t> t = integerOf(v);
          if (!t) return std::nullopt;
          (which == kTs ? ts : start) = *t;
          break;
        }
        case kAttrs:
          if (!readAttributes(v)) return std::nullopt;
          break;
        case kProb: {
          od::number n;
          if (!readNumber(v, n)) return std::nullopt;
          probability = n.is_int64() ? static_cast<double>(n.get_int64()) : n.get_double();
          if (!(probability >= 0.0 && probability <= 1.0)) return std::nullopt;
          break;
        }
        case kKey: {
          od::json_type t;
          if (v.type().get(t)) return std::nullopt;
          if (t == od::json_type::string) {
            std::string_view text;
            if (v.get_string().get(text)) return std::nullopt;
            key = Value(text);
          } else {
            std::optional<int64_t> k = integerOf(v);
            if (!k) return std::nullopt;
            key = Value(*k);
          }
          break;
        }
        case kCost: {
          std::optional<int64_t> c = integerOf(v);
          if (!c || *c < INT32_MIN || *c > INT32_MAX) return std::nullopt;
          cost = *c;
          break;
        }
        case kId: {
          od::number n;
          if (v.get_number().get(n) || n.is_double()) return std::nullopt;
          id = n.is_uint64() ? n.get_uint64() : static_cast<EventId>(n.get_int64());
          if (!n.is_uint64() && n.get_int64() <= 0) return std::nullopt;
          break;
        }
        case kSource: {
          std::string_view text;
          if (v.get_string().get(text)) return std::nullopt;
          std::optional<Symbol> s = symbol(text);
          if (!s) return std::nullopt;
          source = *s;
          break;
        }
        default:
          return std::nullopt;
      }
    }
    // Trailing content after the object: only the reference words the error.
    const char* rest = nullptr;
    if (doc.current_location().get(rest) != simdjson::OUT_OF_BOUNDS ||
        (seen & (kType | kTs)) != (kType | kTs)) {
      return std::nullopt;
    }
    if ((seen & kStart) == 0) start = ts;
    if (start > ts) return std::nullopt;

    EventBuilder b(type);
    b.interval(start, ts).probability(probability).cost(static_cast<int32_t>(cost));
    if (!key.isNull()) b.key(std::move(key));
    if (id != 0) b.id(id);
    if (!source.empty()) b.source(source);
    b.reserveAttributes(attrs_.size());
    for (Attribute& a : attrs_) b.set(a.name, std::move(a.value));
    return b.build();
  }

 private:
  // Scalar attributes into attrs_, in line order (a repeated name: the last
  // wins, as in the reference).
  bool readAttributes(od::value& v) {
    od::object object;
    if (v.get_object().get(object)) return false;
    for (auto member : object) {
      od::field field;
      std::string_view name;
      if (std::move(member).get(field) || field.unescaped_key().get(name)) return false;
      std::optional<Symbol> s = symbol(name);
      if (!s) return false;
      od::value value = field.value();
      std::optional<Value> v = scalarOf(value);
      if (!v) return false;
      attrs_.push_back(Attribute{*s, std::move(*v)});
    }
    return true;
  }

  // The symbol of a name: interned, or held from the wire (wire_names.h)
  // when hold_new_names_; nullopt otherwise, or when the name is refused:
  // the reference decoder then holds it through the client's quota, or
  // gives the refusal. The cache spares the symbol table's lock on every
  // field of every line; it holds the held names it caches, so the events
  // built from them only count a reference each.
  std::optional<Symbol> symbol(std::string_view name) {
    if (auto it = names_.find(name); it != names_.end()) {
      const Symbol s = it->second.symbol();
      if (s.held() && !hold_new_names_) return std::nullopt;  // a client's quota must see it
      return s;
    }
    NameHold hold = NameHold::of(Symbol::find(name));
    if (hold.symbol().empty() && !name.empty()) {
      std::optional<NameHold> held = hold_new_names_ ? holdWireName(name) : std::nullopt;
      if (!held) return std::nullopt;
      hold = std::move(*held);
    }
    const Symbol s = hold.symbol();
    if (s.held() && !hold_new_names_) return std::nullopt;
    if (names_.size() >= kMaxCachedNames) names_.clear();
    names_.emplace(std::string(name), std::move(hold));
    return s;
  }

  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // Bounds the cache of a stream with many distinct names, and so the held
  // names a decoder keeps alive.
  static constexpr size_t kMaxCachedNames = 4096;

  od::parser parser_;
  bool hold_new_names_ = true;  // of the current decode()
  std::unordered_map<std::string, NameHold, Hash, std::equal_to<>> names_;
  std::vector<Attribute> attrs_;
};

FastEventDecoder::FastEventDecoder() : impl_(std::make_unique<Impl>()) {}
FastEventDecoder::~FastEventDecoder() = default;

std::optional<EventPtr> FastEventDecoder::decode(std::string_view line, size_t capacity,
                                                 bool hold_new_names) {
  if (capacity < line.size() + kPadding) return std::nullopt;
  return impl_->decode(line, capacity, hold_new_names);
}

}  // namespace cepbus
