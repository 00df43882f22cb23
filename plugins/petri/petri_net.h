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
// - State cap (setCap()): when an event leaves more tokens in the places
//   than the cap, drop_oldest drops the tokens whose last event is oldest
//   (down to plugin::trimTarget() of the cap), as if the window had
//   narrowed; refuse_new the newest — those the event added — down to the
//   cap, so the tokens held go on and complete. Each counts in evicted().
//   Inhibitor places hold events to negate, no tokens, and are not capped.
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
#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"
#include "bus/core/symbol.h"
#include "plugins/petri/pattern_compiler.h"

namespace cepbus::plugins::petri {

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
  // The tokens the cap dropped (see the file comment), and an estimate of
  // the bytes the held tokens keep alive: per token its slot, the token and
  // its shared block, and the fixed part of its event.
  uint64_t evicted() const { return evicted_; }
  uint64_t heldBytes() const;
  // At most `cap` tokens kept after an event; `refuse_new`: see the file comment.
  void setCap(uint64_t cap, bool refuse_new) {
    cap_ = cap;
    refuse_new_ = refuse_new;
  }

  // The version of the state snapshot() writes; 2: the cap's evictions.
  static constexpr uint32_t kSnapshotVersion = 2;
  // Snapshots (net_snapshot.cc): the marking of every place in transition
  // order (tokens with their bound events, stamps and strategy flags, each
  // token once however many places and tokens share it; the events of
  // inhibitor places; the entries of lazy Kleene places with their links),
  // the consumption groups' last events and the arrival and time counters.
  // restore() reads it into a net built from the same patterns, before any
  // event, checking every index, link and element against the net's shape.
  void snapshot(plugin::SnapshotWriter& out) const;
  Status restore(plugin::SnapshotReader& in);

 private:
  struct Token;
  struct Stamps;
  struct Transition;
  struct KleenePlace;
  struct PatternEntry;
  struct RunWalk;
  class Composer;
  class TokenVisitor;

