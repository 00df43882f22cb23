#pragma once

// The petri engine's front end: a query checked against what the net runs and
// compiled into the elements, guards and keys its transitions are built from.
// Equal element keys mean equal transitions, which is how PetriNet shares the
// chains of many patterns.
//
// Thread safety: a CompiledPattern is immutable once built and may be shared.

#include <cstdint>
#include <map>
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

namespace cepbus::plugins::petri {

inline constexpr Timestamp kNoWindow = INT64_MAX;

// P3's consumption policies, chosen per pattern (option `policy`).
enum class Policy : uint8_t {
  kFeedback,     // tokens are not consumed: every combination matches (skip_till_any_match)
  kConflict,     // a token, and an event, takes part in one firing across all conflict
                 // patterns: their places are shared
  kConcurrency,  // a token takes part in one firing of its own pattern; every pattern has
                 // a copy of each place, so patterns do not interfere
};

// A query checked against what the net supports and compiled against its own
// binding layout. Immutable; shared by the transitions built from it.
struct CompiledPattern {
  // NOT(Type var) between two positive elements: the transition of the
  // element after it also reads an inhibitor place of Type events and fires
  // only when none lies strictly between the two elements' events with
  // every condition holding.
  struct Negation {
    Symbol type;
    int slot = -1;                                     // -1 for an unnamed NOT(Type)
    std::vector<const pattern::Conjunct*> conditions;  // the conjuncts naming `slot`
  };
  struct Element {
    Symbol type;
    std::string var;  // empty for an unnamed element
    int slot = -1;
    std::vector<const pattern::Conjunct*> guards;  // conjuncts whose latest element is this one
    std::vector<size_t> guard_earliest;            // the earliest element each guard names
    // Whether each guard decides which event a run takes under
    // skip_till_next_match: every guard but those moved here from a Kleene
    // element before (count(b[]), b[1], b[last]: they wait for the whole
    // run, and do not steer it).
    std::vector<char> guard_steers;
    std::vector<Negation> negations;  // between the previous element and this one
    // A Kleene element `Type+ var[]`: one or more events, in stream order.
    bool kleene = false;
    // A Kleene last element: the conjuncts that need its whole run (say
    // count(b[])), checked on each run before it is reported.
    std::vector<const pattern::Conjunct*> completion;
  };
  Timestamp window = kNoWindow;
  double min_probability = 0;  // PROBABILITY >= p; 0 keeps every match
  Policy policy = Policy::kFeedback;
  // The caps on the net's tokens (the engine options; PetriNet::setCap()).
  plugin::StateCaps caps;
  // skip_till_next_match and strict_contiguity run natively on a plain
  // sequence (PetriNet::addPattern): each run takes the events the
  // strategy allows as they come. Under skip_till_any_match otherwise.
  pattern::Strategy strategy = pattern::Strategy::kSkipTillAnyMatch;
  bool has_negation = false;  // such a pattern shares prefixes only (no joins)
  bool has_kleene = false;    // so does one with a Kleene element
  // A conjunction AND(o_0, ..., o_n): the first element of each operand
  // after the first (ascending). Each operand runs as a chain from the head
  // and a conjunction transition joins o_0..o_{i-1} with o_i in any order;
  // empty for a sequence.
  std::vector<size_t> operand_starts;
  // The first element of the operand holding element k.
  size_t operandStart(size_t k) const {
    size_t start = 0;
    for (size_t s : operand_starts) {
      if (s <= k) start = s;
    }
    return start;
  }
  pattern::BindingLayout layout;
  std::vector<pattern::Conjunct> conjuncts;
  std::vector<Element> elements;
  std::map<std::string, size_t> position;                  // variable -> element
  std::shared_ptr<const pattern::CompiledReturn> returns;  // null without RETURN
  // The RETURN clause with variables named by element position: patterns
  // ending in the same transition with equal keys build equal composite
  // events, so the net builds one and hands it to each of them.
  std::string return_key;
  // A disjunction: one plain sequence per alternative (each with the
  // layout, conjuncts and RETURN of the whole query); `elements` is empty.
  std::vector<std::shared_ptr<const CompiledPattern>> alternatives;
};

using CompiledPatternPtr = std::shared_ptr<const CompiledPattern>;

// Checks and compiles `query`, under its STRATEGY when it is a plain
// sequence under the feedback policy (one alternative, no conjunction),
// else under skip_till_any_match (the plugin's plugin::StrategyFactory then
// selects the matches of the other strategies). InvalidArgument names what the net does not
// support: an operator other than SEQ, OR, AND (not inside SEQ; feedback policy only), NOT(Type
// var), selection and Kleene plus 'Type+ var[]' inside SEQ (iteration '*' and
// the Kleene star 'Type* var[]' among them), CONTEXT recent, or an unknown
// option. PARTITION BY is not the net's: the factory runs one net per
// partition.
Result<CompiledPatternPtr> compilePattern(const pattern::Query& query,
                                          const plugin::DetectorOptions& options);

// `e` with every variable renamed after the position of its element, counted
// from `from`, so that guards written with other variable names compare equal.
pattern::ExprPtr byPosition(const pattern::Expr& e, const std::map<std::string, size_t>& position,
                            size_t from);

// Element k's key in a chain that starts at element `from`: its type, whether
// it is named, and the guards that name no element before `from`.
std::string elementKey(const CompiledPattern& p, size_t k, size_t from);

}  // namespace cepbus::plugins::petri
