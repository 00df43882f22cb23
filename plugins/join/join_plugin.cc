// The join plugin's entry points: one engine, "join", P4's parallel join of
// uncertain streams (join_detector.h), configured by its query and options
// (join_plan.h).

#include <memory>
#include <span>

#include "bus/core/plugin/plugin_export.h"
#include "plugins/join/join_detector.h"
#include "plugins/join/join_plan.h"

namespace cepbus::plugins::join {
namespace {

// What compileJoin() accepts (join_plan.h says how they combine).
constexpr plugin::OptionInfo kOptions[] = {
    {"time_matrix", "CSV: the travel-time matrix between sites (with site=)"},
    {"site", "ATTR: the attribute naming an event's site"},
    {"threshold", "P in [0,1]: the least probability of a reported pair"},
    {"window", "N > 0: the join window (default: WITHIN, else the matrix's largest entry)"},
    {"workers", "N in [1,64]: parallel join partitions"},
    {"expiry", "on_insert|batch: when expired readings leave the window"},
    {"deletion_interval", "N > 0: time units between batch expiries"},
    {"index_slots", "N: hash slots of each partition's index"},
    {"batch", "N in [1,65536]: events handed to the workers at once"},
    {"spill", "none|window_half|less_than_probability: what leaves memory over the budget"},
    {"memory_budget", "BYTES: the window's memory before spilling"},
    {"spill_dir", "DIR: where spilled readings go"},
    {"spill_probability", "P: the probability bound of spill=less_than_probability"},
    {"spill_m", "M > 0: the spill policy's M"},
};

// Stateless; create() is safe to call from any thread.
class JoinDetectorFactory final : public plugin::DetectorFactory {
 public:
  std::span<const plugin::OptionInfo> options() const override { return kOptions; }

  Result<std::unique_ptr<plugin::Detector>> create(const pattern::Query& query,
                                                   const plugin::DetectorOptions& options,
                                                   plugin::MatchSink& sink) const override {
    try {
      auto plan = compileJoin(query, options);
      if (!plan) return plan.status();
      auto detector = JoinDetector::create(*plan, sink);
      if (!detector) return detector.status();
      return std::unique_ptr<plugin::Detector>(std::move(*detector));
    } catch (const std::exception& e) {
      // E.g. no thread could be started: no exception crosses the ABI.
      return Status::internal(std::string("join engine: ") + e.what());
    }
  }
};

void registerFactories(plugin::FactoryRegistrar& registrar) {
  registrar.add("join", std::make_unique<JoinDetectorFactory>());
}

}  // namespace
}  // namespace cepbus::plugins::join

CEPBUS_DEFINE_PLUGIN("join", "1.0.0", cepbus::plugins::join::registerFactories)
