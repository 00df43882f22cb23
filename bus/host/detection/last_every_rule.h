#pragma once

// EMIT LAST EVERY d [PER k]: per key, the last match of each aligned interval
// [i*d, (i+1)*d) of event time (a match in the interval of its end), passed on
// once event time has passed the interval's end (plus `delay`, the WITHIN span
// of a trailing negation, whose matches are reported only then); the end of
// the input (event time passing to the end of time) lets every interval out.
// "Last" is in the order of compareMatches() (match_copy.h): the latest end,
// and of the matches that end together the last in that order. The others
// are suppressed.
//
// A match an engine reports after its interval was let out (only an engine
// that reports late, such as a batched construction) makes the interval come
// out again, with it, at the end of the call that reported it.
//
// Thread safety and ownership: see output_rule.h.

#include <map>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bus/core/value.h"
#include "bus/host/detection/match_copy.h"
#include "bus/host/detection/match_key.h"
#include "bus/host/detection/output_rule.h"

namespace cepbus::detection {

class LastEveryRule final : public OutputRule {
 public:
  LastEveryRule(Timestamp every, MatchKeyer keyer, Timestamp delay, plugin::MatchSink& next);

  void onMatch(const plugin::Match& match) override;
  void onTime(Timestamp t) override;
  Timestamp due() const override;
  void save(plugin::SnapshotWriter& out) const override;
  void load(plugin::SnapshotReader& in) override;

  // The keys it remembers: those holding a match; a key's entry goes once
  // its last interval is let out (amortized, as keys pile up).
  size_t keys() const { return keys_.size(); }

 private:
  // A key's intervals holding a match, by index.
  using Intervals = std::map<Timestamp, MatchCopy>;

  // Holds `copy` for `interval` of `intervals`, waiting for its end.
  void hold(Intervals& intervals, Timestamp interval, MatchCopy copy);

  const Timestamp every_;
  const Timestamp delay_;
  MatchKeyer keyer_;
  std::unordered_map<std::vector<Value>, Intervals, ValueKeyHash, ValueKeyEqual> keys_;
  // The intervals holding a match, by the last time unit they wait for
  // (their end - 1 + delay): what onTime() lets out.
  std::multimap<Timestamp, std::pair<Intervals*, Timestamp>> waiting_;
  std::vector<Value> key_;  // scratch of onMatch()
  size_t next_sweep_ = 64;  // onTime() drops the keys holding nothing when there are this many
};

}  // namespace cepbus::detection
