#pragma once

// The inside of PetriNet, shared by the files that build, fire and export
// the net: tokens, transitions with their places, and the pattern entries.
// Private to plugins/petri.

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "plugins/petri/petri_net.h"

namespace cepbus::plugins::petri {

// A token: the events bound so far. An extension holds its newest event and
// the token before it (`parent`); a join (middle join) holds no event and
// the two tokens it concatenates, `parent` then `right`.
struct PetriNet::Token {
  EventPtr event;
  std::shared_ptr<const Token> parent;
  std::shared_ptr<const Token> right;
  Timestamp first_ts = 0;
  Timestamp last_ts = 0;
  uint64_t first_seq = 0;  // arrival number of the first bound event
  double prob = 1;         // the product of the bound events' probabilities
  int element = 0;         // the element `event` binds (several events bind a Kleene one)
  // A lazy token (Transition::lazy) holds its event and no parent: it stands
  // for every token of the input place that ends before the event, each
  // extended with it (SASE's stack entry with its pointer into the previous
  // stack). Its first_ts and prob are the event's own.
  bool lazy = false;
  // Under a native strategy (Transition::strategy), what the run has seen:
  // skip_till_next_match, the readers of the token's place that took their
  // event for it (Transition::kNextTook, kLoopTook); strict_contiguity,
  // whether an event has come since it was made (Transition::kSeen). Not
  // part of the binding, so a token stays immutable for everything else;
  // a flag rather than a sequence number, in the padding, keeps the token
  // at 104 bytes: one more word and its shared block (one per event on the
  // pile-up) leaves malloc's fast bins, 7% more instructions in all.
  mutable uint8_t took = 0;
  // A pair of a lazy token with one parent, made for one firing on the
  // stack and never kept in a place: `origin` is the lazy token (which owns `event`; here `event`
  // and `parent` do not own what they point to), `parent_owner` the owning pointer to the parent.
  // PetriNet::own() turns it into a token to keep.
  const Token* origin = nullptr;
  const std::shared_ptr<const Token>* parent_owner = nullptr;
};

// What expand() calls with each token: a reference to a callable (not a
// copy, no allocation), so that expand() can recurse without a template.
class PetriNet::TokenVisitor {
 public:
  // `f` must outlive the visitor (a lambda passed to expand() does).
  template <typename F>
  TokenVisitor(F&& f)  // NOLINT(google-explicit-constructor): a lambda passes as is
      : object_(static_cast<void*>(&f)),
        call_([](void* o, const std::shared_ptr<const Token>& tok) {
          (*static_cast<std::remove_reference_t<F>*>(o))(tok);
        }) {}
  void operator()(const std::shared_ptr<const Token>& tok) const { call_(object_, tok); }

 private:
  void* object_;
  void (*call_)(void*, const std::shared_ptr<const Token>&);
};

namespace {

// Appends the token's events in pattern order (recursion depth <= elements).
template <typename Token>
void collect(const Token* tok, std::vector<const EventPtr*>& out) {
  if (tok == nullptr) return;
  collect(tok->parent.get(), out);
  if (tok->event) {
    out.push_back(tok->origin != nullptr ? &tok->origin->event : &tok->event);
  } else {
    collect(tok->right.get(), out);
  }
}

}  // namespace

// The tokens of a lazy Kleene place (Transition::lazy_runs): each event of
// the element once, in arrival order, with the earlier events it may follow
// in a run (SASE's stack entry with its predecessor pointers). The runs are
// enumerated from it, depth-first over the links, when the element after the
// Kleene one arrives; memory follows the events of the window, not their
// rising subsequences. Entries are numbered in arrival order from 0; the
// numbers of dropped entries are not reused, so links stay valid.
struct PetriNet::KleenePlace {
  struct Entry {
    // The event (owned), its ts as first_ts and last_ts, its arrival
    // number and probability: what a run token pointing here (Token::origin)
    // reads.
    Token token;
    uint64_t earlier = 0;  // the number of the first entry at the event's ts
    // The earlier entries it may follow, ascending; unused when every
    // earlier entry may be followed (Transition::all_links).
    std::vector<uint64_t> links;
  };
  std::deque<Entry> entries;  // ts non-decreasing
  uint64_t first = 0;         // the number of entries.front()

