// The window plugin's entry points: one engine, "window", which runs window
// queries (FROM Type t ... WINDOW ...; docs/pattern-language.md, "Windows")
// and refuses patterns. engine="auto" picks it for every window query.

#include <memory>

#include "bus/core/plugin/plugin_export.h"
#include "plugins/window/window_detector.h"
#include "plugins/window/window_plan.h"

namespace cepbus::plugins::window {
namespace {

// What applyOptions() in window_plan.cc accepts.
constexpr plugin::OptionInfo kOptions[] = {
    {"max_groups",
     "N >= 1: the groups a query keeps open at once (default 100000); events of further "
     "groups are refused and counted"},
};

void registerFactories(plugin::FactoryRegistrar& registrar) {
  registrar.add(
      "window",
      std::make_unique<plugin::PlanDetectorFactory<WindowDetector, compilePlan>>(kOptions));
}

}  // namespace
}  // namespace cepbus::plugins::window

CEPBUS_DEFINE_PLUGIN("window", "1.0.0", cepbus::plugins::window::registerFactories)
