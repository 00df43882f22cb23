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
     "batched|per_event: build matches in batches of batch_period time units (P2's batched "
     "construction; the default) or as each event arrives"},
    {"batch_period",
     "N > 0: the batch length of construction=batched, in time units (default: the WITHIN "
     "span + 1, or 1024 for a query without WITHIN)"},
    {"max_partition_partial_matches",
     "N > 0: the stack entries one partition may hold (default 1000000)"},
    {"max_partial_matches", "N > 0: the stack entries all partitions may hold (default 10000000)"},
    {"state_policy",
     "drop_oldest|refuse_new: at a cap, drop the partition's oldest entries (over the total cap: "
     "shed the least recently active partitions; the default), or take no entry that would not "
     "complete a match"},
};

void registerFactories(plugin::FactoryRegistrar& registrar) {
  registrar.add("nfa",
                std::make_unique<plugin::PlanDetectorFactory<NfaDetector, compilePlan>>(kOptions));
}

}  // namespace
}  // namespace cepbus::plugins::nfa

CEPBUS_DEFINE_PLUGIN("nfa", "1.0.0", cepbus::plugins::nfa::registerFactories)
