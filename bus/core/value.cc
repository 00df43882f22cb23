#include "bus/core/value.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace cepbus {

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

}  // namespace cepbus