  uint64_t end() const { return first + entries.size(); }
  const Entry& at(uint64_t n) const { return entries[n - first]; }
  // The number of the first entry whose ts is above `ts` (end() if none).
  uint64_t firstAfter(Timestamp ts) const {
    auto it = std::partition_point(entries.begin(), entries.end(),
                                   [&](const Entry& e) { return e.token.last_ts <= ts; });
    return first + static_cast<uint64_t>(it - entries.begin());
  }
  // Drops the entries older than `oldest`; returns how many.
  size_t dropBefore(Timestamp oldest) {
    size_t n = 0;
    while (!entries.empty() && entries.front().token.last_ts < oldest) {
      entries.pop_front();
      ++first;
      ++n;
    }
    return n;
  }
};

// What a token made by a firing would hold besides its events: computed
// for every firing, the token is built only when a place keeps it.
struct PetriNet::Stamps {
  Timestamp first_ts = 0;
  Timestamp last_ts = 0;
  uint64_t first_seq = 0;
  double prob = 1;
};

// A transition and its output place. An extension fires on events of `type`
// with the tokens of `input`'s place; a join fires when `right` produces a
// token, with the tokens of `input`'s place that end before it starts.
struct PetriNet::Transition {
  std::string key;              // the chain of element keys from the head
  Transition* input = nullptr;  // whose output place feeds it; null at the head
  Transition* right = nullptr;  // a join: the shared chain it joins with
  // A conjunction's join: it pairs the tokens of `input`'s and `right`'s
  // places in any order (fired when either produces), not only a left token
  // that ends before the right one starts.
  bool conjunction = false;
  // The pattern's strategy when it runs natively (CompiledPattern::strategy;
  // such a transition serves that one pattern): under skip_till_next_match
  // a token is extended only by the first event that fills the element
  // (type and `steers` guards), under strict_contiguity only by the event
  // right after its last.
  pattern::Strategy strategy = pattern::Strategy::kSkipTillAnyMatch;
  // Token::took bits: this transition took a token of its input place (the
  // element after the token's), or of its own place (a Kleene run).
  static constexpr uint8_t kNextTook = 1;
  static constexpr uint8_t kLoopTook = 2;
  static constexpr uint8_t kSeen = 4;
  // A Kleene element's transition: it also reads its own place (a loop),
  // extending each run there with the event, and starts runs from `input`.
  bool loop = false;
  // A Kleene element at or before `depth`: tokens bind by element, not by
  // position (kleene_at[d]: element d is a Kleene one).
  bool by_element = false;
  std::vector<char> kleene_at;
  int depth = 0;  // the last element it binds
  Symbol type;
  CompiledPatternPtr owner;  // keeps `guards` alive
  std::vector<const pattern::Conjunct*> guards;
  std::vector<char> steers;      // per guard: CompiledPattern::Element::guard_steers
  std::vector<int> slots;        // the slot bound at each depth 0..depth, or -1
  Timestamp window = kNoWindow;  // the largest window of `users`
  double min_probability = 1;    // the smallest PROBABILITY bound of `users`
  std::vector<PatternEntry*> users;
  std::vector<PatternEntry*> outputs;  // patterns whose last transition this is
  // `outputs` grouped by CompiledPattern::return_key: one composite per group.
  std::vector<std::vector<PatternEntry*>> output_groups;
  std::vector<Transition*> joins;  // joins fed by this transition's tokens
  // -1: feedback, tokens and events are not consumed. Otherwise a firing
  // takes the input token from the place, and the event from every other
  // transition of the same group: 0 is every conflict pattern (their places
  // are shared, a token goes to one parent), >0 one concurrency pattern
  // (its places are copies: taking a token affects no other pattern).
  int group = -1;
  // Inhibitor places: for each negation of the element it binds, the events
  // of the negated type seen so far (pruned with the window).
  struct Inhibitor {
    const CompiledPattern::Negation* spec = nullptr;
    std::vector<EventPtr> place;
  };
  std::vector<Inhibitor> inhibitors;
  // A token this unlikely helps no user; only a feedback transition may drop
  // it (a consuming one would hand its event to another token instead).
  bool unlikely(double prob) const { return group < 0 && prob < min_probability; }
  // The place holds lazy tokens (one per event, see Token::lazy), which its
  // readers expand: every reader is a feedback extension, the transition's
  // guards name its own element only, and nothing else reads its tokens
  // (no outputs, joins, inhibitors or Kleene element). Memory follows the
  // events in the window, not their combinations, which are built only when
  // an event extends them.
  bool lazy = false;
  // A Kleene element's place holds a KleenePlace (`runs`) instead of one
  // token per run: the loop is a feedback one under skip_till_any_match with
  // no outputs, joins or inhibitors, every other reader of its place only
  // reports (the element after it ends the pattern), and each guard indexes
  // its own element with b[i] and b[i-1] only (no b[1], b[last] or
  // aggregate of the run so far; earlier elements may be named, when a
  // guard relates b[i] to b[i-1]). The guards are split by what they read:
  bool lazy_runs = false;
  std::vector<const pattern::Conjunct*> admit;   // the event alone: checked as it arrives
  std::vector<const pattern::Conjunct*> pair;    // b[i] and b[i-1]: checked per link
  std::vector<const pattern::Conjunct*> across;  // earlier elements: checked per run
  bool all_links = false;  // no `pair` guard: an event may follow every earlier one
  KleenePlace runs;
  size_t consumers = 0;                             // transitions reading the output place
  std::vector<std::shared_ptr<const Token>> place;  // kept only while consumers > 0

