#pragma once

// A match kept beyond MatchSink::onMatch, for output control (output_control.h)
// that decides about a match only once event time has passed it, and the
// order in which output control takes the matches it holds.
//
// Thread safety: none; a MatchCopy is made and read on the detector's thread.
// Ownership: it shares the bound events and the composite it made when copied.

#include <cstdint>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/plugin/snapshot.h"

namespace cepbus::detection {

// The time of a match: its end, the greatest ts of its events.
Timestamp matchEnd(const plugin::Match& match);
// The smallest ts of its events.
Timestamp matchStart(const plugin::Match& match);

// The order output control takes matches in, the same on every engine: by
// end, then by the bound events in pattern order, compared lexicographically
// by ts and, for equal ts, by event id (the order the host made the events
// in, which is the order they came in). Among matches that end together, the
// one that starts first comes first. Negative, zero or positive as `a` comes
// before, with or after `b`; zero for matches of the same events.
int compareMatches(const plugin::Match& a, const plugin::Match& b);

class MatchCopy final : private plugin::MatchComposer {
 public:
  // Copies the bound events of `match` and makes its composite now: the
  // engine's composer is reachable only during onMatch.
  explicit MatchCopy(const plugin::Match& match);
  MatchCopy(MatchCopy&&) = default;
  MatchCopy& operator=(MatchCopy&&) = default;

  // The match as it was reported; valid while this copy is unchanged.
  plugin::Match view() const { return plugin::Match(pointers_, ends_, this); }
  Timestamp end() const { return end_; }

  // Its events, element bounds and composite, for a snapshot of the output
  // control holding it.
  void save(plugin::SnapshotWriter& out) const;
  // What save() wrote; a copy that is not one (a missing event, element
  // bounds out of order) fails `in` and comes back empty.
  static MatchCopy load(plugin::SnapshotReader& in);

 private:
  MatchCopy() = default;
  void pointAtEvents();

  EventPtr compose(const plugin::Match& /*match*/) const override { return composite_; }

  std::vector<EventPtr> events_;
  std::vector<const EventPtr*> pointers_;  // into events_'s buffer, which a move keeps
  std::vector<uint32_t> ends_;
  EventPtr composite_;
  Timestamp end_ = INT64_MIN;
};

}  // namespace cepbus::detection
