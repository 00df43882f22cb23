#pragma once

// How the detection host makes a detector: the one place where a plugin's
// factory is asked for one (Plugin::createDetector, createManyDetectors) and
// where engine auto's trial between engines is put together.
//
// A DetectorRecipe is what the planner (planner.h) decided for a group of
// queries: the engine and the plugin that provides it, the queries, the
// options the engine takes, and for engine auto the engines on trial against
// it. make() builds a new detector from it each time a host needs one (the
// cluster node makes one per partition, and again after an end of stream).
// What make() returns is the engine's detector (or the trial's) behind the
// host's exception guard — behind the host's edge negation (edge_negation.h)
// for an engine that leaves NOT at an edge of a pattern to it — and, when a query asks for EMIT or
// AFTER MATCH, behind the output control of output_control.h — with the relay it reports to; the
// detection (detection.h) puts its time handling in front and attaches its members' sink to the
// relay.
//
// Thread safety: a recipe is immutable once planned and make() may be called
// from any thread (plugin factories are thread-safe). What make() returns is
// driven by one thread at a time. Ownership: a recipe keeps its plugins
// loaded, and so does every detector it made.

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"
#include "bus/host/detection/trial_detector.h"
#include "bus/host/loader/guarded_detector.h"
#include "bus/host/loader/plugin_loader.h"

namespace cepbus::detection {

// Where a detector's matches go: `member` is the query's index in its group.
class MemberSink {
 public:
  virtual ~MemberSink() = default;
  virtual void onMatch(size_t member, const plugin::Match& match) = 0;
};

// What an engine's detector reports to (its MatchSink for one query, its
// MultiMatchSink for several), forwarding each match by member to the sink
// attached; a match before one is attached goes nowhere.
class MemberRelay final : public plugin::MatchSink, public plugin::MultiMatchSink {
 public:
  // Before the detector's first event.
  void attach(MemberSink& sink) { sink_ = &sink; }
  void onMatch(const plugin::Match& match) override {
    if (sink_ != nullptr) sink_->onMatch(0, match);
  }
  void onMatch(size_t member, const plugin::Match& match) override {
    if (sink_ != nullptr) sink_->onMatch(member, match);
  }

 private:
  MemberSink* sink_ = nullptr;
};

class OutputControl;

// A detector made by a recipe. `relay` must outlive `detector`, which
// reports to it.
struct MadeDetector {
  std::unique_ptr<MemberRelay> relay;
  std::unique_ptr<plugin::GuardedDetector> detector;
  plugin::TrialDetector* trial = nullptr;  // inside `detector` when engine auto is on trial
  // Inside `detector` when a query asks for output control (output_control.h).
  const OutputControl* output_control = nullptr;
};

// An engine and the plugin that provides it.
struct EngineRef {
  plugin::PluginPtr plugin;
  std::string engine;
};

class DetectorRecipe {
 public:
  using Queries = std::shared_ptr<const std::vector<plugin::NamedQuery>>;

  // `engine` running `queries` with `options` (the engine's alone: the host's
  // are taken out), through DetectorFactory::create() for one query and
  // createMany() for several, or always createMany() when `many` (queries
  // known by name, as `cepbus match --patterns` labels them). `max_delay` is
  // the host's time handling of the detector (reorder.h).
  DetectorRecipe(EngineRef engine, Queries queries, plugin::DetectorOptions options, bool many,
                 Timestamp max_delay);

  // A new detector: the engine's, or with challengers the trial.
  Result<MadeDetector> make() const;

  // Puts the engine on trial against `challengers` (engine auto; see
  // trial_detector.h) and makes the trial's detector: the engine's error when
  // it refuses the queries; the challengers that refuse are left out, and
  // when every one does there is no trial (nullopt) and the recipe makes the
  // engine's detector alone. The challengers kept go on trial in every later
  // make().
  Result<std::optional<MadeDetector>> putOnTrial(const std::vector<EngineRef>& challengers,
                                                 plugin::TrialLimits limits);

  const std::string& engine() const { return engine_.engine; }
  const plugin::PluginPtr& plugin() const { return engine_.plugin; }
  size_t queries() const { return queries_->size(); }
  Timestamp maxDelay() const { return max_delay_; }
  bool onTrial() const { return !challengers_.empty(); }
  // For engine auto's reason: "trial against nfa over 4096 events after the
  // first 256, or 10 ms of CPU"; empty without a trial.
  std::string describeTrial() const;
  // What the engine says about how it reads query `member` (its notices).
  std::vector<std::string> notices(size_t member) const;

 private:
  // The output control of the queries in front of `made`'s relay (null when
  // no query asks for it); `one` and `many` are then it, else the relay.
  Result<std::unique_ptr<OutputControl>> outputControl(MadeDetector& made, plugin::MatchSink*& one,
                                                       plugin::MultiMatchSink*& many) const;
  // `made.detector` behind `control` when there is one.
  static void putBehind(std::unique_ptr<OutputControl> control, MadeDetector& made);
  // The detector of `engine` for the queries, reporting to `one` (create())
  // or `many` (createMany()).
  Result<std::unique_ptr<plugin::GuardedDetector>> engineDetector(
      const EngineRef& engine, plugin::MatchSink& one, plugin::MultiMatchSink& many) const;
  // The trial of engine_ against `challengers`; those that accept go to
  // `accepted`. No trial (a null detector) when none does.
  Result<MadeDetector> makeTrial(const std::vector<EngineRef>& challengers,
                                 std::vector<EngineRef>& accepted) const;

  EngineRef engine_;
  Queries queries_;
  plugin::DetectorOptions options_;
  bool many_;
  Timestamp max_delay_;
  std::vector<EngineRef> challengers_;  // on trial against engine_ (engine auto)
  plugin::TrialLimits limits_;
};

}  // namespace cepbus::detection
