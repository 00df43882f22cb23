#include "bus/host/detection/detector_recipe.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "bus/host/detection/edge_negation.h"
#include "bus/host/detection/output_control.h"

namespace cepbus::detection {

DetectorRecipe::DetectorRecipe(EngineRef engine, Queries queries, plugin::DetectorOptions options,
                               bool many, Timestamp max_delay)
    : engine_(std::move(engine)),
      queries_(std::move(queries)),
      options_(std::move(options)),
      many_(many || queries_->size() > 1),
      max_delay_(max_delay) {}

Result<std::unique_ptr<plugin::GuardedDetector>> DetectorRecipe::engineDetector(
    const EngineRef& engine, plugin::MatchSink& one, plugin::MultiMatchSink& many) const {
  auto make = [&](std::span<const plugin::NamedQuery> queries, plugin::MatchSink& one_sink,
                  plugin::MultiMatchSink& many_sink) {
    if (many_)
      return engine.plugin->createManyDetectors(engine.engine, queries, options_, many_sink);
    return engine.plugin->createDetector(engine.engine, queries.front().query, options_, one_sink);
  };
  return EdgeNegation::makeDetector(*queries_, make, one, many, many_);
}

Result<std::unique_ptr<OutputControl>> DetectorRecipe::outputControl(
    MadeDetector& made, plugin::MatchSink*& one, plugin::MultiMatchSink*& many) const {
  made.relay = std::make_unique<MemberRelay>();
  one = made.relay.get();
  many = made.relay.get();
  if (std::none_of(queries_->begin(), queries_->end(),
                   [](const plugin::NamedQuery& q) { return hasOutputControl(q.query); })) {
    return std::unique_ptr<OutputControl>();
  }
  auto control = OutputControl::create(*queries_, *made.relay);
  if (!control) return control.status();
  one = control->get();
  many = control->get();
  return control;
}

void DetectorRecipe::putBehind(std::unique_ptr<OutputControl> control, MadeDetector& made) {
  if (control == nullptr || made.detector == nullptr) return;
  made.output_control = control.get();
  made.detector = OutputControl::wrap(std::move(control), std::move(made.detector));
}

Result<MadeDetector> DetectorRecipe::make() const {
  if (onTrial()) {
    std::vector<EngineRef> accepted;
    return makeTrial(challengers_, accepted);
  }
  MadeDetector made;
  plugin::MatchSink* one = nullptr;
  plugin::MultiMatchSink* many = nullptr;
  auto control = outputControl(made, one, many);
  if (!control) return control.status();
  auto detector = engineDetector(engine_, *one, *many);
  if (!detector) return detector.status();
  made.detector = std::move(detector).value();
  putBehind(std::move(control).value(), made);
  return made;
}

Result<MadeDetector> DetectorRecipe::makeTrial(const std::vector<EngineRef>& challengers,
                                               std::vector<EngineRef>& accepted) const {
  MadeDetector made;
  plugin::MatchSink* one = nullptr;
  plugin::MultiMatchSink* many = nullptr;
  auto control = outputControl(made, one, many);
  if (!control) return control.status();
  auto trial = many_ ? std::make_unique<plugin::TrialDetector>(*many, limits_)
                     : std::make_unique<plugin::TrialDetector>(*one, limits_);
  auto maker = [this](const EngineRef& engine) {
    return
        [this, &engine](plugin::MatchSink& one,
                        plugin::MultiMatchSink& many) -> Result<std::unique_ptr<plugin::Detector>> {
          auto detector = engineDetector(engine, one, many);
          if (!detector) return detector.status();
          return std::unique_ptr<plugin::Detector>(std::move(detector).value());
        };
  };
  if (Status s = trial->addCandidate(engine_.engine, maker(engine_)); !s) return s;
  std::string against;
  for (const EngineRef& challenger : challengers) {
    if (!trial->addCandidate(challenger.engine, maker(challenger))) continue;
    accepted.push_back(challenger);
    against += (against.empty() ? "" : ", ") + challenger.engine;
  }
  if (accepted.empty()) return made;  // no trial: no detector
  made.trial = trial.get();
  // The candidates' own guards name the engine that throws; this one covers
  // the trial's forwarding of the matches it held.
  made.detector = std::make_unique<plugin::GuardedDetector>(
      "engine 'auto' detector (" + engine_.engine + ", " + against + ")", nullptr,
      std::move(trial));
  putBehind(std::move(control).value(), made);
  return made;
}

Result<std::optional<MadeDetector>> DetectorRecipe::putOnTrial(
    const std::vector<EngineRef>& challengers, plugin::TrialLimits limits) {
  limits_ = limits;
  std::vector<EngineRef> accepted;
  auto made = makeTrial(challengers, accepted);
  if (!made) return made.status();
  if (made->detector == nullptr) return std::optional<MadeDetector>();
  challengers_ = std::move(accepted);
  return std::optional<MadeDetector>(std::move(made).value());
}

std::string DetectorRecipe::describeTrial() const {
  if (!onTrial()) return "";
  std::string against;
  for (const EngineRef& challenger : challengers_) {
    against += (against.empty() ? "" : ", ") + challenger.engine;
  }
  char ms[32];
  std::snprintf(ms, sizeof ms, "%g", limits_.cpu_seconds * 1e3);
  return "trial against " + against + " over " + std::to_string(limits_.events) +
         " events after the first " + std::to_string(limits_.warmup_events) + ", or " + ms +
         " ms of CPU";
}

std::vector<std::string> DetectorRecipe::notices(size_t member) const {
  // An edge negation the engine leaves to the host runs under CONTEXT
  // unrestricted (edge_negation.h): the engine says how it reads that.
  const pattern::Query& query = (*queries_)[member].query;
  return engine_.plugin->notices(engine_.engine,
                                 hasEdgeNegation(query) ? withoutEdgeNegation(query) : query);
}

}  // namespace cepbus::detection
