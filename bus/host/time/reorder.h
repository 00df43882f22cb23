#pragma once

// Timestamp order for detectors fed by sources that may deliver slightly out
// of order (several AMQP producers, merged files).
//
// With a maximum delay D, an event may arrive up to D time units behind the
// newest timestamp seen so far; it is held back and released once no
// acceptable later arrival can precede it, i.e. when its ts <= newest - D
// (the watermark). Events with equal ts keep their arrival order. An event
// more than D behind is late: its place in the order is already gone. A late
// event goes to the LateSink when there is one (it is not an error), else it
// is rejected with an error naming both timestamps. With D = 0 nothing is
// buffered and any event older than the newest one is late.
//
// After each call that moves the watermark, the inner detector hears it
// (Detector::onWatermark) once the events before it are released: every
// event with ts < watermark has then been handed over (one at the watermark
// may still come), so it is told that time has passed watermark - 1. A
// trailing negation's match is decided on it with no later event needed.
//
// Event time is the newest timestamp seen, unless the owner keeps it
// (EventTime::kOwner): then events do not move it and advanceTo() does (the
// bus's query, whose event time is the slowest of its live sources,
// source_clock.h). Held events may then span more than D (a fast source
// runs ahead of a slow one): those beyond D of the watermark wait in an
// ordered map until the watermark comes within D of them.
//
// This is the detection host's time handling (bus/host/detection/detection.h
// owns one per detector): D comes from the host option `max_delay=D` (or its
// synonym `slack=D`), which every engine takes and none sees.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/plugin/snapshot.h"
#include "bus/core/status.h"
#include "bus/host/time/time_buckets.h"

namespace cepbus::plugin {

// The host option that sets the maximum delay, and its older synonym, taken
// out of a query's options before the engine sees them.
inline constexpr std::string_view kMaxDelayOption = "max_delay";
inline constexpr std::string_view kSlackOption = "slack";

// The value of option `name`=`value` (one of the two above): a non-negative
// integer, else InvalidArgument "option NAME=VALUE: expected a non-negative
// integer".
Result<Timestamp> parseMaxDelay(std::string_view name, std::string_view value);

// Hears the events that arrive more than the maximum delay behind the newest
// timestamp: they reach no detector, and the owner decides where they go.
class LateSink {
 public:
  virtual ~LateSink() = default;
  // `event` came after an event at `newest`, more than the maximum delay
  // behind it.
  virtual void onLate(const EventPtr& event, Timestamp newest) = 0;
};

// What moves a reorder buffer's event time (see the file comment).
enum class EventTime : uint8_t {
  kNewestEvent,  // the newest ts pushed
  kOwner,        // advanceTo() alone
};

// Thread safety: none (one per detector). Storage is reused, so steady-state
// pushing allocates nothing (with EventTime::kOwner, an event more than D
// ahead of the watermark costs a map node).
class ReorderBuffer {
 public:
  explicit ReorderBuffer(Timestamp max_delay, EventTime time = EventTime::kNewestEvent);

  // Accepts `event` into the buffer or rejects it (InvalidArgument) when it is
  // too late.
  Status push(EventPtr event);
  // Moves the event time up to `event_time` (never down), making ready what
  // the watermark passes. Either mode takes it: with kNewestEvent it is as if
  // an event at `event_time` had come.
  void advanceTo(Timestamp event_time);
  // Whether an event at `ts` would be rejected now (push() and admit() say
  // why): more than the maximum delay behind the newest timestamp seen.
  bool isLate(Timestamp ts) const { return ts < watermark(); }
  // Only the lateness check of push(), recording `event` as seen: for D = 0,
  // where an accepted event can be released at once without buffering.
  Status admit(const Event& event);
  // admit() for the leading events of `events` that are in order, stopping
  // at the first late one (left unrecorded; admit() names it): how many were
  // admitted. Loads the events a few places ahead, as each is a separate
  // allocation.
  size_t admitInOrder(std::span<const EventPtr> events);
  // The next event safe to release in order, or nullptr when none is yet.
  EventPtr popReady();
  // Every event safe to release, in order, not yet popped: valid until the
  // buffer next changes. clearReady() lets go of them (the caller took
  // them), which a batch takes at once instead of popping one by one.
  std::span<const EventPtr> ready() const {
    return std::span<const EventPtr>(ready_).subspan(ready_head_);
  }
  void clearReady() {
    ready_.clear();
    ready_head_ = 0;
  }
  // The next buffered event regardless of the delay (end of stream), or nullptr.
  EventPtr popAny();

  Timestamp maxDelay() const { return max_delay_; }
  // The event time: the newest timestamp seen, or the owner's
  // (INT64_MIN before the first).
  Timestamp newest() const { return newest_; }
  bool ownerKeepsTime() const { return time_ == EventTime::kOwner; }
  // The newest timestamp seen minus the maximum delay (INT64_MIN before the
  // first event): an event before it is late, and every event up to it has
  // arrived that is not.
  Timestamp watermark() const { return newest_ == INT64_MIN ? INT64_MIN : newest_ - max_delay_; }
  size_t size() const { return ready_.size() - ready_head_ + held_.size() + far_.size(); }

