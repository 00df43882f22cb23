// The algebra plugin's entry points: one engine, "algebra", whose factory
// compiles a query into a Plan (P1's decomposition into subexpressions) and
// wraps it in an AlgebraDetector; PARTITION BY runs one AlgebraDetector per
// partition (plugin::PartitionedDetector), and a StrategyFactory around it
// runs the strategies other than skip_till_any_match.

#include <memory>

#include "bus/core/plugin/plugin_export.h"
#include "bus/core/plugin/strategy.h"
#include "plugins/algebra/algebra_detector.h"
#include "plugins/algebra/algebra_plan.h"

namespace cepbus::plugins::algebra {
namespace {

void registerFactories(plugin::FactoryRegistrar& registrar) {
  using Factory = plugin::PlanDetectorFactory<AlgebraDetector, compilePlan>;
  registrar.add("algebra",
                std::make_unique<plugin::StrategyFactory>(
                    "algebra",
                    std::make_unique<Factory>(std::span<const plugin::OptionInfo>{}, contextNotices,
                                              Factory::Partitions::kPerPartitionDetector),
                    contextForStrategy));
}

}  // namespace
}  // namespace cepbus::plugins::algebra

CEPBUS_DEFINE_PLUGIN("algebra", "1.0.0", cepbus::plugins::algebra::registerFactories)
