#pragma once

// Value: an attribute value of an event — null, bool, int64, double or string.
//
// Numbers compare across int and double the way a query author expects
// (`price > 10` holds for price 10.5); strings compare only with strings.

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "bus/core/api.h"

namespace cepbus {

class CEPBUS_API Value {
 public:
  enum class Kind : uint8_t { kNull, kBool, kInt, kDouble, kString };

  Value() = default;
  Value(bool v) : v_(v) {}                           // NOLINT(google-explicit-constructor)
  Value(int64_t v) : v_(v) {}                        // NOLINT(google-explicit-constructor)
  Value(int v) : v_(static_cast<int64_t>(v)) {}      // NOLINT(google-explicit-constructor)
  Value(double v) : v_(v) {}                         // NOLINT(google-explicit-constructor)
  Value(std::string v) : v_(std::move(v)) {}         // NOLINT(google-explicit-constructor)
  Value(std::string_view v) : v_(std::string(v)) {}  // NOLINT(google-explicit-constructor)
  Value(const char* v) : v_(std::string(v)) {}       // NOLINT(google-explicit-constructor)

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool isNull() const { return kind() == Kind::kNull; }
  bool isNumber() const { return kind() == Kind::kInt || kind() == Kind::kDouble; }

  bool asBool() const { return std::get<bool>(v_); }
  int64_t asInt() const { return std::get<int64_t>(v_); }
  double asDouble() const { return std::get<double>(v_); }
  const std::string& asString() const { return std::get<std::string>(v_); }
  // The numeric value as a double; 0 for anything that is not a number.
  double toDouble() const;
  // Truthiness for boolean contexts: false for null, false, 0 and "".
  bool truthy() const;

  // Three-way comparison; nullopt when the kinds cannot be compared
  // (string vs number, anything vs null), which makes every comparison false.
  std::optional<std::strong_ordering> compare(const Value& other) const;
  bool operator==(const Value& other) const;

  // JSON-style rendering: 10, 10.5, true, "IBM", null.
  std::string toString() const;

 private:
  std::variant<std::monostate, bool, int64_t, double, std::string> v_;
};

CEPBUS_API const char* kindName(Value::Kind kind);

// Keys made of values (PARTITION BY, GROUP BY): values equal as Values are
// one key (1 and 1.0; null and null) and hash alike, and so is every NaN.
// An engine that hashes a key without building the vector (the values still
// in their event) folds keyValueHash(v) of each into kKeyHashSeed with
// combineKeyHash, which gives ValueKeyHash's hash, and compares with sameKeyValue.
inline constexpr uint64_t kKeyHashSeed = 0xcbf29ce484222325ULL;
CEPBUS_API uint64_t keyValueHash(const Value& v);
CEPBUS_API uint64_t combineKeyHash(uint64_t h, uint64_t value_hash);
CEPBUS_API bool sameKeyValue(const Value& a, const Value& b);

struct CEPBUS_API ValueKeyHash {
  size_t operator()(const std::vector<Value>& key) const;
};
struct CEPBUS_API ValueKeyEqual {
  bool operator()(const std::vector<Value>& a, const std::vector<Value>& b) const;
};

}  // namespace cepbus
