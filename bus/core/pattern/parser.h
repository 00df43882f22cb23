#pragma once

// Parsing the cepbus pattern language (grammar: docs/pattern-language.md).
//
// Every function returns a Result; nothing throws out of it. A syntax error
// reads "line L, column C: expected X, found Y"; a semantic error (unknown or
// duplicate variable, b[i] on a single variable, NOT at the edge of SEQ,
// non-positive WITHIN, a unit on a duration where `ts` has none, ...) also
// names the line and column it concerns.
//
// Thread safety: the functions are pure and safe to call from any thread.

#include <cstdint>
#include <optional>
#include <string_view>

#include "bus/core/api.h"
#include "bus/core/pattern/ast.h"
#include "bus/core/status.h"

namespace cepbus::pattern {

// The unit of the input's `ts`, as a query declares it (a descriptor's
// time-unit attribute, `cepbus match --time-unit`): milliseconds since the
// epoch and so on. kNone: `ts` has no declared unit, and a duration in the
// query can only be a bare number of `ts` units.
enum class TimeUnit : uint8_t { kNone, kMicroseconds, kMilliseconds, kSeconds };

// The unit named "us", "ms" or "s" (the units `ts` may be declared in);
// nullopt for any other name.
CEPBUS_API std::optional<TimeUnit> tsUnitNamed(std::string_view name);

// What a query's text does not say about its input.
struct ParseOptions {
  // With a unit, a duration may carry one (`WITHIN 30 s`, `WITHIN(p, 250 ms)`)
  // and is converted to `ts` units when parsed, so the Query holds `ts` units
  // whatever the text wrote.
  TimeUnit ts_unit = TimeUnit::kNone;
};

// Parses and checks a whole query: PATTERN ... [WHERE ...] [WITHIN n [unit]]
// [PARTITION BY a, ...] [STRATEGY s] [CONTEXT c] [RETURN T(...)]
// [EMIT FIRST|LAST EVERY d [PER expr]] [AFTER MATCH SKIP PAST LAST EVENT].
// Fills Query::variables. A duration with a unit is refused (with its line and
// column) when `options` declares no unit for `ts`, when the unit is unknown,
// when it is not a whole number of `ts` units, or when it does not fit 64 bits.
CEPBUS_API Result<Query> parseQuery(std::string_view text, const ParseOptions& options);

// parseQuery(text, {}): durations are bare numbers of `ts` units.
CEPBUS_API Result<Query> parseQuery(std::string_view text);

// Parses a content filter: a boolean expression over one event's bare
// attribute names and built-ins, e.g. `price > 10 AND symbol = 'IBM'` or
// `type = 'Stock'`. Attribute references in the result have an empty var.
CEPBUS_API Result<ExprPtr> parseFilter(std::string_view text);

}  // namespace cepbus::pattern
