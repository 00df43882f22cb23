#include "services/amqp/listener/route_pressure.h"

#include "flows/reliable_flow.h"
#include "flows/seda_flow.h"

namespace cepbus::services::amqp {

bool journaledRoute(const router::DeliveryPolicy& policy, Symbol address) {
  auto decision = policy.decide(address.name(), flows::Qos::kReliable);
  return decision && decision->qos == flows::Qos::kReliable &&
         dynamic_cast<const flows::ReliableFlow*>(decision->flow) != nullptr;
}

bool stagesSaturated(const router::DeliveryPolicy& policy,
                     const std::vector<std::string>& targets) {
  if (targets.empty()) return false;
  for (const auto& flow : policy.flows()) {
    std::vector<stages::StageMetricsSnapshot> stages;
    if (auto* seda = dynamic_cast<const flows::SedaFlow*>(flow.get())) {
      stages = seda->stageMetrics();
    } else if (auto* reliable = dynamic_cast<const flows::ReliableFlow*>(flow.get())) {
      stages = reliable->stageMetrics();
    }
    for (const auto& stage : stages) {
      if (stage.pressure != stages::Pressure::kSaturated) continue;
      for (const auto& t : targets) {
        if (stage.name == flow->name() + "/" + t) return true;
      }
    }
  }
  return false;
}

}  // namespace cepbus::services::amqp
