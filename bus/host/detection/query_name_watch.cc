#include "bus/host/detection/query_name_watch.h"

#include <algorithm>

namespace cepbus::detection {

QueryNameWatch::QueryNameWatch(const pattern::Query& query, std::string_view text,
                               uint64_t sample_events)
    : uses_(namesUsedBy(query, text)), sample_events_(sample_events) {
  for (const NameUse& use : uses_) {
    if (use.kind != NameUse::Kind::kAttribute || !use.predicate) continue;
    const Symbol type = Symbol::intern(use.type);
    auto reads = std::find_if(reads_.begin(), reads_.end(),
                              [&](const TypeReads& r) { return r.type == type; });
    if (reads == reads_.end()) reads = reads_.insert(reads_.end(), TypeReads{type, {}});
    reads->attributes.push_back(Symbol::intern(use.name));
  }
}

bool QueryNameWatch::lacksRead(const Event& event) const {
  for (const TypeReads& r : reads_) {
    if (r.type != event.type()) continue;
    return std::any_of(r.attributes.begin(), r.attributes.end(),
                       [&](Symbol a) { return event.find(a) == nullptr; });
  }
  return false;
}

std::vector<std::string> QueryNameWatch::onEvents(std::span<const EventPtr> events) {
  if (!reads_.empty()) {
    uint64_t missing = 0;
    for (const EventPtr& e : events) missing += lacksRead(*e) ? 1 : 0;
    if (missing > 0) missing_.fetch_add(missing, std::memory_order_relaxed);
  }
  if (checked_) return {};
  const uint64_t room = sample_events_ - sample_.events();
  sample_.observe(events.first(std::min<uint64_t>(room, events.size())));
  if (sample_.events() < sample_events_) return {};
  checked_ = true;
  return sample_.unknownNames(
      uses_, "the first " + std::to_string(sample_events_) + " events on its inputs");
}

}  // namespace cepbus::detection
