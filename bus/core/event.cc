#include "bus/core/event.h"

#include <algorithm>
#include <atomic>
#include <random>

namespace cepbus {

Event::~Event() {
  if (!holds_names_) return;
  releaseHeldName(type_);
  releaseHeldName(source_);
  for (const Attribute& a : attrs_) releaseHeldName(a.name);
}

const Value* Event::find(Symbol name) const {
  for (const Attribute& a : attrs_) {
    if (a.name == name) return &a.value;
    if (a.name > name) break;
  }
  return nullptr;
}

EventId nextEventId() {
  static const EventId prefix = [] {
    std::random_device rd;
    return (static_cast<EventId>(rd()) & 0xFFFFFF) << 40;
  }();
  static std::atomic<EventId> counter{1};
  return prefix | (counter.fetch_add(1, std::memory_order_relaxed) & ((EventId{1} << 40) - 1));
}

EventBuilder::EventBuilder(Symbol type) : EventBuilder(NameHold::of(type)) {}

EventBuilder::EventBuilder(NameHold type) : event_(std::make_shared<Event>(Event::Key())) {
  event_->holds_names_ = type.symbol().held();
  event_->type_ = type.release();
}

EventBuilder& EventBuilder::at(Timestamp ts) { return interval(ts, ts); }

EventBuilder& EventBuilder::interval(Timestamp start, Timestamp end) {
  event_->start_ = start;
  event_->end_ = end;
  interval_set_ = true;
  return *this;
}

EventBuilder& EventBuilder::set(Symbol name, Value value) {
  return set(NameHold::of(name), std::move(value));
}

EventBuilder& EventBuilder::set(NameHold name, Value value) {
  auto& attrs = event_->attrs_;
  // Appended when it sorts after the last: callers that know their names
  // (a query's RETURN, an engine's results) set them in id order, and pay
  // neither the search nor the insertion's shift.
  if (attrs.empty() || attrs.back().name < name.symbol()) {
    event_->holds_names_ |= name.symbol().held();
    attrs.push_back(Attribute{name.release(), std::move(value)});
    return *this;
  }
  auto it = std::lower_bound(attrs.begin(), attrs.end(), name.symbol(),
                             [](const Attribute& a, Symbol n) { return a.name < n; });
  if (it != attrs.end() && it->name == name.symbol()) {
    it->value = std::move(value);  // the event holds the name already: `name` lets go
  } else {
    event_->holds_names_ |= name.symbol().held();
    attrs.insert(it, Attribute{name.release(), std::move(value)});
  }
  return *this;
}

// Out of line: inlined with a temporary Value, g++ 12 under ASan reports a
// spurious -Wmaybe-uninitialized in std::variant's move.
EventBuilder& EventBuilder::set(std::string_view name, Value value) {
  return set(Symbol::intern(name), std::move(value));
}

EventBuilder& EventBuilder::reserveAttributes(size_t n) {
  event_->attrs_.reserve(n);
  return *this;
}

EventBuilder& EventBuilder::probability(double p) {
  event_->probability_ = p;
  return *this;
}

EventBuilder& EventBuilder::key(Value key) {
  event_->key_ = std::move(key);
  return *this;
}

EventBuilder& EventBuilder::cost(int32_t cost) {
  event_->cost_ = cost;
  return *this;
}

EventBuilder& EventBuilder::id(EventId id) {
  event_->id_ = id;
  return *this;
}

EventBuilder& EventBuilder::source(Symbol endpoint) { return source(NameHold::of(endpoint)); }

EventBuilder& EventBuilder::source(NameHold endpoint) {
  releaseHeldName(event_->source_);
  event_->holds_names_ |= endpoint.symbol().held();
  event_->source_ = endpoint.release();
  return *this;
}

EventBuilder& EventBuilder::constituent(EventPtr part) {
  if (!interval_set_) {
    event_->start_ = part->start();
    event_->end_ = part->end();
    interval_set_ = true;
  } else {
    event_->start_ = std::min(event_->start_, part->start());
    event_->end_ = std::max(event_->end_, part->end());
  }
  event_->constituents_.push_back(std::move(part));
  return *this;
}

EventPtr EventBuilder::build() {
  if (event_->id_ == 0) event_->id_ = nextEventId();
  return std::move(event_);
}

}  // namespace cepbus
