#include "bus/host/time/reorder.h"

#include <algorithm>
#include <exception>
#include <string>

namespace cepbus::plugin {
namespace {

// std::*_heap keep the greatest element on top; the earliest (ts, seq) must be.
struct Later {
  template <typename T>
  bool operator()(const T& a, const T& b) const {
    return a.ts != b.ts ? a.ts > b.ts : a.seq > b.seq;
  }
};

}  // namespace

Result<Timestamp> parseSlack(std::string_view value) {
  const std::string text(value);
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= 0) return static_cast<Timestamp>(v);
  } catch (const std::exception&) {
  }
  return Status::invalidArgument("option slack=" + text + ": expected a non-negative integer");
}

ReorderBuffer::ReorderBuffer(Timestamp slack) : slack_(slack) {}

Status ReorderBuffer::admit(const Event& event) {
  const Timestamp ts = event.ts();
  if (isLate(ts)) {
    return Status::invalidArgument(
        "out-of-order event: type " + std::string(event.type().name()) + " at ts " +
        std::to_string(ts) + " arrived after ts " + std::to_string(newest_) + ", " +
        std::to_string(newest_ - ts) + " time units late; the slack is " + std::to_string(slack_) +
        (slack_ == 0 ? " (set the option slack=N to reorder late events)" : ""));
  }
  newest_ = std::max(newest_, ts);
  return Status::ok();
}

size_t ReorderBuffer::admitInOrder(std::span<const EventPtr> events) {
  // The loop is a few instructions an event: only a long distance covers a miss.
  constexpr size_t kAhead = 32;
  const size_t n = events.size();
  for (size_t i = 0; i < std::min(n, kAhead); ++i) __builtin_prefetch(events[i].get());
  Timestamp newest = newest_;
  const Timestamp floor = newest == INT64_MIN ? INT64_MIN : newest - slack_;
  size_t i = 0;
  for (Timestamp lowest = floor; i < n; ++i) {
    if (i + kAhead < n) __builtin_prefetch(events[i + kAhead].get());
    const Timestamp ts = events[i]->ts();
    if (ts < lowest) break;
    if (ts > newest) {
      newest = ts;
      lowest = newest - slack_;
    }
  }
  newest_ = newest;
  return i;
}

Status ReorderBuffer::push(EventPtr event) {
  Status s = admit(*event);
  if (!s) return s;
  const Timestamp ts = event->ts();
  heap_.push_back(Item{ts, next_seq_++, std::move(event)});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
  return Status::ok();
}

EventPtr ReorderBuffer::popTop() {
  std::pop_heap(heap_.begin(), heap_.end(), Later{});
  EventPtr e = std::move(heap_.back().event);
  heap_.pop_back();
  return e;
}

EventPtr ReorderBuffer::popReady() {
  if (heap_.empty() || heap_.front().ts > newest_ - slack_) return nullptr;
  return popTop();
}

EventPtr ReorderBuffer::popAny() { return heap_.empty() ? nullptr : popTop(); }

ReorderingDetector::ReorderingDetector(std::unique_ptr<Detector> inner, Timestamp slack)
    : inner_(std::move(inner)), buffer_(slack) {}

Status ReorderingDetector::onEvent(const EventPtr& event) {
  if (buffer_.slack() == 0) {
    // The common in-order case: check, then forward without touching the heap.
    Status s = buffer_.admit(*event);
    return s ? forward(event) : s;
  }
  Status s = buffer_.push(event);
  if (!s) return s;
  Status first = Status::ok();
  while (EventPtr ready = buffer_.popReady()) {
    Status r = forward(ready);
    if (!r && first) first = std::move(r);
  }
  return first;
}

Status ReorderingDetector::onEvents(std::span<const EventPtr> events) {
  Status first = Status::ok();
  auto note = [&first](Status s) {
    if (!s && first) first = std::move(s);
  };
  if (buffer_.slack() == 0) {
    // Runs of in-order events, each forwarded whole, between late ones.
    while (!events.empty()) {
      const size_t run = buffer_.admitInOrder(events);
      if (run > 0) note(forward(events.first(run)));
      if (run == events.size()) break;
      note(buffer_.admit(*events[run]));  // late: the error names it
      events = events.subspan(run + 1);
    }
    return first;
  }
  // Releasing once after every push gives the same order as releasing after
  // each: an admitted event is never earlier than one already safe to release.
  for (const EventPtr& event : events) note(buffer_.push(event));
  while (EventPtr ready = buffer_.popReady()) ready_.push_back(std::move(ready));
  if (!ready_.empty()) {
    // Emptied also when the inner detector throws: nothing is forwarded twice.
    struct Clear {
      std::vector<EventPtr>& v;
      ~Clear() { v.clear(); }
    } clear{ready_};
    note(forward(ready_));
  }
  return first;
}

Status ReorderingDetector::flush() {
  Status first = Status::ok();
  while (EventPtr e = buffer_.popAny()) {
    Status r = forward(e);
    if (!r && first) first = std::move(r);
  }
  Status f = inner_->flush();
  if (!f && first) first = std::move(f);
  return first;
}

Status ReorderingDetector::forward(std::span<const EventPtr> events) {
  // In order, so the last is the newest (equal timestamps keep arrival order).
  released_ = events.back()->ts();
  return inner_->onEvents(events);
}

Status ReorderingDetector::forward(const EventPtr& event) {
  released_ = event->ts();
  return inner_->onEvent(event);
}

}  // namespace cepbus::plugin
