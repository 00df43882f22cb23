#pragma once

// NOT(...) at the start or the end of a SEQ on every pattern engine. An
// engine that runs it natively (the nfa) gets the query as written; for one
// that refuses the query, and runs it once the host takes its edge NOT
// elements and the WHERE conjuncts that mention them out, the host runs the
// rest: the engine's detector runs the pattern without them and an
// EdgeNegation in front of its sink checks each match's absence
// (absence_rule.h), so that every engine reports exactly the nfa's matches.
// The host learns that an engine lacks edge negation from its refusal of the
// full query, not from its name.
//
// An EdgeNegation is the sink of the engine's detector (one query or
// several) and a detector around it: it shows every event to the rules
// before the engine (they keep the negated events), forwards time, and
// flushes the engine where no ts is cut in two (when the watermark passes
// every event offered, and at least once per WITHIN of event time) so that
// the rules can drop what no later match can need.
//
// Thread safety: a detector, driven by one thread at a time. Ownership: owns
// the engine's detector (given by wrap()) and the rules; the sinks are the
// caller's and outlive it.

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"
#include "bus/host/detection/absence_rule.h"
#include "bus/host/loader/guarded_detector.h"

namespace cepbus::detection {

// Whether `query` is a SEQ with a NOT before its first or after its last
// positive element.
bool hasEdgeNegation(const pattern::Query& query);

// `query` without its edge NOT elements, their variables and the WHERE
// conjuncts that mention them; CONTEXT unrestricted when it had none (the
// host checks absence on every match the engine selects). `query` itself
// when it has no edge negation.
pattern::Query withoutEdgeNegation(const pattern::Query& query);

// Makes an engine's detector for `queries`: one query reporting to `one`, or
// several (createMany) reporting to `many`.
using MakeEngineDetector = std::function<Result<std::unique_ptr<plugin::GuardedDetector>>(
    std::span<const plugin::NamedQuery> queries, plugin::MatchSink& one,
    plugin::MultiMatchSink& many)>;

class EdgeNegation final : public plugin::Detector,
                           public plugin::MatchSink,
                           public plugin::MultiMatchSink {
 public:
  // The engine's detector for `queries` from `make`: as written when the
  // engine accepts them; else, when one has an edge negation, the engine's
  // for the queries without it behind an EdgeNegation reporting to `one`
  // (when `many` is false) or `many`. The engine's refusal when it refuses
  // both; the host's when it cannot run a query's edge negation itself.
  static Result<std::unique_ptr<plugin::GuardedDetector>> makeDetector(
      std::span<const plugin::NamedQuery> queries, const MakeEngineDetector& make,
      plugin::MatchSink& one, plugin::MultiMatchSink& many, bool several);

  // The rules of `queries` (member i is queries[i]) in front of `one` or
  // `many`; an error names what the host cannot check (AbsenceRule::create).
  static Result<std::unique_ptr<EdgeNegation>> create(std::span<const plugin::NamedQuery> queries,
                                                      plugin::MatchSink& one,
                                                      plugin::MultiMatchSink& many, bool several);
  ~EdgeNegation() override;

  // The engine's detector, made with this as its sink, behind a guard of
  // its own: what the host drives.
  static std::unique_ptr<plugin::GuardedDetector> wrap(std::unique_ptr<EdgeNegation> negation,
                                                       std::unique_ptr<plugin::Detector> inner);

  void onMatch(const plugin::Match& match) override { onMatch(0, match); }
  void onMatch(size_t member, const plugin::Match& match) override;

  Status onEvent(const EventPtr& event) override;
  Status onEvents(std::span<const EventPtr> events) override;
  Status flush() override;
  Status onWatermark(Timestamp t) override;
  Result<std::string> exportModel(std::string_view format) const override;
  std::optional<plugin::DetectorState> state() const override;
  // Snapshots: section "edge negation" (its clock and each rule's negated
  // events and held matches), then the engine's; the version is the
  // engine's.
  uint32_t snapshotVersion() const override { return inner_->snapshotVersion(); }
  Status snapshot(plugin::SnapshotWriter& out) const override;
  Status restore(plugin::SnapshotReader& in) override;

  // What the rules hold now: matches waiting for their trailing span, and
  // negated events kept (for tests and monitoring).
  size_t held() const;
  size_t kept() const;

 private:
  // Where a member's kept matches go.
  class MemberOutput final : public plugin::MatchSink {
   public:
    MemberOutput(EdgeNegation& owner, size_t member) : owner_(owner), member_(member) {}
    void onMatch(const plugin::Match& match) override;

   private:
    EdgeNegation& owner_;
    const size_t member_;
  };
  struct Member {
    std::unique_ptr<MemberOutput> output;
    std::unique_ptr<AbsenceRule> rule;   // null for a query without edge negation
    plugin::MatchSink* entry = nullptr;  // the rule, or the output
  };

  EdgeNegation(plugin::MatchSink& one, plugin::MultiMatchSink& many, bool several)
      : one_(one), many_(many), several_(several) {}
  // Before the engine is offered events from `ts` on.
  Status beforeOffering(Timestamp ts);
  // The engine flushed with every event up to newest_ offered: the rules
  // drop what no later match can need.
  Status flushAndForget();

  plugin::MatchSink& one_;
  plugin::MultiMatchSink& many_;
  const bool several_;
  std::vector<Member> members_;
  Timestamp window_ = 0;               // the largest WITHIN of a rule
  Timestamp newest_ = INT64_MIN;       // the greatest ts offered
  Timestamp reported_to_ = INT64_MIN;  // every match ending by it has been reported
  bool ended_ = false;                 // time passed to its end
  // Declared last: destroyed first, while the rules it reports to live.
  std::unique_ptr<plugin::Detector> inner_;
};

}  // namespace cepbus::detection
