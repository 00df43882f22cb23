#pragma once

// The NFA of a query, compiled once and shared read-only by its detectors.
//
// A query `SEQ(e0, ..., e_{m-1})` with NOT elements between positive ones
// becomes m states, one per positive element; each state has an active
// instance stack (AIS). Every WHERE conjunct is scheduled once, at the
// earliest point of the backward construction (from the accepting event
// towards the first) where every variable it names is bound:
//
// - push filters: conjuncts over one single variable (or one Kleene element
//   b[i] alone) are checked when the event is pushed on its stack;
// - prepend checks: iteration predicates of a Kleene element whose other
//   variables are all later in the pattern are checked as each earlier
//   element is prepended to the Kleene binding;
// - completion checks: every other conjunct is checked when the earliest
//   element it names is complete (against the concrete events bound so far,
//   since with skip_till_any_match a stack link does not imply that a
//   predicate between two variables holds);
// - negations are checked at the completion of the earliest element their
//   predicates (and their left neighbour) need.
//
// For skip_till_next_match, Q(k) — the conjuncts that decide whether an event
// qualifies for element k given the elements before it — tells the
// construction whether a predecessor range can be narrowed exactly from the
// stack alone or must be verified against the events between.
//
// Thread safety: immutable after compilePlan(); shared by detectors on any
// thread.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/pattern/ast.h"
#include "bus/core/pattern/expr_compiler.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/plugin/state_caps.h"
#include "bus/core/status.h"
#include "bus/core/symbol.h"

