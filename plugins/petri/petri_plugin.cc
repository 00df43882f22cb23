// The petri plugin's entry points: one engine, "petri", whose detectors each
// run one query in a PetriNet of its own (sharing between patterns happens
// inside one PetriNet holding many of them; see petri_net.h).

#include <memory>

#include "bus/core/plugin/plugin_export.h"
#include "plugins/petri/petri_net.h"

namespace cepbus::plugins::petri {
namespace {

// A net holding the detector's one query. Every match is reported as soon as
// its last event arrives, so flush() has nothing left to report.
class PetriDetector final : public plugin::Detector {
 public:
  PetriDetector(CompiledPatternPtr pattern, plugin::MatchSink& sink)
      : status_(net_.addPattern("query", std::move(pattern), sink)) {}

  Status onEvent(const EventPtr& event) override {
    if (!status_) return status_;
    return net_.onEvent(event);
  }
  Status flush() override { return status_; }

 private:
  PetriNet net_;
  const Status status_;  // of adding the query; an empty net takes any compiled query
};

void registerFactories(plugin::FactoryRegistrar& registrar) {
  registrar.add("petri",
                std::make_unique<plugin::PlanDetectorFactory<PetriDetector, compilePattern>>());
}

}  // namespace
}  // namespace cepbus::plugins::petri

CEPBUS_DEFINE_PLUGIN("petri", "1.0.0", cepbus::plugins::petri::registerFactories)
