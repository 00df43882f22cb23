#pragma once

// ExprParser: the expression half of the pattern language's recursive-
// descent parser — predicates (WHERE, HAVING, a selection's [pred], an AGG
// condition), RETURN items and PER keys, and a subscription filter. The
// query grammar (parser.cc) is an ExprParser that also reads patterns,
// clauses and windows.
//
// Loosest to tightest: OR  AND  NOT  comparison  + -  * / %  unary -  primary.
// The grammar is in docs/pattern-language.md; each function names its rule.
//
// Internal to bus/core: no SDK header includes it.
// Thread-safety: none (one per parse). Ownership: holds its tokens.

#include <string_view>
#include <vector>

#include "bus/core/pattern/ast.h"
#include "bus/core/pattern/token_cursor.h"

namespace cepbus::pattern::parsing {

// What the text is: a query's expressions name variables (`a.price`,
// `b[i].x`) and call aggregates; a filter's name one event's attributes.
enum class Mode { kQuery, kFilter };

// The built-in attribute `attr` names (ts, start, prob, type), or kNone.
Builtin builtinOf(std::string_view attr);

class ExprParser : public TokenCursor {
 public:
  ExprParser(std::vector<Token> tokens, Mode mode, ParseOptions options = {})
      : TokenCursor(std::move(tokens), options), mode_(mode) {}

  // expr := or_expr
  ExprPtr expr();
  // filter := expr END
  ExprPtr filter();

 private:
  ExprPtr binary(BinaryOp op, SourcePos pos, ExprPtr lhs, ExprPtr rhs);
  ExprPtr orExpr();
  ExprPtr andExpr();
  ExprPtr notExpr();
  ExprPtr comparison();
  ExprPtr additive();
  ExprPtr multiplicative();
  // A minus sign directly before a number folds into the literal, so `-3`
  // is the constant -3 rather than an operation.
  ExprPtr unary();
  ExprPtr primaryExpr();
  // A filter's attribute: a bare name.
  ExprPtr bareAttribute();
  // reference := var '.' attr | var '[' index ']' '.' attr
  // index := 'i' | 'i' '-' 1 | 'last' | positive integer
  ExprPtr reference();
  // prob := 'prob' '(' ')'
  ExprPtr matchProbability();
  // aggregate := function '(' var [ '[' ']' ] [ '.' attr ] ')'; `b[]` over a
  // Kleene variable of a pattern, a bare `t` over a window's events.
  ExprPtr aggregate();

  const Mode mode_;
};

}  // namespace cepbus::pattern::parsing
