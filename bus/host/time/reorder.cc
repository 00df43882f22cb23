#include "bus/host/time/reorder.h"

#include <algorithm>
#include <exception>
#include <string>

namespace cepbus::plugin {

Result<Timestamp> parseMaxDelay(std::string_view name, std::string_view value) {
  const std::string text(value);
  try {
    size_t used = 0;
    const long long v = std::stoll(text, &used);
    if (used == text.size() && v >= 0) return static_cast<Timestamp>(v);
  } catch (const std::exception&) {
  }
  return Status::invalidArgument("option " + std::string(name) + "=" + text +
                                 ": expected a non-negative integer");
}

ReorderBuffer::ReorderBuffer(Timestamp max_delay, EventTime time)
    : max_delay_(max_delay), time_(time), held_(max_delay) {}

Status ReorderBuffer::admit(const Event& event) {
  const Timestamp ts = event.ts();
  if (isLate(ts)) {
    return Status::invalidArgument(
        "out-of-order event: type " + std::string(event.type().name()) + " at ts " +
        std::to_string(ts) + " arrived after ts " + std::to_string(newest_) + ", " +
        std::to_string(newest_ - ts) + " time units late; the maximum delay is " +
        std::to_string(max_delay_) +
        (max_delay_ == 0 ? " (set the option max_delay=N to reorder late events)" : ""));
  }
  if (time_ == EventTime::kNewestEvent) newest_ = std::max(newest_, ts);
  return Status::ok();
}

size_t ReorderBuffer::admitInOrder(std::span<const EventPtr> events) {
  // The loop is a few instructions an event: only a long distance covers a miss.
  constexpr size_t kAhead = 32;
  const size_t n = events.size();
  for (size_t i = 0; i < std::min(n, kAhead); ++i) __builtin_prefetch(events[i].get());
  Timestamp newest = newest_;
  const Timestamp floor = watermark();
  size_t i = 0;
  for (Timestamp lowest = floor; i < n; ++i) {
    if (i + kAhead < n) __builtin_prefetch(events[i + kAhead].get());
    const Timestamp ts = events[i]->ts();
    if (ts < lowest) break;
    if (ts > newest) {
      newest = ts;
      lowest = newest - max_delay_;
    }
  }
  newest_ = newest;
  return i;
}

Status ReorderBuffer::push(EventPtr event) {
  const Timestamp ts = event->ts();
  if (isLate(ts)) return admit(*event);  // the error names it
  if (time_ == EventTime::kNewestEvent && ts > newest_) newest_ = ts;
  // What the watermark passed is ready before this event: every event held
  // is then after the watermark, within D of the newest, as held_ needs.
  const Timestamp upto = watermark();
  if (upto > released_upto_) releaseTo(upto);
  if (ts <= upto) {
    ready_.push_back(std::move(event));  // at the watermark: after every ready one
  } else if (upto != INT64_MIN && ts <= upto + max_delay_) {  // upto + D is the newest
    held_.push(std::move(event));
  } else {
    far_.emplace(ts, std::move(event));  // after the equal ones: arrival order
  }
  return Status::ok();
}

void ReorderBuffer::advanceTo(Timestamp event_time) {
  if (event_time <= newest_) return;
  newest_ = event_time;
  releaseTo(watermark());
}

void ReorderBuffer::releaseTo(Timestamp upto) {
  if (upto <= released_upto_) return;
  held_.releaseUpTo(upto, ready_);
  released_upto_ = upto;
  if (far_.empty()) return;
  // held_ held only events within D of the old watermark, each before every
  // one in far_: those the watermark passed follow them, and those now
  // within D of it go to held_ before any later arrival at their ts.
  auto it = far_.begin();
  for (; it != far_.end() && it->first <= upto; ++it) ready_.push_back(std::move(it->second));
  for (; it != far_.end() && it->first <= upto + max_delay_; ++it) {
    held_.push(std::move(it->second));
  }
  far_.erase(far_.begin(), it);
}

EventPtr ReorderBuffer::popReady() {
  if (ready_head_ == ready_.size()) {
    clearReady();
    return nullptr;
  }
  return std::move(ready_[ready_head_++]);
}

EventPtr ReorderBuffer::popAny() {
  if (ready_head_ == ready_.size()) {
    held_.releaseAll(ready_);
    for (auto& [ts, event] : far_) ready_.push_back(std::move(event));
    far_.clear();
  }
  return popReady();
}

// The version of the section ReorderBuffer and ReorderingDetector write.
constexpr uint32_t kReorderStateVersion = 1;
// The held events and the event time do not depend on the query's clauses
// (the maximum delay is checked apart): one shape, whatever the edit.
constexpr uint64_t kReorderShape = 1;

void ReorderBuffer::snapshot(SnapshotWriter& out) const {
  out.signedVarint(newest_);
  out.signedVarint(released_upto_);
  // Copied to be walked in release order without disturbing the buffer.
  std::vector<EventPtr> held;
  TimeBuckets(held_).releaseAll(held);
  out.varint(held.size());
  for (const EventPtr& e : held) out.event(e);
  out.varint(far_.size());
  for (const auto& [ts, e] : far_) out.event(e);
}

void ReorderBuffer::restore(SnapshotReader& in) {
  newest_ = in.signedVarint();
  released_upto_ = in.signedVarint();
  const Timestamp upto = watermark();
  const uint64_t held = in.count();
  for (uint64_t i = 0; i < held && in.ok(); ++i) {
    EventPtr e = in.event();
    // What push() put in held_: after the watermark, within D of it.
    if (!e || e->ts() <= upto || e->ts() > upto + max_delay_) {
      in.fail("a held event outside the reorder span");
      return;
    }
    held_.push(std::move(e));
  }
  const uint64_t far = in.count();
  for (uint64_t i = 0; i < far && in.ok(); ++i) {
    EventPtr e = in.event();
    if (!e) {
      in.fail("a missing event in the reorder buffer");
      return;
    }
    const Timestamp ts = e->ts();
    far_.emplace(ts, std::move(e));
  }
}

ReorderingDetector::ReorderingDetector(std::unique_ptr<Detector> inner, Timestamp max_delay,
                                       LateSink* late, EventTime time)
    : inner_(std::move(inner)), buffer_(max_delay, time), late_(late) {}

Status ReorderingDetector::late(const EventPtr& event) {
  if (late_ == nullptr) return buffer_.admit(*event);  // the error names it
  late_->onLate(event, buffer_.newest());
  return Status::ok();
}

Status ReorderingDetector::offer(const EventPtr& event) {
  return buffer_.isLate(event->ts()) ? late(event) : buffer_.push(event);
}

void ReorderingDetector::passTime(Status& first) {
  const Timestamp watermark = buffer_.watermark();
  if (watermark == INT64_MIN || watermark - 1 <= passed_) return;
  passed_ = watermark - 1;
  Status s = inner_->onWatermark(passed_);
  if (!s && first) first = std::move(s);
}

Status ReorderingDetector::onEvent(const EventPtr& event) {
  if (buffer_.isLate(event->ts())) return late(event);
  Status first = Status::ok();
  if (buffer_.maxDelay() == 0 && !buffer_.ownerKeepsTime()) {
    // The common in-order case: forward without holding the event.
    first = buffer_.admit(*event);
    if (!first) return first;
    first = forward(event);
    passTime(first);
    return first;
  }
  first = buffer_.push(event);
  if (!first) return first;
  while (EventPtr ready = buffer_.popReady()) {
    Status r = forward(ready);
    if (!r && first) first = std::move(r);
  }
  passTime(first);
  return first;
}

Status ReorderingDetector::onEvents(std::span<const EventPtr> events) {
  Status first = onEventsKeepingTime(events);
  passTime(first);
  return first;
}

Status ReorderingDetector::passHeldTime() {
  Status first = Status::ok();
  passTime(first);
  return first;
}

Status ReorderingDetector::onEventsKeepingTime(std::span<const EventPtr> events) {
  Status first = Status::ok();
  auto note = [&first](Status s) {
    if (!s && first) first = std::move(s);
  };
  if (buffer_.maxDelay() == 0 && !buffer_.ownerKeepsTime()) {
    // Runs of in-order events, each forwarded whole, between late ones.
    while (!events.empty()) {
      const size_t run = buffer_.admitInOrder(events);
      if (run > 0) note(forward(events.first(run)));
      if (run == events.size()) break;
      note(late(events[run]));
      events = events.subspan(run + 1);
    }
    return first;
  }
  // Releasing once after every push gives the same order as releasing after
  // each: an admitted event is never earlier than one already safe to release.
  // Each event is loaded a few places ahead (see admitInOrder()).
  constexpr size_t kAhead = 8;
  for (size_t i = 0; i < events.size(); ++i) {
    if (i + kAhead < events.size()) __builtin_prefetch(events[i + kAhead].get());
    note(offer(events[i]));
  }
  note(forwardReady());
  return first;
}

Status ReorderingDetector::advanceTo(Timestamp event_time) {
  buffer_.advanceTo(event_time);
  Status first = forwardReady();
  passTime(first);
  return first;
}

Status ReorderingDetector::forwardReady() {
  const std::span<const EventPtr> ready = buffer_.ready();
  if (ready.empty()) return Status::ok();
  // Emptied also when the inner detector throws: nothing is forwarded twice.
  struct Clear {
    ReorderBuffer& buffer;
    ~Clear() { buffer.clearReady(); }
  } clear{buffer_};
  return forward(ready);
}

Status ReorderingDetector::flush() {
  Status first = Status::ok();
  while (EventPtr e = buffer_.popAny()) {
    Status r = forward(e);
    if (!r && first) first = std::move(r);
  }
  // Not recorded in passed_: events after a flush are a new stream whose
  // time the inner detector hears again.
  Status w = inner_->onWatermark(kEndOfTime);
  if (!w && first) first = std::move(w);
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

Status ReorderingDetector::snapshot(SnapshotWriter& out) const {
  out.section("reorder", kReorderStateVersion, kReorderShape);
  out.signedVarint(buffer_.maxDelay());
  out.signedVarint(released_);
  out.signedVarint(passed_);
  buffer_.snapshot(out);
  return inner_->snapshot(out);
}

Status ReorderingDetector::restore(SnapshotReader& in) {
  if (!in.section("reorder", kReorderStateVersion, kReorderShape)) return in.status();
  if (const Timestamp d = in.signedVarint(); in.ok() && d != buffer_.maxDelay()) {
    in.fail("the snapshot's maximum delay is " + std::to_string(d) + ", this query's " +
            std::to_string(buffer_.maxDelay()));
  }
  released_ = in.signedVarint();
  passed_ = in.signedVarint();
  buffer_.restore(in);
  if (!in.ok()) return in.status();
  return inner_->restore(in);
}

}  // namespace cepbus::plugin
