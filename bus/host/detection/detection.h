#pragma once

// Detection: one detector running the queries of a detection group
// (planner.h), as every host runs it — the CEP service behind its stage, the
// cluster node per partition, `cepbus match` and `cepbus join` over a file.
//
// Thread safety: the event path — onEvents(), onEvent(), flush(),
// flushReleased() — and mute() and exportModel() are called by one thread at
// a time (the host serializes them: a detector is single-threaded); the sink
// is called on that thread, inside those calls. stats(), matches(),
// engine() and trialOutcome() may be called from any thread at any time.
// Ownership: owns its detector (which keeps its plugins loaded), its time
// handling and its counters; the sink is the host's and must outlive it.
//
//   events --> time handling (max_delay: reorder.h) --> guarded detector (or
//     engine auto's trial between two) --match of member i--> sink
//                 \--late event--> sink
//
// Time. The host option max_delay=D (or its synonym slack=D;
// DetectorRecipe::maxDelay()) puts the events in timestamp order within D
// time units before the detector sees them. An event more than D behind the
// newest one is late: it reaches no detector, is counted, and goes to the
// sink's onLate() (it is no error). The watermark — the newest timestamp
// minus D — is the time up to which every event that is not late has
// arrived. flush() is the end of the stream: what the delay holds back goes
// to the detector, which then reports every match still pending.
// flushReleased() is a pause: the detector reports what it holds for the
// events released so far, and what the delay holds stays held (a later
// arrival may still precede it). A host that knows its sources keeps the
// event time itself (plugin::EventTime::kOwner, the bus's CEP service with
// its source clock): events then move no time, advanceTo() does, and the
// watermark is that time minus D.
//
// Members. The detector's matches of query i of the group go to the sink as
// member i. mute(i) stops them (a removed query whose pattern must keep
// running for the others); flushReleased() before it hands the member what
// is pending for it.
//
// Counters. Every event offered counts as consumed, refused or late ones
// included; late ones count as late too. A call that fails (an event
// refused or thrown on — the first error of a batch stands for the batch —
// or a failed flush) counts one error. Each member's matches are counted as they go to the sink. An
// engine that counts its partial matches (plugin::Detector::state()) is
// sampled after each call. Matches a member's output control (EMIT, AFTER
// MATCH: output_control.h) suppresses are counted apart, as suppressed.
//
// Engine auto's trial (trial_detector.h): during it the prior's matches go
// to the sink, and onTrialDecided() hears which engine was kept.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"
#include "bus/host/detection/detector_recipe.h"
#include "bus/host/detection/trial_detector.h"
#include "bus/host/time/reorder.h"

namespace cepbus::detection {

struct DetectionGroup;

// What a host hears from its detection, on the detection's thread.
class DetectionSink : public MemberSink {
 public:
  // Engine auto's trial decided; once, before the kept engine's matches.
  virtual void onTrialDecided(const plugin::TrialOutcome& /*outcome*/) {}
  // `event` came more than the maximum delay behind an event at `newest`:
  // no member sees it. The detection has counted it (DetectionStats::late);
  // a host that keeps late events (a file, a late address) takes it here.
  virtual void onLate(const EventPtr& /*event*/, Timestamp /*newest*/) {}
};

// A detection's counters, as of the last call into it (see the file comment).
struct DetectionStats {
  uint64_t consumed = 0;
  uint64_t errors = 0;
  uint64_t late = 0;  // of consumed: more than the maximum delay behind
  // The newest timestamp offered minus the maximum delay; INT64_MIN before
  // the first event.
  Timestamp watermark = INT64_MIN;
  // nullopt when the engine does not count.
  std::optional<plugin::DetectorState> partial_matches;
  // Matches the members' output control (EMIT, AFTER MATCH) kept from the
  // sink; not among the members' matches().
  uint64_t suppressed = 0;
};

class Detection final : private MemberSink, private plugin::LateSink {
 public:
  // A detection of `group`: it takes the detector the planner made for the
  // group when there is one still, else makes one from the group's recipe
  // (an error when the engine refuses now). Its matches go to `sink`. Not
  // concurrently for one group (the first takes what the planner made).
  // `time` says what moves its event time (see Time above).
  static Result<std::unique_ptr<Detection>> create(
      DetectionGroup& group, DetectionSink& sink,
      plugin::EventTime time = plugin::EventTime::kNewestEvent);
  // A detection of a new detector from `recipe` (the recipe's engine and
  // queries, one member each): for a host that makes one per partition or
  // per stream. Any thread may call it (DetectorRecipe::make() is
  // thread-safe); the detection does not keep `recipe`.
  static Result<std::unique_ptr<Detection>> create(const DetectorRecipe& recipe,
                                                   DetectionSink& sink);
  ~Detection() override;
  Detection(const Detection&) = delete;
  Detection& operator=(const Detection&) = delete;

