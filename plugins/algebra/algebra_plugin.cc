// The algebra plugin's entry points: one engine, "algebra", whose factory
// compiles a query into a Plan (P1's decomposition into subexpressions) and
// wraps it in an AlgebraDetector; a StrategyFactory around it runs the
// strategies other than skip_till_any_match.

#include <memory>

#include "bus/core/plugin/plugin_export.h"
#include "bus/core/plugin/strategy.h"
#include "plugins/algebra/algebra_detector.h"
#include "plugins/algebra/algebra_plan.h"

namespace cepbus::plugins::algebra {
namespace {

void registerFactories(plugin::FactoryRegistrar& registrar) {
  registrar.add("algebra",
                std::make_unique<plugin::StrategyFactory>(
                    "algebra",
                    std::make_unique<plugin::PlanDetectorFactory<AlgebraDetector, compilePlan>>(
                        std::span<const plugin::OptionInfo>{}, contextNotices),
                    contextForStrategy));
}

}  // namespace
}  // namespace cepbus::plugins::algebra

CEPBUS_DEFINE_PLUGIN("algebra", "1.0.0", cepbus::plugins::algebra::registerFactories)
