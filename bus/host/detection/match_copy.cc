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
  pointAtEvents();
  ends_.reserve(match.elementCount());
  uint32_t end = 0;
  for (size_t j = 0; j < match.elementCount(); ++j) {
    end += static_cast<uint32_t>(match.elementEvents(j).size());
    ends_.push_back(end);
  }
}

void MatchCopy::pointAtEvents() {
  pointers_.clear();
  pointers_.reserve(events_.size());
  for (const EventPtr& e : events_) pointers_.push_back(&e);
}

void MatchCopy::save(plugin::SnapshotWriter& out) const {
  out.varint(events_.size());
  for (const EventPtr& e : events_) out.event(e);
  out.varint(ends_.size());
  for (uint32_t end : ends_) out.varint(end);
  out.event(composite_);
}

MatchCopy MatchCopy::load(plugin::SnapshotReader& in) {
  MatchCopy copy;
  const uint64_t events = in.count();
  for (uint64_t i = 0; i < events && in.ok(); ++i) {
    copy.events_.push_back(in.event());
    if (copy.events_.back() == nullptr) in.fail("a held match without its events");
  }
  const uint64_t elements = in.count();
  for (uint64_t j = 0; j < elements && in.ok(); ++j) {
    const uint64_t end = in.varint();
    if (end > events || (!copy.ends_.empty() && end < copy.ends_.back())) {
      in.fail("a held match's element bounds out of order");
    }
    copy.ends_.push_back(static_cast<uint32_t>(end));
  }
  if (in.ok() && (events == 0 || copy.ends_.empty() || copy.ends_.back() != events)) {
    in.fail("a held match's elements do not cover its events");
  }
  copy.composite_ = in.event();
  if (in.ok() && copy.composite_ == nullptr) in.fail("a held match without its composite event");
  if (!in.ok()) return MatchCopy();
  copy.pointAtEvents();
  copy.end_ = matchEnd(copy.view());
  return copy;
}

}  // namespace cepbus::detection