  // The events held and the event time, between calls (nothing ready).
  void snapshot(SnapshotWriter& out) const;
  // Into a buffer of the same delay and time mode that has seen nothing.
  void restore(SnapshotReader& in);

 private:
  // Makes ready what the watermark `upto` passed, and moves into held_ what
  // came within D of it.
  void releaseTo(Timestamp upto);

  const Timestamp max_delay_;
  const EventTime time_;
  // Events after the watermark within D of it, by ts.
  TimeBuckets held_;
  // Events further ahead (only when the owner keeps time), by ts and then
  // arrival: each is later than every event in held_.
  std::multimap<Timestamp, EventPtr> far_;
  // Events up to the watermark, in order, from ready_head_ on; emptied
  // when all are popped.
  std::vector<EventPtr> ready_;
  size_t ready_head_ = 0;
  Timestamp released_upto_ = INT64_MIN;  // held_ holds nothing up to it
  Timestamp newest_ = INT64_MIN;
};

// A Detector decorator that feeds its inner detector in timestamp order
// through a ReorderBuffer. Owns the inner detector; not thread-safe. The late
// sink, when given, is the caller's, must outlive it, and is called inside
// onEvent() and onEvents().
class ReorderingDetector final : public Detector {
 public:
  ReorderingDetector(std::unique_ptr<Detector> inner, Timestamp max_delay, LateSink* late = nullptr,
                     EventTime time = EventTime::kNewestEvent);

  // Hands a late event to the late sink (or, without one, rejects it);
  // otherwise forwards every event now in order and returns the first error
  // the inner detector reported for them.
  Status onEvent(const EventPtr& event) override;
  // As onEvent() on each event (the inner detector sees the same events in
  // the same order, the late sink the same late ones), forwarding in
  // batches: with D = 0 the runs of in-order events between late ones, each
  // as one span; with a delay, everything the whole batch makes ready, as one
  // span. A late event goes to the late sink or is rejected, and the others
  // go through. The first error is returned: in span order with D = 0; with a
  // delay, lateness before the inner detector's errors (it sees the batch's
  // released events after all are pushed).
  Status onEvents(std::span<const EventPtr> events) override;
  // onEvents() except that the inner detector does not hear the time pass
  // (it hears it at the next call that moves it, or passHeldTime()): for a
  // host that stops in the middle of what one run hands over in one call (a
  // checkpoint), so that the detector sees the calls that one run makes.
  Status onEventsKeepingTime(std::span<const EventPtr> events);
  // Tells the inner detector the time passed that onEventsKeepingTime()
  // held back (nothing when none was).
  Status passHeldTime();
  // ReorderBuffer::advanceTo(), then forwards what it made ready and tells
  // the inner detector the time that passed: timers fire with no event.
  Status advanceTo(Timestamp event_time);
  // Releases every buffered event, lets time pass to the end
  // (onWatermark(kEndOfTime)), then flushes the inner detector.
  Status flush() override;
  // Flushes the inner detector and keeps what the delay holds back: for a
  // pause in the input, which is not the end of the stream (a later arrival
  // may still precede the held events; flush() would make it late).
  Status flushReleased() { return inner_->flush(); }
  // Whether `event` would be late now, without offering it.
  bool isLate(const Event& event) const { return buffer_.isLate(event.ts()); }
  // ReorderBuffer::watermark().
  Timestamp watermark() const { return buffer_.watermark(); }
  Timestamp maxDelay() const { return buffer_.maxDelay(); }
  // The timestamp of the newest event handed to the inner detector
  // (INT64_MIN before the first): every accepted event up to it has been.
  Timestamp released() const { return released_; }
  Result<std::string> exportModel(std::string_view format) const override {
    return inner_->exportModel(format);
  }
  // The inner detector's: events the delay holds back are no partial matches.
  std::optional<DetectorState> state() const override { return inner_->state(); }
  // The inner detector's version: the buffer's own state is the host's, in
  // a section of its own before the inner detector's.
  uint32_t snapshotVersion() const override { return inner_->snapshotVersion(); }
  Status snapshot(SnapshotWriter& out) const override;
  Status restore(SnapshotReader& in) override;

 private:
  // Hands `events` (in order) to the inner detector.
  Status forward(std::span<const EventPtr> events);
  Status forward(const EventPtr& event);
  // Tells the inner detector that time passed watermark - 1 when that moved
  // since it last heard; `first` keeps the first error.
  void passTime(Status& first);
  // A late event: to the late sink (OK), or rejected.
  Status late(const EventPtr& event);
  // push() of `event` into the buffer, a late one through late().
  Status offer(const EventPtr& event);
  // Forwards every event the buffer has ready, as one span.
  Status forwardReady();

  std::unique_ptr<Detector> inner_;
  ReorderBuffer buffer_;
  LateSink* const late_;
  Timestamp released_ = INT64_MIN;
  Timestamp passed_ = INT64_MIN;  // the last time told to the inner detector
};

}  // namespace cepbus::plugin
