#pragma once

// Content filters for subscriptions: `price > 10 AND symbol = 'IBM'`.
//
// A filter is a boolean expression (the WHERE grammar) over one event's bare
// attribute names and the built-ins ts, start, prob and type (the event type's
// name: `type = 'Stock'`). It is parsed and compiled once by the same parser
// and compiler as query expressions and obeys the same run-time rules: a
// missing attribute or a type mismatch makes a comparison false.
//
// Thread safety: compileFilter is pure; the returned filter is immutable and
// matches() is safe from any thread.

#include <string_view>

#include "bus/core/api.h"
#include "bus/core/event_filter.h"
#include "bus/core/status.h"

namespace cepbus::pattern {

// Fails with "line L, column C: ..." on a syntax error, a variable reference
// (`a.price`), an aggregate, or a condition that cannot be boolean.
CEPBUS_API Result<EventFilterPtr> compileFilter(std::string_view text);

}  // namespace cepbus::pattern
