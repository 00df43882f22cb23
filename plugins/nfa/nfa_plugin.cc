// The nfa plugin's entry points: one engine, "nfa", whose factory compiles a
// query into a Plan (shared by nothing else) and wraps it in an NfaDetector.

#include <memory>

#include "bus/core/plugin/plugin_export.h"
#include "plugins/nfa/nfa_detector.h"
#include "plugins/nfa/nfa_plan.h"

namespace cepbus::plugins::nfa {
namespace {

void registerFactories(plugin::FactoryRegistrar& registrar) {
  registrar.add("nfa", std::make_unique<plugin::PlanDetectorFactory<NfaDetector, compilePlan>>());
}

}  // namespace
}  // namespace cepbus::plugins::nfa

CEPBUS_DEFINE_PLUGIN("nfa", "1.0.0", cepbus::plugins::nfa::registerFactories)
