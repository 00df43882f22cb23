// The algebra plugin's entry points: one engine, "algebra", whose factory
// compiles a query into a Plan (P1's decomposition into subexpressions) and
// wraps it in an AlgebraDetector.

#include <memory>

#include "bus/core/plugin/plugin_export.h"
#include "plugins/algebra/algebra_detector.h"
#include "plugins/algebra/algebra_plan.h"

namespace cepbus::plugins::algebra {
namespace {

// Stateless; safe to call from any thread.
class AlgebraDetectorFactory final : public plugin::DetectorFactory {
 public:
  Result<std::unique_ptr<plugin::Detector>> create(const pattern::Query& query,
                                                   const plugin::DetectorOptions& options,
                                                   plugin::MatchSink& sink) const override {
    auto plan = compilePlan(query, options);
    if (!plan) return plan.status();
    return std::unique_ptr<plugin::Detector>(std::make_unique<AlgebraDetector>(*plan, sink));
  }
};

void registerFactories(plugin::FactoryRegistrar& registrar) {
  registrar.add("algebra", std::make_unique<AlgebraDetectorFactory>());
}

}  // namespace
}  // namespace cepbus::plugins::algebra

CEPBUS_DEFINE_PLUGIN("algebra", "1.0.0", cepbus::plugins::algebra::registerFactories)
