// The nfa plugin's entry points: one engine, "nfa", whose factory compiles a
// query into a Plan (shared by nothing else) and wraps it in an NfaDetector.

#include <memory>

#include "bus/core/plugin/plugin_export.h"
#include "plugins/nfa/nfa_detector.h"
#include "plugins/nfa/nfa_plan.h"

namespace cepbus::plugins::nfa {
namespace {

// What applyOptions() in nfa_plan.cc accepts.
constexpr plugin::OptionInfo kOptions[] = {
    {"construction",
     "per_event|batched: build matches as each event arrives (default) or in "
     "batches of batch_period time units (P2's batched construction)"},
    {"batch_period", "N > 0: the batch length for construction=batched (default: WITHIN + 1)"},
};

void registerFactories(plugin::FactoryRegistrar& registrar) {
  registrar.add("nfa",
                std::make_unique<plugin::PlanDetectorFactory<NfaDetector, compilePlan>>(kOptions));
}

}  // namespace
}  // namespace cepbus::plugins::nfa

CEPBUS_DEFINE_PLUGIN("nfa", "1.0.0", cepbus::plugins::nfa::registerFactories)