namespace cepbus::plugins::nfa {

inline constexpr size_t kMaxElements = 32;
inline constexpr Timestamp kNoWindow = INT64_MAX;

// What a detector does when its state reaches a cap (plugin::StateCaps): a
// partition over its cap drops its oldest entries, as if its window had
// narrowed; over the total cap the partitions least recently active are shed
// whole (their stacks emptied), down to nine tenths of the cap. Under
// refuse_new no entry is taken that would not complete a match.
using StatePolicy = plugin::StatePolicy;

// The defaults of the caps (plugin::StateCaps): an entry keeps an event
// alive, a few hundred bytes: about 0.3 GB per partition and 3 GB in all.
inline constexpr uint64_t kDefaultMaxPartitionEntries = plugin::StateCaps::kDefaultPartition;
inline constexpr uint64_t kDefaultMaxEntries = plugin::StateCaps::kDefaultTotal;

enum class Construction : uint8_t {
  kPerEvent,  // SASE: construct on every accepting event
  kBatched,   // P2: aggregated links, construction in batches once per cluster
};

// A conjunct as scheduled at one point. `iter_element` >= 0 when the conjunct
// is an iteration predicate of that Kleene element; unless it is a prepend
// check it is then tested once per element of the Kleene binding.
struct Check {
  const pattern::Conjunct* conjunct = nullptr;
  int iter_element = -1;
  bool mentions_last = false;  // names the accepting element's variable
};

struct ElementPlan {
  Symbol type;
  int slot = -1;  // -1 for an unnamed element
  bool kleene = false;
  std::vector<const pattern::Conjunct*> push_filters;
  // Kleene only: iteration predicates on this element alone (and later
  // elements), checked as an element is prepended.
  std::vector<Check> prepend_checks;
  std::vector<Check> complete_checks;
  std::vector<int> complete_negations;  // indices into Plan::negations
  // skip_till_next_match: Q(k), the conjuncts an event must satisfy to be
  // the "first qualifying" event of this element given the earlier ones.
  std::vector<Check> qualify;
  // Q(k) is empty: every event on this stack qualifies, so a predecessor
  // range is narrowed exactly by the previous entry of this stack.
  bool exact_next = true;
  // Q(k) names only this Kleene element: growth steps are verified as each
  // element is prepended; otherwise every step into this element is verified
  // when element `verify_at` completes.
  bool verify_on_prepend = false;
  int verify_at = -1;
  std::vector<int> verify_at_completion;  // elements whose steps are verified here
};

// Where a NOT(C c) stands: between positive elements `right - 1` and
// `right` (no C between them), before the first (leading: no C in
// [last.ts - W, first.ts)), or after the last (trailing: no C in
// (last.ts, first.ts + W], decided once event time passes first.ts + W).
enum class NegationPlace : uint8_t { kBetween, kLeading, kTrailing };

struct NegationPlan {
  Symbol type;
  int slot = -1;
  int right = 0;
  NegationPlace place = NegationPlace::kBetween;
  std::vector<const pattern::Conjunct*> filters;  // over c alone: checked on push
  std::vector<Check> conditions;                  // c with other variables
  bool mentions_last = false;
};

// A type's role: a positive element or a negation whose stack an event of
// that type may enter.
struct TypeRoute {
  Symbol type;
  std::vector<int> elements;  // descending, so an event enters later states first
  std::vector<int> negations;
};

struct Plan {
  pattern::Strategy strategy = pattern::Strategy::kSkipTillAnyMatch;
  Construction construction = Construction::kBatched;
  Timestamp window = kNoWindow;  // WITHIN n, inclusive
  double min_probability = 0;    // PROBABILITY >= p; 0 keeps every match
  Timestamp batch_period = 0;    // batched: construct when time crosses a multiple
  // Entries of the instance stacks (the detector's partial matches) one
  // partition may hold, and all partitions together.
  uint64_t max_partition_entries = kDefaultMaxPartitionEntries;
  uint64_t max_entries = kDefaultMaxEntries;
  StatePolicy state_policy = StatePolicy::kDropOldest;
  // The query's PARTITION BY or, without one, an attribute its WHERE ties
  // every variable on (see nfa_plan.cc).
  std::vector<Symbol> partition_by;
  pattern::BindingLayout layout;
  std::vector<pattern::Conjunct> conjuncts;
  std::vector<ElementPlan> elements;
  std::vector<NegationPlan> negations;
  std::vector<TypeRoute> routes;
  std::vector<int> slot_element;   // slot -> positive element, or -1
  std::vector<int> slot_negation;  // slot -> negation, or -1
  // Checks that name the accepting element, evaluated per cluster member in
  // batched construction (every Check with mentions_last, and negations).
  std::vector<Check> member_checks;
  std::vector<int> member_negations;
  // Trailing negations: checked when a match's window has closed, not
  // during construction.
  std::vector<int> trailing_negations;
  std::vector<uint32_t> fixed_element_ends;  // [1..m] when no element is Kleene
  bool has_kleene = false;
  std::shared_ptr<const pattern::CompiledReturn> returns;  // null without RETURN
  // What the detector's state depends on (its snapshot section's shape, see
  // bus/core/plugin/snapshot.h): the elements and negations with the
  // conditions checked as an event is pushed, the partitioning, the
  // strategy and the construction; not WITHIN, PROBABILITY, RETURN or the
  // conditions checked at construction, which an edit carrying the state
  // over may change. Hashed from names, the same in every process.
  uint64_t state_shape = 0;

  size_t size() const { return elements.size(); }
  const TypeRoute* route(Symbol type) const {
    for (const TypeRoute& r : routes) {
      if (r.type == type) return &r;
    }
    return nullptr;
  }
};

using PlanPtr = std::shared_ptr<const Plan>;

// Compiles `query` with the engine options (construction=per_event|batched,
// batch_period=N, max_partition_partial_matches=N, max_partial_matches=N,
// state_policy=drop_oldest|refuse_new). InvalidArgument names what the engine does not support
// (algebra operators, CONTEXT recent, Kleene star, predicates it cannot
// schedule) or the bad option.
Result<PlanPtr> compilePlan(const pattern::Query& query, const plugin::DetectorOptions& options);

// Builds composite events from a plan's RETURN clause.
class Composer final : public plugin::MatchComposer {
 public:
  explicit Composer(PlanPtr plan);
  EventPtr compose(const plugin::Match& match) const override;

 private:
  PlanPtr plan_;
  Symbol type_;
};

}  // namespace cepbus::plugins::nfa
