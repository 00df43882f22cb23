#include "bus/core/value.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

namespace cepbus {

uint64_t combineKeyHash(uint64_t h, uint64_t value_hash) {
  return h ^ (value_hash + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
}

// Equal Values hash equally: an integral double hashes as the integer, as
// 1 == 1.0; every NaN hashes alike (ValueKeyEqual makes them one key).
uint64_t keyValueHash(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNull:
      return 0x51ed270b27d2b6a5ULL;
    case Value::Kind::kBool:
      return v.asBool() ? 0x2545f4914f6cdd1dULL : 0x9e3779b97f4a7c15ULL;
    case Value::Kind::kInt:
      return static_cast<uint64_t>(v.asInt()) * 0xff51afd7ed558ccdULL;
    case Value::Kind::kDouble: {
      const double d = v.asDouble();
      if (std::isnan(d)) return 0x7ff8000000000000ULL;
      if (d == std::trunc(d) && std::fabs(d) < 9.2e18) {
        return static_cast<uint64_t>(static_cast<int64_t>(d)) * 0xff51afd7ed558ccdULL;
      }
      uint64_t bits;
      static_assert(sizeof bits == sizeof d);
      std::memcpy(&bits, &d, sizeof bits);
      return bits * 0xc4ceb9fe1a85ec53ULL;
    }
    case Value::Kind::kString:
      return std::hash<std::string_view>{}(v.asString());
  }
  return 0;
}

bool sameKeyValue(const Value& a, const Value& b) {
  if (a.isNull() || b.isNull()) return a.isNull() && b.isNull();
  if (a == b) return true;
  return a.kind() == Value::Kind::kDouble && b.kind() == Value::Kind::kDouble &&
         std::isnan(a.asDouble()) && std::isnan(b.asDouble());
}

double Value::toDouble() const {
  switch (kind()) {
    case Kind::kInt:
      return static_cast<double>(asInt());
    case Kind::kDouble:
      return asDouble();
    default:
      return 0;
  }
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::kNull:
      return false;
    case Kind::kBool:
      return asBool();
    case Kind::kInt:
      return asInt() != 0;
    case Kind::kDouble:
      return asDouble() != 0;
    case Kind::kString:
      return !asString().empty();
  }
  return false;
}

std::optional<std::strong_ordering> Value::compare(const Value& other) const {
  const Kind a = kind(), b = other.kind();
  if (a == Kind::kInt && b == Kind::kInt) return asInt() <=> other.asInt();
  if (isNumber() && other.isNumber()) {
    const double x = toDouble(), y = other.toDouble();
    if (std::isnan(x) || std::isnan(y)) return std::nullopt;
    if (x < y) return std::strong_ordering::less;
    if (x > y) return std::strong_ordering::greater;
    return std::strong_ordering::equal;
  }
  if (a == Kind::kString && b == Kind::kString) {
    const int c = asString().compare(other.asString());
    return c < 0 ? std::strong_ordering::less
                 : (c > 0 ? std::strong_ordering::greater : std::strong_ordering::equal);
  }
  if (a == Kind::kBool && b == Kind::kBool) return asBool() <=> other.asBool();
  return std::nullopt;
}

bool Value::operator==(const Value& other) const {
  if (isNull() && other.isNull()) return true;
  auto c = compare(other);
  return c.has_value() && *c == std::strong_ordering::equal;
}

std::string Value::toString() const {
  switch (kind()) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return asBool() ? "true" : "false";
    case Kind::kInt:
      return std::to_string(asInt());
    case Kind::kDouble:
      return nlohmann::json(asDouble()).dump();
    case Kind::kString:
      // Used in messages about bad input: must not throw on the bad input itself.
      return nlohmann::json(asString())
          .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return "null";
}

const char* kindName(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::kNull:
      return "null";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kDouble:
      return "double";
    case Value::Kind::kString:
      return "string";
  }
  return "?";
}

size_t ValueKeyHash::operator()(const std::vector<Value>& key) const {
  uint64_t h = kKeyHashSeed;
  for (const Value& v : key) h = combineKeyHash(h, keyValueHash(v));
  return static_cast<size_t>(h);
}

bool ValueKeyEqual::operator()(const std::vector<Value>& a, const std::vector<Value>& b) const {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), sameKeyValue);
}

}  // namespace cepbus
