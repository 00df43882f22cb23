#pragma once

// The compiled form of a query for the event-algebra engine (P1): the pattern
// decomposed bottom-up, left to right into subexpressions E1..Ek (children
// before parents, Ek the whole pattern), each a binary or unary operator of
// P1's algebra over the instances of its operands.
//
// The SASE-style forms are rewritten into the algebra while compiling:
// SEQ(A a, B b, D d) is (A ; B) ; D, SEQ(A a, NOT(C c), B b) is (A ; B) − C
// over the gap between a and b (Node::gap_leaf), AND/OR are + and |, a Kleene element
// `B+ b[]` is the iteration of B, the WITHIN n clause is a time restriction
// of the whole pattern, and each WHERE conjunct becomes a selection at the
// lowest subexpression that binds every variable it names.
//
// Ownership and threads: a Plan is immutable once compiled and shared
// (shared_ptr<const Plan>) by every detector created from the same query;
// read it from any thread.

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "bus/core/pattern/ast.h"
#include "bus/core/pattern/expr_compiler.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/plugin/state_caps.h"
#include "bus/core/status.h"
#include "bus/core/symbol.h"

namespace cepbus::plugins::algebra {

// One operator per subexpression. AGG(e, g) and e[f] are both kSelection (a
// predicate on the operand's instances); an aggregation's operand is an
// iteration, so its predicate sits on the iteration node itself.
enum class Op : uint8_t {
  kAtom,             // one event type
  kOr,               // M ∪ N
  kAnd,              // m ∪ n
  kSeq,              // end(m) < start(n)
  kConcat,           // the overlap / meet cases of P1's concatenation
  kConcurrent,       // start(m) = start(n) ∧ end(m) = end(n)
  kNegation,         // m with no n inside ⟨start(m), end(m)⟩ (or inside the gap, below)
  kIteration,        // unions of one or more operand instances
  kSelection,        // operand instances satisfying the predicate
  kTimeRestriction,  // end − start ≤ window
};

// P1's semantics: every instance (the specification), or the context
// "recent" applied at every subexpression (the detection algorithm).
enum class Semantics : uint8_t { kUnrestricted, kRecent };

inline constexpr int64_t kNoHorizon = std::numeric_limits<int64_t>::max();

struct Node {
  Op op = Op::kAtom;
  int left = -1;   // the operand of a unary operator
  int right = -1;  // binary operators only
  Symbol type;     // kAtom
  int leaf = -1;   // kAtom: its index among Plan::leaves
  int64_t window = 0;
  // The tightest time restriction on this node or an ancestor: no instance
  // that contributes to an output spans more than this, so state older than
  // now − horizon can be dropped.
  int64_t horizon = kNoHorizon;
  // Predicates every output must satisfy (selection, aggregation and the
  // WHERE conjuncts placed here).
  std::vector<pattern::Conjunct> checks;
  // kNegation of SASE's NOT(...) inside SEQ, `SEQ(x, NOT(C c), y)`: the
  // operand is (... ; x) ; y and n must lie strictly inside the gap
  // ⟨ts(x), ts(y)⟩, not P1's interval with its edges: `gap_leaf` is the leaf
  // of x (its latest event, for a Kleene x); y is the operand's last event.
  // -1 for P1's negation.
  int gap_leaf = -1;
  // kNegation: the WHERE conjuncts that relate the negated operand to the
  // left operand (`NOT(C c)` with `c.id = a.id`). Only a negated instance
  // that passes them with the candidate rejects it: a negation with
  // parameters, which P1's algebra lacks. A conjunct naming an element after
  // the gap is refused (compilePlan).
  std::vector<pattern::Conjunct> negation_checks;
  // kIteration of a SASE Kleene element `Type+ var[]` (not P1's `(e)*`): its
  // instances are runs, its operand's events at strictly increasing
  // timestamps, which the detector extends one event at a time.
  bool kleene = false;
  // A Kleene element under unrestricted semantics: the iteration predicates
  // that read b[i] and b[i-1] only (no b[k], b[last], aggregate or other
  // variable), taken out of `checks`. Each holds for a run iff it holds for
  // every event with the one before it, so the detector tests them as it
  // prepends an event to a run and never builds a run they reject.
  std::vector<pattern::Conjunct> step_checks;
  uint64_t slot_mask = 0;  // the layout slots bound below this node
  std::string text;        // canonical text, for messages
};

// An atomic element of the pattern, in pattern order.
struct Leaf {
  Symbol type;
  int slot = -1;     // layout slot of its variable; -1 when unnamed
  int element = -1;  // index among the Match elements; -1 inside a negated operand
};

struct Plan {
  std::vector<Node> nodes;  // E1..Ek, children before parents; the root is last
  std::vector<Leaf> leaves;
  size_t element_count = 0;
  Semantics semantics = Semantics::kRecent;
  double min_probability = 0;  // PROBABILITY >= p; 0 keeps every match
  // STRATEGY strict_contiguity run by the detector itself (a SEQ of 'Type
  // var' and 'Type+ var[]' elements, see runsNatively()): the events of a
  // match are consecutive in the stream the detector sees, and no run or
  // pairing that breaks that is followed.
  bool strict = false;
  // STRATEGY skip_till_next_match run by the detector itself (a SEQ whose
  // elements' steering reads only the element, see runsNatively()): each
  // event of a match after the first is the first event after the one
  // before it that fills its element; no other pairing or run is followed.
  bool next_match = false;
  pattern::BindingLayout layout;
  std::shared_ptr<const pattern::CompiledReturn> returns;  // null without RETURN
  // For each event type the pattern mentions, the atom nodes of that type.
  std::vector<std::pair<Symbol, std::vector<int>>> routes;
  // The caps on the instances kept (the engine options; a detector runs one
  // partition, so it holds at most StateCaps::perDetector()).
  plugin::StateCaps caps;

