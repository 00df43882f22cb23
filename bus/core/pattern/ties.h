#pragma once

// Equality ties: which of a query's variables its WHERE clause forces to agree
// on one attribute.
//
// A top-level conjunct `x.attr = y.attr` ties x and y on attr (a Kleene
// variable through its current element, `b[i].attr`); `x.attr = literal`
// ties x to that literal, so two variables tied to one literal are tied to
// each other. Ties are transitive. When every variable of a query, negated
// ones included, is tied to every other on attr, the events of any match
// agree on attr (a comparison with a missing attribute is false), so the
// stream may be split by attr and each part matched alone with the same
// result, provided the strategy looks at no neighbouring event of the whole
// stream: what PARTITION BY attr does, and what a cluster node that sees one
// partition relies on.
//
// Thread safety: pure functions of their arguments.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/api.h"
#include "bus/core/pattern/ast.h"

namespace cepbus::pattern {

// The first variable (in pattern order) that the WHERE clause does not tie
// to the query's first variable on `attr`; std::nullopt when it ties them
// all (or the query has fewer than two variables). An element without a
// variable (`SEQ(A a, B, C c)`) cannot be tied: "the unnamed B element".
CEPBUS_API std::optional<std::string> firstUntiedVariable(const Query& query,
                                                          std::string_view attr);

// The attributes that some top-level conjunct `x.attr = y.attr` compares
// between two variables, in order of first mention: the candidates for a
// split of the stream the query itself implies.
CEPBUS_API std::vector<std::string> comparedAttributes(const Query& query);

}  // namespace cepbus::pattern
