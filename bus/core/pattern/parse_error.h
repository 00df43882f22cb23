#pragma once

// ParseError: how the pattern parser (parser.cc) and its semantic checker
// (checker.h) report a mistake in a query's text. Parsing is control plane:
// an error is thrown where it is found and turned into a Status, "line L,
// column C: ...", at the parser's entry points. Internal to bus/core: no SDK
// header includes it.

#include <string>
#include <utility>

#include "bus/core/pattern/ast.h"
#include "bus/core/status.h"

namespace cepbus::pattern::parsing {

struct ParseError {
  SourcePos pos;
  std::string message;
};

[[noreturn]] inline void fail(SourcePos pos, std::string message) {
  throw ParseError{pos, std::move(message)};
}

inline Status toStatus(const ParseError& e) {
  return Status::invalidArgument("line " + std::to_string(e.pos.line) + ", column " +
                                 std::to_string(e.pos.column) + ": " + e.message);
}

}  // namespace cepbus::pattern::parsing
