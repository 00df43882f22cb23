#pragma once

// P3's timed coloured Petri net (CEP-PN), holding many patterns in one net
// that shares their common prefixes, middles and tails. How each operator
// becomes a basic net and how patterns are merged (prefix, middle and back
// joins) is described in docs/engines.md ("petri"). What callers may rely on:
//
// - A match is reported as soon as its last event arrives, on the pattern's
//   output; it lists the events in pattern order (a Kleene run inline, in
//   stream order).
// - Tokens are not consumed under the default feedback policy (every
//   combination: skip_till_any_match); see Policy for conflict and
//   concurrency. A token expires once its first event is older than the
//   window; a shared transition prunes with the largest window of the
//   patterns using it, and each output checks its own pattern's window.
//   Likewise a feedback transition drops a token less likely than the
//   smallest PROBABILITY bound of its patterns, and each output checks its
//   own bound (a consuming transition keeps it: dropping it would hand its
//   event to another token).
// - Conjunctions and Kleene elements run under the feedback policy only and
//   take no part in middle or back joins (their chains share prefixes); joins
//   are made for feedback patterns without negations only.
// - A back join rewrites a running pattern only before the net has seen an
//   event (it would drop partial matches); later, a new pattern still joins
//   a tail that already runs as a chain.
// - A pattern sees only events that arrive after it is added (each token
//   remembers the arrival number of its first event), so adding or removing a
//   pattern never changes another pattern's matches.
//
// Thread safety: none; one thread drives a net. The net does not own the
// sinks, which must outlive their patterns and must not call back into the
// net from onMatch.

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/pattern/ast.h"
#include "bus/core/pattern/expr_compiler.h"
#include "bus/core/plugin/detector.h"
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
    std::vector<Negation> negations;               // between the previous element and this one
    // A Kleene element `Type+ var[]`: one or more events, in stream order.
    bool kleene = false;
    // A Kleene last element: the conjuncts that need its whole run (say
    // count(b[])), checked on each run before it is reported.
    std::vector<const pattern::Conjunct*> completion;
  };
  Timestamp window = kNoWindow;
  double min_probability = 0;  // PROBABILITY >= p; 0 keeps every match
  Policy policy = Policy::kFeedback;
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

// Checks and compiles `query` under skip_till_any_match whatever its
// STRATEGY (the plugin's plugin::StrategyFactory selects the matches of the
// others). InvalidArgument names what the net does not support: an operator
// other than SEQ, OR, AND (not inside SEQ; feedback policy only), NOT(Type
// var), selection and Kleene plus 'Type+ var[]' inside SEQ (iteration '*' and
// the Kleene star 'Type* var[]' among them), CONTEXT recent, or an unknown
// option. PARTITION BY is not the net's: the factory runs one net per
// partition.
Result<CompiledPatternPtr> compilePattern(const pattern::Query& query,
                                          const plugin::DetectorOptions& options);

struct NetSize {
  size_t places = 0;  // input places (one per event type) plus output places
  size_t transitions = 0;
};

class PetriNet {
 public:
  PetriNet();
  ~PetriNet();
  PetriNet(const PetriNet&) = delete;
  PetriNet& operator=(const PetriNet&) = delete;

  // Adds a pattern reporting to `sink`. AlreadyExists for a taken name;
  // InvalidArgument (from compilePattern) for an unsupported query.
  Status addPattern(std::string name, const pattern::Query& query, plugin::MatchSink& sink);
  Status addPattern(std::string name, CompiledPatternPtr pattern, plugin::MatchSink& sink);
  // Removes the pattern and every place and transition only it used.
  // NotFound for an unknown name.
  Status removePattern(std::string_view name);

  // Consumes the next event (non-decreasing ts) and reports every match it
  // completes, synchronously.
  Status onEvent(const EventPtr& event);

