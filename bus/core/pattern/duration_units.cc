#include "bus/core/pattern/duration_units.h"

#include <optional>
#include <string_view>
#include <utility>

#include "bus/core/pattern/parse_error.h"

namespace cepbus::pattern {
namespace parsing {
namespace {

// A duration's unit, as long as it is in microseconds: each unit `ts` may be
// declared in (us, ms, s) divides every longer unit, so converting between
// them multiplies or divides by a whole factor.
struct DurationUnit {
  std::string_view name;
  int64_t micros;
};
constexpr DurationUnit kDurationUnits[] = {
    {"us", 1}, {"ms", 1'000}, {"s", 1'000'000}, {"min", 60'000'000}, {"h", 3'600'000'000}};
constexpr std::string_view kDurationUnitList = "us, ms, s, min and h";

// Spellings people write for a unit, each pointing to the one the language
// takes (a short, fixed set keeps `m` from meaning minutes to one reader and
// months to another).
constexpr std::pair<std::string_view, std::string_view> kOtherSpellings[] = {
    {"usec", "us"}, {"micros", "us"}, {"microsecond", "us"}, {"microseconds", "us"},
    {"msec", "ms"}, {"millis", "ms"}, {"millisecond", "ms"}, {"milliseconds", "ms"},
    {"sec", "s"},   {"secs", "s"},    {"second", "s"},       {"seconds", "s"},
    {"m", "min"},   {"mins", "min"},  {"minute", "min"},     {"minutes", "min"},
    {"hr", "h"},    {"hrs", "h"},     {"hour", "h"},         {"hours", "h"},
};

const DurationUnit* unitNamed(std::string_view name) {
  for (const DurationUnit& unit : kDurationUnits) {
    if (unit.name == name) return &unit;
  }
  return nullptr;
}

// The name of a unit `ts` may be declared in; "" for kNone.
std::string_view tsUnitName(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kMicroseconds:
      return "us";
    case TimeUnit::kMilliseconds:
      return "ms";
    case TimeUnit::kSeconds:
      return "s";
    case TimeUnit::kNone:
      break;
  }
  return "";
}

[[noreturn]] void failUnknownUnit(const Token& unit) {
  for (const auto& [spelling, meant] : kOtherSpellings) {
    if (equalsIgnoreCase(unit.text, spelling)) {
      fail(unit.pos, "unknown time unit '" + unit.text + "'; write " + std::string(meant) +
                         " (the units are " + std::string(kDurationUnitList) + ")");
    }
  }
  for (const DurationUnit& u : kDurationUnits) {
    if (equalsIgnoreCase(unit.text, u.name)) {
      fail(unit.pos, "unknown time unit '" + unit.text + "'; write " + std::string(u.name) +
                         " (units are lower case: " + std::string(kDurationUnitList) + ")");
    }
  }
  fail(unit.pos,
       "unknown time unit '" + unit.text + "'; the units are " + std::string(kDurationUnitList));
}

}  // namespace

int64_t inTsUnits(int64_t n, const Token& number, const Token& unit, const std::string& written,
                  TimeUnit ts_unit) {
  const DurationUnit* known = unitNamed(unit.text);
  if (known == nullptr) failUnknownUnit(unit);
  if (ts_unit == TimeUnit::kNone) {
    fail(unit.pos, written +
                       ": the input's ts has no declared time unit, so a duration is a number of "
                       "ts units; declare the unit (time-unit=\"ms\" on the query, --time-unit "
                       "ms with cepbus match) or drop the unit");
  }
  const DurationUnit& ts = *unitNamed(tsUnitName(ts_unit));
  if (known->micros < ts.micros) {
    const int64_t per_ts = ts.micros / known->micros;
    if (n % per_ts != 0) {
      fail(number.pos, written + " is not a whole number of the input's ts units (" +
                           std::string(ts.name) + ")");
    }
    return n / per_ts;
  }
  int64_t in_ts = 0;
  if (__builtin_mul_overflow(n, known->micros / ts.micros, &in_ts)) {
    fail(number.pos, written + " is too long: it does not fit 64 bits of the input's ts units (" +
                         std::string(ts.name) + ")");
  }
  return in_ts;
}

}  // namespace parsing

std::optional<TimeUnit> tsUnitNamed(std::string_view name) {
  for (TimeUnit unit : {TimeUnit::kMicroseconds, TimeUnit::kMilliseconds, TimeUnit::kSeconds}) {
    if (parsing::tsUnitName(unit) == name) return unit;
  }
  return std::nullopt;
}

}  // namespace cepbus::pattern
