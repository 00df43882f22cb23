#pragma once

// Output control of pattern queries (docs/pattern-language.md, "Output
// control"): EMIT FIRST|LAST EVERY d [PER k] and AFTER MATCH SKIP PAST LAST
// EVENT, built once in the host around any engine's detector, so that they
// mean the same on every engine.
//
// An OutputControl is the sink of the engine's detector (one query or
// several) and a detector around it: each query's matches go through the
// query's rules (output_rule.h) — SKIP PAST LAST EVENT first, then EMIT —
// and what they keep goes on to the relay the host reads. Event time reaches
// the rules through onWatermark(); after every call into the detector the
// rules let out what that time has decided (matches an engine reports late).
// The rules decide a match only once every match ending with or before it
// has been reported, and engines may hold a match past the watermark (until
// a later event, a batch's end, a flush). So the engine is flushed
// (Detector::flush()) just before it is offered an event of a later ts than
// every one before — all events of the earlier ts are in, none of the new
// one; a batch spanning several ts goes in one ts at a time — and the rules
// decide up to the smaller of the watermark and that ts - 1; when the
// watermark passes every event offered (time moving on with no event), after
// a flush, up to the watermark; at the end of time after a last flush. A trailing negation's
// matches are reported only when the watermark passes their WITHIN, and the
// rules wait that long for them. Under --max-delay batches, decisions lag by
// at most one batch.
//
// Thread safety: a detector, driven by one thread at a time; suppressed()
// may be read from any thread. Ownership: owns the engine's detector (given
// by wrap()) and the rules; the relay is the caller's and outlives it.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"
#include "bus/host/detection/detector_recipe.h"
#include "bus/host/detection/output_rule.h"
#include "bus/host/loader/guarded_detector.h"

namespace cepbus::detection {

// Whether `query` asks for output control.
bool hasOutputControl(const pattern::Query& query);

class OutputControl final : public plugin::Detector,
                            public plugin::MatchSink,
                            public plugin::MultiMatchSink {
 public:
  // The rules of each of `queries` (member i is queries[i]) in front of
  // `out`; an error names the query whose PER expression cannot be compiled.
  static Result<std::unique_ptr<OutputControl>> create(std::span<const plugin::NamedQuery> queries,
                                                       MemberRelay& out);
  ~OutputControl() override;

  // The engine's detector, made with this as its sink, behind a guard of
  // its own: what the host drives.
  static std::unique_ptr<plugin::GuardedDetector> wrap(std::unique_ptr<OutputControl> control,
                                                       std::unique_ptr<plugin::Detector> inner);

  // The engine's matches.
  void onMatch(const plugin::Match& match) override { onMatch(0, match); }
  void onMatch(size_t member, const plugin::Match& match) override;

  Status onEvent(const EventPtr& event) override;
  Status onEvents(std::span<const EventPtr> events) override;
  Status flush() override;
  Status onWatermark(Timestamp t) override;
  Result<std::string> exportModel(std::string_view format) const override;
  std::optional<plugin::DetectorState> state() const override;
  // Snapshots: section "output control" (its clock and each rule's held
  // matches and gates), then the engine's; the version is the engine's.
  uint32_t snapshotVersion() const override { return inner_->snapshotVersion(); }
  Status snapshot(plugin::SnapshotWriter& out) const override;
  Status restore(plugin::SnapshotReader& in) override;

  // The matches of member `member` its rules suppressed so far.
  uint64_t suppressed(size_t member) const;

 private:
  // Where a member's kept matches go: the relay, as member `member`.
  class MemberOutput final : public plugin::MatchSink {
   public:
    MemberOutput(MemberRelay& relay, size_t member) : relay_(relay), member_(member) {}
    void onMatch(const plugin::Match& match) override { relay_.onMatch(member_, match); }

   private:
    MemberRelay& relay_;
    const size_t member_;
  };
  struct Member {
    std::unique_ptr<MemberOutput> output;
    std::vector<std::unique_ptr<OutputRule>> rules;  // in the order matches go through
    plugin::MatchSink* entry = nullptr;              // the first rule, or the output
  };

  OutputControl() = default;
  // Before the engine is offered an event at `ts`: at a new ts, the flush
  // that lets the rules decide what ends before it.
  Status beforeOffering(Timestamp ts);
  // Lets every rule decide what event time so far has decided, in chain order.
  void settle();

  std::vector<Member> members_;
  Timestamp time_ = INT64_MIN;         // the last watermark
  Timestamp newest_ = INT64_MIN;       // the greatest ts offered to the engine
  Timestamp reported_to_ = INT64_MIN;  // every match ending by it has been reported
  // Declared last: destroyed first, while the rules it reports to live.
  std::unique_ptr<plugin::Detector> inner_;
};

}  // namespace cepbus::detection
