#pragma once

// The window engine's compiled query: what FROM Type t [WHERE ...] WINDOW ...
// [GROUP BY ...] [HAVING ...] RETURN ... becomes (docs/pattern-language.md,
// "Windows").
//
// RETURN and HAVING are compiled with the core's expression compiler over a
// "row": one event per closed window and group whose attributes are the
// aggregate columns and the group keys, bound to the FROM variable. Each
// aggregate and group key of the text is rewritten into a read of the row,
// so results follow the language's rules for arithmetic, comparisons and
// Missing values exactly as patterns do.
//
// Thread safety: a Plan is immutable once compiled and shared by the
// factory's detectors.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "bus/core/pattern/ast.h"
#include "bus/core/pattern/expr_compiler.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"
#include "bus/core/symbol.h"
#include "plugins/window/aggregates.h"

namespace cepbus::plugins::window {

// The groups a detector keeps at most unless the option max_groups says
// otherwise: events of further groups are refused and counted.
inline constexpr size_t kDefaultMaxGroups = 100000;

struct Plan {
  Symbol type;                           // the FROM event type
  std::vector<pattern::Conjunct> where;  // over slot 0, the FROM variable
  pattern::WindowKind kind = pattern::WindowKind::kTumbling;
  int64_t length = 0;      // L, or the session gap G
  int64_t every = 0;       // S (L for tumbling)
  int64_t pane = 0;        // gcd(L, S): every window is a whole number of panes
  int64_t emit_every = 0;  // EMIT EVERY d; 0 for final results only
  Symbol partial_name;     // the result attribute marking partial results (EMIT EVERY)

  // S and L in panes, so that the windows holding a pane are found without
  // dividing times (S / gcd is 1 whenever S divides L).
  int64_t every_panes = 0;
  int64_t length_panes = 0;
  std::vector<Symbol> group_by;
  std::vector<AggregateColumn> columns;
  std::vector<Symbol> column_names;  // the row attribute of each column
  AggregateLayout aggregates;        // what `columns` read
  std::vector<Symbol> key_names;     // the row attribute of each group key
  std::optional<pattern::CompiledExpr> having;
  pattern::CompiledReturn returns;
  // RETURN without the row: when there is no HAVING and every item is an
  // aggregate or a group key as it is, the row value each item copies.
  // Copying it is what evaluating the item over the row gives, without
  // building the row.
  struct DirectItem {
    Symbol name;    // the RETURN item's
    size_t source;  // a column i, or a key j as columns.size() + j
    // The last item reading this column: it may take the value, not copy it.
    bool takes = false;
  };
  // In the order of their names, which is the order an event keeps its
  // attributes in, so that each is appended, not inserted.
  std::optional<std::vector<DirectItem>> direct_returns;
  size_t max_groups = kDefaultMaxGroups;
  // What the detector's state depends on (its snapshot section's shape, see
  // bus/core/plugin/snapshot.h): the window, the grouping, and what the
  // running states keep (AggregateLayout); not WHERE, HAVING or how RETURN
  // names and combines the aggregates, which an edit carrying the windows
  // over may change. Hashed from names, the same in every process.
  uint64_t state_shape = 0;
};
using PlanPtr = std::shared_ptr<const Plan>;

// Compiles a window query; InvalidArgument for a pattern query, an unknown
// option or a bad max_groups.
Result<PlanPtr> compilePlan(const pattern::Query& query, const plugin::DetectorOptions& options);

}  // namespace cepbus::plugins::window
