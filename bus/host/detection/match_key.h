#pragma once

// The key output control groups a query's matches by: the value of EMIT ...
// PER expr, or the partition (PARTITION BY) for AFTER MATCH SKIP PAST LAST
// EVENT, or one key for every match.
//
// Thread safety: none (keyOf() reuses scratch storage); one keyer per rule,
// on the detector's thread. Ownership: keeps its compiled expression.

#include <optional>
#include <string>
#include <vector>

#include "bus/core/pattern/ast.h"
#include "bus/core/pattern/expr_compiler.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"
#include "bus/core/symbol.h"
#include "bus/core/value.h"

namespace cepbus::detection {

class MatchKeyer {
 public:
  // Every match has the same (empty) key.
  MatchKeyer() = default;
  // The value of `per`, an expression over the variables of `query` (as
  // RETURN reads them): the error names its line and column when it cannot
  // be compiled. A value that is missing is a key of its own (null).
  static Result<MatchKeyer> ofExpr(const pattern::Query& query, const pattern::Expr& per);
  // The values of `attrs` on the match's first event, as PARTITION BY
  // groups events (every event of a match shares them).
  static MatchKeyer ofPartition(const std::vector<std::string>& attrs);

  // The key of `match`, into `key` (its storage reused).
  void keyOf(const plugin::Match& match, std::vector<Value>& key);

 private:
  std::vector<Symbol> attrs_;
  std::optional<pattern::CompiledExpr> per_;
  size_t slots_ = 0;                  // the layout's size, for per_
  std::vector<int> element_slot_;     // per positive element of the pattern: its slot, or -1
  std::vector<const Event*> events_;  // scratch of keyOf()
  std::vector<pattern::SlotBinding> slots_bound_;  // scratch of keyOf()
};

}  // namespace cepbus::detection
