#pragma once

// NOT(...) at the start or the end of a query's SEQ, checked in the host on
// the matches an engine reports for the pattern without it (edge_negation.h),
// with the semantics the nfa engine runs natively (docs/time.md, "Absence at
// the start and the end of a pattern"). With W the query's WITHIN, a match
// from `first` to `last` is kept when no negated event C satisfying every
// WHERE conjunct that mentions its variable (and in the match's partition)
// lies in [last - W, first) for a leading NOT, in (last, first + W] for a
// trailing one.
//
// A leading NOT is decided when the match is reported: every C before its
// first event has been seen. A trailing one waits until event time passes
// first + W (onTime()), cancelled by a C in its span that arrives meanwhile.
// The C events are kept only while a match still to be reported can need
// them (forget()), the matches held only until their span ends: memory is
// bounded by W.
//
// Thread safety: none; driven on the detector's thread. Ownership: `next`
// is the caller's and outlives the rule.

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/pattern/ast.h"
#include "bus/core/pattern/expr_compiler.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/plugin/snapshot.h"
#include "bus/core/status.h"
#include "bus/core/symbol.h"
#include "bus/core/value.h"
#include "bus/host/detection/match_copy.h"

namespace cepbus::detection {

class AbsenceRule final : public plugin::MatchSink {
 public:
  // The checks of `query`'s NOT elements at the edges of its SEQ, passing
  // what they keep to `next`. InvalidArgument naming what the host cannot
  // check that way: no WITHIN, CONTEXT recent, a predicate naming two
  // negated variables.
  static Result<std::unique_ptr<AbsenceRule>> create(const pattern::Query& query,
                                                     plugin::MatchSink& next);

  // A match of the pattern without its edge negations, as the engine reports it.
  void onMatch(const plugin::Match& match) override;
  // An event, in event time, before the engine is offered it.
  void onEvent(const EventPtr& event);
  // Event time has passed `t`: every event at or before it has been seen.
  void onTime(Timestamp t);
  // Every match ending at or before `reported_to` has been reported: the
  // negated events no later match can need are dropped.
  void forget(Timestamp reported_to);
  // A new stream after the end of time: nothing seen, nothing held.
  void restart();
  // Its state (event time, the negated events kept, the matches held) for a
  // snapshot of its edge negation; load() reads it back into a rule just
  // made for the same query, failing `in` on what does not fit.
  void save(plugin::SnapshotWriter& out) const;
  void load(plugin::SnapshotReader& in);

  Timestamp window() const { return window_; }
  // The matches held for their trailing span and the negated events kept.
  size_t held() const { return held_.size(); }
  size_t kept() const;

 private:
  struct Negation {
    Symbol type;
    int slot = -1;                  // its variable's slot, -1 when unnamed
    bool leading = false;           // else trailing
    std::vector<size_t> conjuncts;  // into conjuncts_: those that mention it
    std::deque<EventPtr> seen;      // in event time
  };
  struct Held {
    MatchCopy match;
    Timestamp last;
    std::vector<Value> key;
  };

  AbsenceRule(plugin::MatchSink& next, Timestamp window) : next_(next), window_(window) {}
  // `c` negates the match bound in slots_ (`key` its partition).
  bool negates(const Negation& n, const Event& c, const std::vector<Value>& key);
  // Whether some kept C of `n` in [from, to] negates the match bound in slots_.
  bool negatedBySeen(const Negation& n, Timestamp from, Timestamp to,
                     const std::vector<Value>& key);
  // Binds `match` to slots_ and its partition to key_.
  void bind(const plugin::Match& match);

  plugin::MatchSink& next_;
  const Timestamp window_;
  std::vector<Negation> negations_;
  std::vector<pattern::Conjunct> conjuncts_;  // compiled against the full query's layout
  std::vector<int> element_slots_;
  std::vector<Symbol> partition_;
  Timestamp time_ = INT64_MIN;
  std::multimap<Timestamp, Held> held_;  // by the end of the trailing span
  // Scratch of the match being decided.
  std::vector<const Event*> events_;
  std::vector<pattern::SlotBinding> slots_;
  std::vector<Value> key_;
};

}  // namespace cepbus::detection
