#include "bus/host/detection/match_copy.h"

#include <algorithm>

namespace cepbus::detection {

Timestamp matchEnd(const plugin::Match& match) {
  Timestamp end = INT64_MIN;
  for (size_t i = 0; i < match.size(); ++i) end = std::max(end, match.ts(i));
  return end;
}

Timestamp matchStart(const plugin::Match& match) {
  Timestamp start = INT64_MAX;
  for (size_t i = 0; i < match.size(); ++i) start = std::min(start, match.ts(i));
  return start;
}

int compareMatches(const plugin::Match& a, const plugin::Match& b) {
  const Timestamp ea = matchEnd(a);
  const Timestamp eb = matchEnd(b);
  if (ea != eb) return ea < eb ? -1 : 1;
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (a.ts(i) != b.ts(i)) return a.ts(i) < b.ts(i) ? -1 : 1;
    // Events of equal ts in the order they were made: the order they came in.
    const EventId ia = a.event(i)->id();
    const EventId ib = b.event(i)->id();
    if (ia != ib) return ia < ib ? -1 : 1;
  }
  if (a.size() == b.size()) return 0;
  return a.size() < b.size() ? -1 : 1;
}

MatchCopy::MatchCopy(const plugin::Match& match)
    : composite_(match.composite()), end_(matchEnd(match)) {
  events_.reserve(match.size());
  for (size_t i = 0; i < match.size(); ++i) events_.push_back(match.event(i));
  pointers_.reserve(events_.size());
  for (const EventPtr& e : events_) pointers_.push_back(&e);
  ends_.reserve(match.elementCount());
  uint32_t end = 0;
  for (size_t j = 0; j < match.elementCount(); ++j) {
    end += static_cast<uint32_t>(match.elementEvents(j).size());
    ends_.push_back(end);
  }
}

}  // namespace cepbus::detection
