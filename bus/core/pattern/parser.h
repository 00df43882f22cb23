#pragma once

// Parsing the cepbus pattern language (grammar: docs/pattern-language.md).
//
// Every function returns a Result; nothing throws out of it. A syntax error
// reads "line L, column C: expected X, found Y"; a semantic error (unknown or
// duplicate variable, b[i] on a single variable, NOT at the edge of SEQ,
// non-positive WITHIN, ...) also names the line and column it concerns.
//
// Thread safety: the functions are pure and safe to call from any thread.

#include <string_view>

#include "bus/core/api.h"
#include "bus/core/pattern/ast.h"
#include "bus/core/status.h"

namespace cepbus::pattern {

// Parses and checks a whole query: PATTERN ... [WHERE ...] [WITHIN n]
// [PARTITION BY a, ...] [STRATEGY s] [CONTEXT c] [RETURN T(...)].
// Fills Query::variables.
CEPBUS_API Result<Query> parseQuery(std::string_view text);

// Parses a content filter: a boolean expression over one event's bare
// attribute names and built-ins, e.g. `price > 10 AND symbol = 'IBM'` or
// `type = 'Stock'`. Attribute references in the result have an empty var.
CEPBUS_API Result<ExprPtr> parseFilter(std::string_view text);

}  // namespace cepbus::pattern