  void fire(Transition& t, const EventPtr& event);
  void fireJoin(Transition& j, const std::shared_ptr<const Token>& right);
  // A Kleene element's transition: starts runs from its input place and
  // extends the runs in its own place.
  void fireLoop(Transition& t, const EventPtr& event);
  // A Kleene element's transition over a lazy Kleene place
  // (Transition::lazy_runs): stores the event once, with its links.
  void fireLazyLoop(Transition& t, const EventPtr& event);
  // The element after a lazy Kleene place: enumerates the runs `event` may
  // close, depth-first from their last event back over the links, in the
  // order the runs' tokens would have in the place (by last event, then a
  // run starting there before longer ones, then by the run before it), and
  // extends each with the event.
  void enumerateRuns(Transition& u, const EventPtr& event);
  // The runs whose events from the depth-th last on are the entry `n` and
  // the ones visited before it.
  void visitRuns(RunWalk& w, uint64_t n, size_t depth);
  // Whether the run on run_tokens_[0..depth] satisfies the Kleene element's
  // guards that name earlier elements, at each of its events as it would
  // have been extended by it.
  bool acrossHold(const Transition& t, size_t depth);
  // A lazy Kleene place replaced by a token per run, the tokens the loop
  // would have made (a place that stops being lazy).
  void materializeRuns(Transition& t);
  // `tok`, just produced by `from` (j's input, right or both), paired with
  // every token of the other side.
  void fireConjunction(Transition& j, const Transition& from,
                       const std::shared_ptr<const Token>& tok);
  // `event` (null for a join) binds element t.depth after the events of
  // `left` then `right`.
  // `steering_only`: only the guards that steer a skip_till_next_match run
  // (Transition::steers).
  bool guardsHold(const Transition& t, const Token* left, const Token* right, const Event* event,
                  bool steering_only = false);
  // Conjunct `g` on `binding`; an iteration predicate of a Kleene element
  // other than `extending` (a slot, or -1) must hold for each of its events.
  static bool holds(const pattern::Conjunct& g, int extending,
                    std::vector<pattern::SlotBinding>& binding);
  // Under t's native strategy, whether t may extend `tok` with `event`
  // (strict_contiguity: the event follows the token's last; skip_till_next_
  // match: it is the first event filling the element since, and the token
  // is marked `took` so that no later one does).
  bool takes(const Transition& t, const Token& tok, uint8_t took, const Event& event);
  // Whether no later event can extend `tok`, a token of t's place, under
  // t's native strategy. Called once per event and token: it marks a
  // strict_contiguity token as having seen the event after its own.
  bool spent(const Transition& t, const Token& tok) const;
  // Binds the events of `left` then `right` (and `event` at t.depth) into bind_.
  void bind(const Transition& t, const Token* left, const Token* right, const Event* event);
  // True when an event in one of t's inhibitor places forbids extending `left` with `event`.
  bool negated(Transition& t, const Token* left, const Event& event);
  void produce(Transition& t, const std::shared_ptr<const Token>& parent,
               std::shared_ptr<const Token> right, const EventPtr& event);
  // Reports a token of t with `stamps` on t's outputs whose checks it
  // passes; `collect_chain` fills chain_ (and ends_ for a Kleene element)
  // with its events, once, when the first output takes it. `parent` and
  // `event` bind a completion check.
  template <typename Collect>
  void report(Transition& t, const Stamps& stamps, const Token* parent, const Event* event,
              Collect&& collect_chain);
  // Whether a lazy token of t's input place may be paired by reportPairs():
  // t only reports (a feedback extension with no guards, inhibitors,
  // Kleene element, completion checks, and nothing keeping its tokens) and
  // the lazy place's own input holds no lazy tokens.
  bool reportsPairs(const Transition& t) const;
  // Reports every match `event` makes with the pairs the lazy token stands
  // for, from the window's start `from`, building neither pairs nor tokens:
  // the input place is searched by last_ts, each match's events written
  // into chain_ in place.
  void reportPairs(Transition& t, const Token& lazy, const EventPtr& event, Timestamp from);
  void rebuildOutputGroups(Transition& t);
  // Brings held_ back under cap_ after an event (see the file comment).
  void enforceCap();
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
  // Decides which places hold lazy tokens (Transition::lazy); a place that
  // stops being lazy gets its lazy tokens expanded.
  void markLazyPlaces();
  // Whether t's place is a lazy Kleene place (Transition::lazy_runs) with
  // `readers` (the transitions reading it besides t), sorting t's guards by
  // what they read; a place of run tokens becomes one only once empty.
  bool markLazyRuns(Transition& t, const std::vector<const Transition*>& readers);
  // Calls f(token) for `tok`, a token of t's place, or, when it is lazy, for
  // every pair it stands for (recursively) whose first event is at or after
  // `from`.
  void expand(const Transition& t, const std::shared_ptr<const Token>& tok, Timestamp from,
              const TokenVisitor& f) const;
  // Every lazy token of t's place replaced by the pairs it stands for.
  void materialize(Transition& t);
  // `tok` if it may be kept, else (an expanded pair) a copy that owns its chain.
  static std::shared_ptr<const Token> own(const std::shared_ptr<const Token>& tok);
  // The checks of extending `tok` with `event` at feedback transition t, and
  // the extension when they pass.
  void extend(Transition& t, const std::shared_ptr<const Token>& tok, const EventPtr& event);
  // What restore() checks a token against the place that holds it by: the
  // events it binds and the largest element along its parent chain.
  struct TokenShape {
    uint64_t events = 0;
    int max_element = 0;
  };
  // The next token of the snapshot's table (`table`: those before it, with
  // their shapes), checked; null when the reader failed.
  std::shared_ptr<const Token> restoreToken(plugin::SnapshotReader& in,
                                            const std::vector<std::shared_ptr<const Token>>& table,
                                            std::vector<TokenShape>& shapes) const;
  // Transition t's marking, its tokens checked against t's depth.
  void restorePlaces(Transition& t, plugin::SnapshotReader& in,
                     const std::vector<std::shared_ptr<const Token>>& table,
                     const std::vector<TokenShape>& shapes);
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
  uint64_t held_ = 0;    // tokens in the places of transitions_
  bool native_ = false;  // some transition runs a strategy natively (Transition::strategy)
  uint64_t peak_held_ = 0;
  uint64_t cap_ = UINT64_MAX;
  bool refuse_new_ = false;
  uint64_t evicted_ = 0;  // tokens the cap dropped

  // Scratch reused across events.
  std::vector<pattern::SlotBinding> bind_;
  std::vector<const EventPtr*> bound_;  // guards
  std::vector<const EventPtr*> chain_;  // matches
  std::vector<uint32_t> ends_;
  std::vector<const Token*> tokens_;             // bind() by element
  std::vector<std::vector<const Event*>> runs_;  // per element: a Kleene one's events
  // enumerateRuns(): a run's tokens by depth from its last event, and its
  // events in stream order, filled from the back.
  std::vector<Token> run_tokens_;
  std::vector<const Event*> run_events_;
  std::vector<double> run_probs_;                 // the product of the probabilities of depths 0..d
  std::vector<const pattern::Conjunct*> early_;   // the guards checked before a parent is bound
  std::vector<pattern::SlotBinding> early_bind_;  // their binding: the run and the event
};

}  // namespace cepbus::plugins::petri
