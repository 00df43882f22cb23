#pragma once

// Timestamp order for detectors fed by sources that may deliver slightly out
// of order (several AMQP producers, merged files).
//
// With slack N, an event may arrive up to N time units behind the newest
// timestamp seen so far; it is held back and released once no acceptable later
// arrival can precede it, i.e. when its ts <= newest - N. Events with equal ts
// keep their arrival order. An event more than N behind is rejected with an
// error naming both timestamps: its place in the order is already gone. With
// slack 0 nothing is buffered and any event older than the newest one is
// rejected.
//
// This is the detection host's time handling (bus/host/detection/detection.h
// owns one per detector): the slack comes from the host option `slack=N`,
// which every engine takes and none sees.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"

namespace cepbus::plugin {

// The host option that sets the slack, taken out of a query's options
// before the engine sees them.
inline constexpr std::string_view kSlackOption = "slack";

// The value of option slack=`value`: a non-negative integer, else
// InvalidArgument "option slack=VALUE: expected a non-negative integer".
Result<Timestamp> parseSlack(std::string_view value);

// Thread safety: none (one per detector). The heap's storage is reused, so
// steady-state pushing allocates nothing.
class ReorderBuffer {
 public:
  explicit ReorderBuffer(Timestamp slack);

  // Accepts `event` into the buffer or rejects it (InvalidArgument) when it is
  // too late.
  Status push(EventPtr event);
  // Whether an event at `ts` would be rejected now (push() and admit() say
  // why): more than the slack behind the newest timestamp seen.
  bool isLate(Timestamp ts) const { return newest_ != INT64_MIN && ts < newest_ - slack_; }
  // Only the lateness check of push(), recording `event` as seen: for slack 0,
  // where an accepted event can be released at once without buffering.
  Status admit(const Event& event);
  // admit() for the leading events of `events` that are in order, stopping
  // at the first late one (left unrecorded; admit() names it): how many were
  // admitted. Loads the events a few places ahead, as each is a separate
  // allocation.
  size_t admitInOrder(std::span<const EventPtr> events);
  // The next event safe to release in order, or nullptr when none is yet.
  EventPtr popReady();
  // The next buffered event regardless of the slack (end of stream), or nullptr.
  EventPtr popAny();

  Timestamp slack() const { return slack_; }
  size_t size() const { return heap_.size(); }

 private:
  struct Item {
    Timestamp ts;
    uint64_t seq;
    EventPtr event;
  };
  EventPtr popTop();

  const Timestamp slack_;
  std::vector<Item> heap_;
  uint64_t next_seq_ = 0;
  Timestamp newest_ = INT64_MIN;
};

// A Detector decorator that feeds its inner detector in timestamp order
// through a ReorderBuffer. Owns the inner detector; not thread-safe.
class ReorderingDetector final : public Detector {
 public:
  ReorderingDetector(std::unique_ptr<Detector> inner, Timestamp slack);

  // Rejects a late event; otherwise forwards every event now in order and
  // returns the first error the inner detector reported for them.
  Status onEvent(const EventPtr& event) override;
  // As onEvent() on each event (the inner detector sees the same events in
  // the same order), forwarding in batches: with slack 0 the runs of
  // in-order events between late ones, each as one span; with a slack,
  // everything the whole batch makes ready, as one span. A late event is
  // rejected and the others go through. The first error is returned: in span
  // order with slack 0; with a slack, lateness before the inner detector's
  // errors (it sees the batch's released events after all are pushed).
  Status onEvents(std::span<const EventPtr> events) override;
  // Releases every buffered event, then flushes the inner detector.
  Status flush() override;
  // Flushes the inner detector and keeps what the slack holds back: for a
  // pause in the input, which is not the end of the stream (a later arrival
  // may still precede the held events; flush() would make it late).
  Status flushReleased() { return inner_->flush(); }
  // Whether `event` would be rejected as late now, without offering it.
  bool isLate(const Event& event) const { return buffer_.isLate(event.ts()); }
  // The timestamp of the newest event handed to the inner detector
  // (INT64_MIN before the first): every accepted event up to it has been.
  Timestamp released() const { return released_; }
  Result<std::string> exportModel(std::string_view format) const override {
    return inner_->exportModel(format);
  }
  // The inner detector's: events the slack holds back are no partial matches.
  std::optional<DetectorState> state() const override { return inner_->state(); }

 private:
  // Hands `events` (in order) to the inner detector.
  Status forward(std::span<const EventPtr> events);
  Status forward(const EventPtr& event);

  std::unique_ptr<Detector> inner_;
  ReorderBuffer buffer_;
  std::vector<EventPtr> ready_;  // onEvents() with slack: reused, empty between calls
  Timestamp released_ = INT64_MIN;
};

}  // namespace cepbus::plugin
