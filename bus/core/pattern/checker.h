#pragma once

// The semantic checks of the pattern language, run on what the parser
// built: variables bound once and where they may be (Kleene elements inside
// SEQ or AGG, NOT between two positive SEQ elements), what each expression
// may name where it stands (WHERE, RETURN, a selection, an aggregation, a
// filter), b[i] only with a Kleene variable, and static types where a
// literal or a built-in fixes one. Each throws ParseError (parse_error.h)
// at the first mistake, with its line and column. Internal to bus/core.

#include "bus/core/pattern/ast.h"

namespace cepbus::pattern::parsing {

// Checks a parsed query and fills Query::variables.
void checkQuery(Query& query);

// Checks a parsed content filter: a boolean over one event's attributes.
void checkFilter(const Expr& filter);

}  // namespace cepbus::pattern::parsing
