#pragma once

// Matches made by hand and a sink that records them, for the tests of output
// control's rules (gate_rule_test.cc, last_every_rule_test.cc,
// output_control_test.cc).

#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"

namespace cepbus::detection::match_fakes {

// An event of type T at `ts` with attribute sensor=`sensor`.
inline EventPtr reading(Timestamp ts, const std::string& sensor = "s1") {
  return EventBuilder("T").at(ts).set("sensor", Value(sensor)).build();
}

// Composes "Alert" with the sensor of the first event, so a test sees which
// composite came through.
class AlertComposer final : public plugin::MatchComposer {
 public:
  EventPtr compose(const plugin::Match& match) const override {
    return EventBuilder("Alert").at(match.ts(match.size() - 1)).build();
  }
};

// Reports the match of `events` (one element each) to `sink`.
inline void report(plugin::MatchSink& sink, const std::vector<EventPtr>& events) {
  static const AlertComposer composer;
  std::vector<const EventPtr*> pointers;
  std::vector<uint32_t> ends;
  for (const EventPtr& e : events) {
    pointers.push_back(&e);
    ends.push_back(static_cast<uint32_t>(pointers.size()));
  }
  sink.onMatch(plugin::Match(pointers, ends, &composer));
}

// Records each match's ts and whether its composite is the Alert composed.
class RecordingSink final : public plugin::MatchSink {
 public:
  void onMatch(const plugin::Match& match) override {
    std::vector<Timestamp> ts;
    for (size_t i = 0; i < match.size(); ++i) ts.push_back(match.ts(i));
    got.push_back(ts);
    const EventPtr composite = match.composite();
    composed_alerts += composite != nullptr && composite->type() == Symbol::intern("Alert");
  }
  std::vector<std::vector<Timestamp>> got;
  size_t composed_alerts = 0;
};

}  // namespace cepbus::detection::match_fakes
