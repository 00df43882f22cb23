#pragma once

// EMIT FIRST EVERY d [PER k] and AFTER MATCH SKIP PAST LAST EVENT: per key,
// a gate that a match passes when it is far enough after the last match the
// rule passed, the gate moving with each one passed.
//
// - EMIT FIRST EVERY d (per value of k, or one key): a match passes when its
//   end is at least d after the end of the last one passed (Esper's `output
//   first every`).
// - AFTER MATCH SKIP PAST LAST EVENT (per partition): a match passes when its
//   first event is after the end of the last one passed, so no two matches
//   passed share an event or overlap in time (Flink's SKIP_PAST_LAST_EVENT,
//   MATCH_RECOGNIZE's AFTER MATCH SKIP PAST LAST ROW).
//
// Order. The rule takes a key's matches in the order of compareMatches()
// (match_copy.h), whatever order the engine reports them in: a match that
// could pass is held until event time has passed its end (plus `delay`,
// the WITHIN span of a trailing negation, whose matches are reported only
// then). Of the matches of a key that end together one at most can pass, and
// only one is held: for EMIT FIRST the first in that order; for SKIP PAST
// LAST EVENT the one that starts last (the shortest; it passes if any of them
// does, and whichever passes the gate then opens after the same end), then
// the first in that order. A match that cannot pass is suppressed as soon as
// it is reported, without a copy.
//
// Thread safety and ownership: see output_rule.h.

#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "bus/core/value.h"
#include "bus/host/detection/match_copy.h"
#include "bus/host/detection/match_key.h"
#include "bus/host/detection/output_rule.h"

namespace cepbus::detection {

class GateRule final : public OutputRule {
 public:
  // EMIT FIRST EVERY `every` PER `keyer`.
  static std::unique_ptr<GateRule> firstEvery(Timestamp every, MatchKeyer keyer, Timestamp delay,
                                              plugin::MatchSink& next);
  // AFTER MATCH SKIP PAST LAST EVENT in the partitions of `keyer`; `within`
  // is the query's WITHIN (how far before its end a match may start), which
  // lets the rule forget a partition whose gate no later match can meet.
  static std::unique_ptr<GateRule> skipPastLastEvent(MatchKeyer keyer,
                                                     std::optional<Timestamp> within,
                                                     Timestamp delay, plugin::MatchSink& next);

  void onMatch(const plugin::Match& match) override;
  void onTime(Timestamp t) override;
  Timestamp due() const override;
  void save(plugin::SnapshotWriter& out) const override;
  void load(plugin::SnapshotReader& in) override;

  // The keys it remembers: those holding a match or whose gate may still
  // stop one. The others are forgotten as event time passes (their matches
  // pass as a new key's would), so memory follows the keys active within
  // WITHIN (every key seen, for SKIP PAST LAST EVENT without WITHIN).
  size_t keys() const { return keys_.size(); }

 private:
  // What a match is measured by against the gate: its end (FIRST) or its
  // start (SKIP PAST LAST EVENT).
  enum class Measure { kEnd, kStart };
  struct Key {
    Timestamp open_at = INT64_MIN;        // a match passes when its measure is at least this
    std::map<Timestamp, MatchCopy> held;  // by end: the first of the key's matches ending there
  };

  GateRule(Measure measure, Timestamp step, std::optional<Timestamp> reach, MatchKeyer keyer,
           Timestamp delay, plugin::MatchSink& next);
  // Forgets, now and then, the keys no match still to come can be stopped
  // by: every match ending by `decided` is in.
  void forgetIdleKeys(Timestamp decided);
  Timestamp measure(const plugin::Match& match) const;
  // Whether `a` is held rather than `b`, two matches of a key ending together.
  bool preferred(const plugin::Match& a, const plugin::Match& b) const;

  const Measure measure_;
  // A match passed at end e opens the gate at e + step_: d for FIRST, 1 for
  // SKIP PAST LAST EVENT (a later first event).
  const Timestamp step_;
  const Timestamp delay_;
  // How far below the last decided time a later match's measure may be: 0
  // for its end, WITHIN for its start; nullopt: unbounded (keys are kept).
  const std::optional<Timestamp> reach_;
  size_t next_sweep_;  // forgetIdleKeys() looks at the keys when there are this many
  MatchKeyer keyer_;
  std::unordered_map<std::vector<Value>, Key, ValueKeyHash, ValueKeyEqual> keys_;
  // The keys holding a match, by the match's end: what onTime() decides.
  std::multimap<Timestamp, Key*> waiting_;
  std::vector<Value> key_;  // scratch of onMatch()
};

}  // namespace cepbus::detection
