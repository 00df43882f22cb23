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
#include "bus/core/plugin/snapshot.h"
#include "bus/core/status.h"
#include "bus/core/symbol.h"
#include "bus/core/value.h"

namespace cepbus::detection {

// The positive elements of `query`'s pattern in pattern order (a match's
// elements): each one's slot in `layout`, or -1 when it binds no variable.
std::vector<int> elementSlots(const pattern::Query& query, const pattern::BindingLayout& layout);

// Binds `match` to `slots` (sized to the layout) as the engines bind it: a
// Kleene element's events in stream order, a single element's one event.
// `events` is the storage the Kleene spans point into; both are reused.
void bindMatch(const plugin::Match& match, const std::vector<int>& element_slots,
               std::vector<const Event*>& events, std::vector<pattern::SlotBinding>& slots);

// The value PARTITION BY `attr` gives `event`, as every engine reads it: the
// attribute, or for `key` without such an attribute the event's own
// partition key (its JSON "key" field); null when it has neither.
const Value& partitionValue(const Event& event, Symbol attr);

// A key as output control's snapshots write it (its values in order), and
// back.
void saveKey(const std::vector<Value>& key, plugin::SnapshotWriter& out);
std::vector<Value> loadKey(plugin::SnapshotReader& in);

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
