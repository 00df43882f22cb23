// The nfa plugin's entry points: one engine, "nfa", whose factory compiles a
// query into a Plan (shared by nothing else) and wraps it in an NfaDetector.

#include <memory>

#include "bus/core/plugin/plugin_export.h"
#include "plugins/nfa/nfa_detector.h"
#include "plugins/nfa/nfa_plan.h"

namespace cepbus::plugins::nfa {
namespace {

// Stateless; safe to call from any thread.
class NfaDetectorFactory final : public plugin::DetectorFactory {
 public:
  Result<std::unique_ptr<plugin::Detector>> create(const pattern::Query& query,
                                                   const plugin::DetectorOptions& options,
                                                   plugin::MatchSink& sink) const override {
    auto plan = compilePlan(query, options);
    if (!plan) return plan.status();
    return std::unique_ptr<plugin::Detector>(std::make_unique<NfaDetector>(*plan, sink));
  }
};

void registerFactories(plugin::FactoryRegistrar& registrar) {
  registrar.add("nfa", std::make_unique<NfaDetectorFactory>());
}

}  // namespace
}  // namespace cepbus::plugins::nfa

CEPBUS_DEFINE_PLUGIN("nfa", "1.0.0", cepbus::plugins::nfa::registerFactories)
