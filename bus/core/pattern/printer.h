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

#include "bus/core/pattern/ast.h"

namespace cepbus::pattern {

std::string toString(const Expr& e);
std::string toString(const PatternNode& p);
std::string toString(const Query& q);

}  // namespace cepbus::pattern
