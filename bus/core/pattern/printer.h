#pragma once

// Canonical text of the AST, for error messages and the admin API. Printing
// then parsing gives back the same tree: parseQuery(toString(q)) prints as
// toString(q).
//
// SEQ/AND/OR print in function form (`SEQ(A a, B b)`), binary algebra
// operators fully parenthesized (`(A ~ B)`), expressions with the fewest
// parentheses their precedence needs, keywords upper case, strings single
// quoted.
//
// Thread safety: pure functions, safe from any thread.

#include <string>

#include "bus/core/api.h"
#include "bus/core/pattern/ast.h"

namespace cepbus::pattern {

CEPBUS_API std::string toString(const Expr& e);
CEPBUS_API std::string toString(const PatternNode& p);
CEPBUS_API std::string toString(const Query& q);

}  // namespace cepbus::pattern