  size_t root() const { return nodes.size() - 1; }
};

// Compiles `query` under skip_till_any_match, or under strict_contiguity
// (Plan::strict) or skip_till_next_match (Plan::next_match) when
// runsNatively(query); the plugin's
// plugin::StrategyFactory selects the matches of the other strategies;
// InvalidArgument names what the algebra engine does not support (an
// operator form) or why the query cannot be compiled. PARTITION BY is not the
// plan's: the factory runs one detector per partition, each from the plan of
// the query without the clause. The engine takes no options: any option is
// rejected.
Result<std::shared_ptr<const Plan>> compilePlan(const pattern::Query& query,
                                                const plugin::DetectorOptions& options);

// The context a query leaves implicit, said once: without a CONTEXT clause
// a pattern of more than one element runs under `recent`, which keeps one
// match per end time, so a SEQ gives fewer matches than on the nfa and petri
// engines (which report every combination).
std::vector<std::string> contextNotices(const pattern::Query& query);

// The context of a query whose STRATEGY is not skip_till_any_match (the
// plugin::StrategyFactory's Adapt step): unrestricted, since the strategy
// selects among every match and CONTEXT recent would have dropped some of
// them already. An explicit CONTEXT recent is refused, with the strategy
// named in the message.
Status contextForStrategy(pattern::Query& query);

// Whether the detector runs `query`'s STRATEGY itself: on a SEQ(...) of
// 'Type var' and 'Type+ var[]' elements only, strict_contiguity always, and
// skip_till_next_match when whether an event fills an element depends on
// that event alone (and, in a Kleene run, on the run's event before it):
// every WHERE conjunct that names an element and no later one reads only
// that element's variable, through b[i] and b[i-1] for a Kleene element
// (aggregates, b[1] and b[last] do not steer a run and may read anything).
bool runsNatively(const pattern::Query& query);

}  // namespace cepbus::plugins::algebra