  // Offers `events` in order; the first error of the batch (see
  // plugin::ReorderingDetector::onEvents for which comes first), or OK. Late
  // events are no error: they go to the sink's onLate().
  Status onEvents(std::span<const EventPtr> events);
  Status onEvent(const EventPtr& event);
  // plugin::ReorderingDetector::onEventsKeepingTime() and passHeldTime():
  // a checkpoint in the middle of a batch of one run (checkpoint.h).
  Status onEventsKeepingTime(std::span<const EventPtr> events);
  Status passHeldTime() { return counted(ordered_->passHeldTime()); }
  // End of the stream; more events may follow (a new stream).
  Status flush();
  // A pause in the input.
  Status flushReleased();
  // Moves the event time up to `event_time` (plugin::ReorderingDetector::
  // advanceTo): what it makes ready goes to the detector, and the detector
  // hears the time that passed.
  Status advanceTo(Timestamp event_time);
  // Whether `event` would be late now (beyond the maximum delay), without
  // offering it.
  bool isLate(const Event& event) const { return ordered_->isLate(event); }
  // The maximum delay D (DetectorRecipe::maxDelay()).
  Timestamp maxDelay() const { return ordered_->maxDelay(); }
  // The timestamp of the newest event handed to the detector (INT64_MIN
  // before the first): every accepted event up to it has been.
  Timestamp released() const { return ordered_->released(); }

  // Drops member `member`'s matches from now on.
  void mute(size_t member);
  // Whether mute(`member`) was called; on the event path's thread.
  bool muted(size_t member) const { return muted_[member]; }
  // The detector's model (plugin::Detector::exportModel): the running
  // engine's.
  Result<std::string> exportModel(std::string_view format) const;

  // Snapshots of the whole detection (checkpoint.h): the time handling's
  // state, then the detector's (plugin::Detector::snapshot()). The
  // version is the engine's, 0 when the detector, or a host stage in front
  // of it, does not snapshot. Counters are not part of the state.
  uint32_t snapshotVersion() const { return ordered_->snapshotVersion(); }
  Status snapshot(plugin::SnapshotWriter& out) const { return ordered_->snapshot(out); }
  // Into a detection just made for the same group, before any event.
  Status restore(plugin::SnapshotReader& in) { return counted(ordered_->restore(in)); }

  size_t members() const { return members_; }
  DetectionStats stats() const;
  // Member `member`'s matches so far.
  uint64_t matches(size_t member) const;
  // Member `member`'s matches its output control suppressed so far.
  uint64_t suppressed(size_t member) const;
  // The engine whose matches are the output: during engine auto's trial
  // the prior, after it the one kept.
  std::string engine() const;
  bool onTrial() const { return trial_ != nullptr; }
  // Engine auto's trial outcome once it has decided.
  std::optional<plugin::TrialOutcome> trialOutcome() const;

 private:
  Detection(MadeDetector made, Timestamp max_delay, plugin::EventTime time, std::string engine,
            size_t members, DetectionSink& sink);
  void onMatch(size_t member, const plugin::Match& match) override;
  void onLate(const EventPtr& event, Timestamp newest) override;
  // Counts `status` as an error when it is one, samples the detector's
  // state and the watermark, and returns it.
  Status counted(Status status);

  DetectionSink& sink_;
  const std::string engine_;
  const size_t members_;
  std::unique_ptr<MemberRelay> relay_;  // declared before ordered_: outlives the detector
  std::unique_ptr<plugin::ReorderingDetector> ordered_;
  const plugin::TrialDetector* trial_;   // in ordered_ under engine auto's trial, else null
  const OutputControl* output_control_;  // in ordered_ when a member asks for it, else null
  const bool counts_partials_;           // the engine's state() is not nullopt
  std::unique_ptr<bool[]> muted_;
  std::unique_ptr<std::atomic<uint64_t>[]> matches_;
  std::atomic<uint64_t> consumed_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> late_{0};
  std::atomic<Timestamp> watermark_{INT64_MIN};
  std::atomic<uint64_t> partials_{0};
  std::atomic<uint64_t> peak_partials_{0};
  std::atomic<uint64_t> evicted_{0};
  std::atomic<uint64_t> state_bytes_{0};
};

}  // namespace cepbus::detection
