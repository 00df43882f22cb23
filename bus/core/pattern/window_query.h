#pragma once

// What a pattern engine says to a window query (FROM ... WINDOW, ast.h's
// WindowSpec): such a query reads as its one source element `Type t`, so an
// engine that walks only the pattern would run it as a single-event pattern
// and report every event. Every pattern engine calls requirePatternQuery()
// first and refuses it with this message instead.
//
// Thread safety: a pure function, safe from any thread.

#include <string_view>

#include "bus/core/api.h"
#include "bus/core/pattern/ast.h"
#include "bus/core/status.h"

namespace cepbus::pattern {

// OK for a pattern query; for a window query, InvalidArgument naming
// `engine` and the engine that runs windows.
CEPBUS_API Status requirePatternQuery(const Query& query, std::string_view engine);

}  // namespace cepbus::pattern