  // The merged net, and the sum of the nets each pattern would have alone.
  NetSize size() const;
  NetSize unmergedSize() const;
  size_t patternCount() const;
  // The net as Graphviz DOT ("dot") or JSON ("json"): input places (one per
  // event type), transitions (event type or join, guards, window, the
  // patterns using them), output places (tokens held, the patterns they
  // emit). InvalidArgument for another format.
  Result<std::string> exportModel(std::string_view format) const;
  // Tokens currently held in output places (for tests of expiry), counted
  // by walking the places.
  size_t tokenCount() const;
  // The same, counted as tokens are placed and dropped (O(1)); and the most
  // held after any event so far. Inhibitor places hold events, not tokens.
  uint64_t heldTokens() const { return held_; }
  uint64_t peakHeldTokens() const { return peak_held_; }

 private:
  struct Token;
  struct Transition;
  struct PatternEntry;
  class Composer;

  void fire(Transition& t, const EventPtr& event);
  void fireJoin(Transition& j, const std::shared_ptr<const Token>& right);
  // A Kleene element's transition: starts runs from its input place and
  // extends the runs in its own place.
  void fireLoop(Transition& t, const EventPtr& event);
  // `tok`, just produced by `from` (j's input, right or both), paired with
  // every token of the other side.
  void fireConjunction(Transition& j, const Transition& from,
                       const std::shared_ptr<const Token>& tok);
  // `event` (null for a join) binds element t.depth after the events of
  // `left` then `right`.
  bool guardsHold(const Transition& t, const Token* left, const Token* right, const Event* event);
  // Binds the events of `left` then `right` (and `event` at t.depth) into bind_.
  void bind(const Transition& t, const Token* left, const Token* right, const Event* event);
  // True when an event in one of t's inhibitor places forbids extending `left` with `event`.
  bool negated(Transition& t, const Token* left, const Event& event);
  void produce(Transition& t, std::shared_ptr<const Token> parent,
               std::shared_ptr<const Token> right, const EventPtr& event);
  void rebuildOutputGroups(Transition& t);
  // Where a new pattern's join should start (0: insert's default, a middle
  // join at the first element it does not share); may rewrite a running
  // pattern for a back join.
  size_t chooseSplit(const PatternEntry& e);
  // Builds the pattern's transitions (prefix join, then a join at `split`
  // or a middle join) and takes ownership.
  void insert(std::unique_ptr<PatternEntry> entry, size_t split);
  // Unlinks the pattern and drops the transitions only it used.
  std::unique_ptr<PatternEntry> detach(const PatternEntry& entry);
  void rebuildTypeIndex();
  std::string toDot() const;
  std::string toJson() const;

  std::vector<std::unique_ptr<Transition>> transitions_;
  std::unordered_map<std::string, Transition*> by_key_;
  std::unordered_map<Symbol, std::vector<Transition*>> by_type_;  // deepest first
  // The inhibitor places each event type feeds: (transition, index in its inhibitors).
  std::unordered_map<Symbol, std::vector<std::pair<Transition*, size_t>>> inhibitors_;
  std::vector<std::unique_ptr<PatternEntry>> patterns_;
  // Every feedback pattern's tails (elements j..end, j >= 1, two at least)
  // by tailKey: the candidates of a back join.
  std::unordered_map<std::string, std::vector<std::pair<PatternEntry*, size_t>>> tails_;
  int next_group_ = 1;           // of the next concurrency pattern
  std::vector<uint64_t> taken_;  // per consumption group: seq_ of the event it took
  uint64_t seq_ = 0;
  Timestamp now_ = INT64_MIN;
  uint64_t held_ = 0;  // tokens in the places of transitions_
  uint64_t peak_held_ = 0;

  // Scratch reused across events.
  std::vector<pattern::SlotBinding> bind_;
  std::vector<const EventPtr*> bound_;  // guards
  std::vector<const EventPtr*> chain_;  // matches
  std::vector<uint32_t> ends_;
  std::vector<const Token*> tokens_;             // bind() by element
  std::vector<std::vector<const Event*>> runs_;  // per element: a Kleene one's events
};

}  // namespace cepbus::plugins::petri
