// The join plugin's entry points: one engine, "join", P4's parallel join of
// uncertain streams (join_detector.h), configured by its query and options
// (join_plan.h).

#include <memory>

#include "bus/core/plugin/plugin_export.h"
#include "plugins/join/join_detector.h"
#include "plugins/join/join_plan.h"

namespace cepbus::plugins::join {
namespace {

// Stateless; create() is safe to call from any thread.
class JoinDetectorFactory final : public plugin::DetectorFactory {
 public:
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
