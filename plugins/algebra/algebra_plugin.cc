// The algebra plugin's entry points: one engine, "algebra", whose factory
// compiles a query into a Plan (P1's decomposition into subexpressions) and
// wraps it in an AlgebraDetector; PARTITION BY runs one AlgebraDetector per
// partition (plugin::PartitionedDetector). STRATEGY strict_contiguity on a
// plain SEQ, and skip_till_next_match there when each element's steering
// predicates read that element alone, run in the detector itself
// (Plan::strict, Plan::next_match, runsNatively()); the other strategies
// than skip_till_any_match, and these two elsewhere, run through a
// StrategyFactory around it.

#include <memory>

#include "bus/core/plugin/plugin_export.h"
#include "bus/core/plugin/state_caps.h"
#include "bus/core/plugin/strategy.h"
#include "plugins/algebra/algebra_detector.h"
#include "plugins/algebra/algebra_plan.h"

namespace cepbus::plugins::algebra {
namespace {

using PlanFactory = plugin::PlanDetectorFactory<AlgebraDetector, compilePlan>;

std::unique_ptr<PlanFactory> planFactory() {
  return std::make_unique<PlanFactory>(plugin::kStateCapOptionInfo, contextNotices,
                                       PlanFactory::Partitions::kPerPartitionDetector);
}

// A query the detector runs natively (runsNatively()) goes to the plan
// factory under its own strategy; every other one, and every set of queries,
// through the StrategyFactory. Stateless beyond the two factories.
class StrategiesFactory final : public plugin::DetectorFactory {
 public:
  std::span<const plugin::OptionInfo> options() const override { return native_->options(); }
  std::vector<std::string> notices(const pattern::Query& query) const override {
    return selecting_.notices(query);
  }

  Result<std::unique_ptr<plugin::Detector>> create(const pattern::Query& query,
                                                   const plugin::DetectorOptions& options,
                                                   plugin::MatchSink& sink) const override {
    if (!runsNatively(query)) return selecting_.create(query, options, sink);
    // Refused where, and as, the StrategyFactory refuses it.
    if (auto defined = plugin::StrategySelector::create(query, "algebra"); !defined) {
      return defined.status();
    }
    pattern::Query q = query;
    if (Status s = contextForStrategy(q); !s) return s;
    return native_->create(q, options, sink);
  }

  Result<std::unique_ptr<plugin::Detector>> createMany(
      std::span<const plugin::NamedQuery> queries, const plugin::DetectorOptions& options,
      plugin::MultiMatchSink& sink) const override {
    return selecting_.createMany(queries, options, sink);
  }

 private:
  std::unique_ptr<PlanFactory> native_ = planFactory();
  plugin::StrategyFactory selecting_{"algebra", planFactory(), contextForStrategy};
};

void registerFactories(plugin::FactoryRegistrar& registrar) {
  registrar.add("algebra", std::make_unique<StrategiesFactory>());
}

}  // namespace
}  // namespace cepbus::plugins::algebra

CEPBUS_DEFINE_PLUGIN("algebra", "1.0.0", cepbus::plugins::algebra::registerFactories)