  // Tokens held: the place's, or the lazy Kleene place's events.
  size_t held() const { return place.size() + runs.entries.size(); }
};

class PetriNet::Composer final : public plugin::MatchComposer {
 public:
  explicit Composer(CompiledPatternPtr p)
      : p_(std::move(p)), type_(p_->returns ? p_->returns->type : Symbol::intern("Match")) {}

  EventPtr compose(const plugin::Match& match) const override {
    std::vector<pattern::SlotBinding> bindings(p_->layout.size());
    std::vector<std::vector<const Event*>> runs(p_->elements.size());
    for (size_t k = 0; k < match.elementCount(); ++k) {
      const int slot = p_->elements[k].slot;
      if (slot < 0) continue;
      auto events = match.elementEvents(k);
      if (!p_->elements[k].kleene) {
        bindings[slot].event = events.front()->get();
        continue;
      }
      for (const EventPtr* e : events) runs[k].push_back(e->get());
      bindings[slot].events = runs[k];
    }
    EventBuilder builder(type_);
    for (size_t i = 0; i < match.size(); ++i) builder.constituent(match.event(i));
    const double probability = match.probability();
    builder.probability(probability);
    if (p_->returns) p_->returns->apply(bindings, probability, builder);
    return builder.build();
  }

 private:
  CompiledPatternPtr p_;
  Symbol type_;
};

namespace {

// Builds the composite once for every pattern of an output group (equal
// RETURN keys): the first pattern that asks composes, the others share it.
class SharedComposer final : public plugin::MatchComposer {
 public:
  explicit SharedComposer(const plugin::MatchComposer& inner) : inner_(inner) {}
  EventPtr compose(const plugin::Match& match) const override {
    if (composite_ == nullptr) composite_ = inner_.compose(match);
    return composite_;
  }

 private:
  const plugin::MatchComposer& inner_;
  mutable EventPtr composite_;
};

}  // namespace

struct PetriNet::PatternEntry {
  std::string name;
  CompiledPatternPtr pattern;
  plugin::MatchSink* sink = nullptr;
  uint64_t since_seq = 0;
  // Every transition it uses, once each, so that whatever refers to a
  // transition (through input or right) comes after it.
  std::vector<Transition*> chain;
  std::vector<uint32_t> ends;  // 1..m: every element binds one event
  // Read for every match (from `pattern`, which keeps them alive).
  Timestamp window = kNoWindow;
  double min_probability = 0;
  const std::vector<const pattern::Conjunct*>* completion = nullptr;
  std::unique_ptr<Composer> composer;
  int group = -1;    // consumption group of its transitions (see Transition::group)
  size_t split = 0;  // the first element of the chain its join shares, 0 for none
  std::vector<std::string> tail_keys;  // its entries in tails_
  size_t alternative = 0;              // of a disjunction: one entry per alternative
};

}  // namespace cepbus::plugins::petri
