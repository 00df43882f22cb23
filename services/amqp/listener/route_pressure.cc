#include "services/amqp/listener/route_pressure.h"

namespace cepbus::services::amqp {

bool journaledRoute(const router::DeliveryPolicy& policy, Symbol address) {
  auto decision = policy.decide(address.name(), flows::Qos::kReliable);
  return decision && decision->qos == flows::Qos::kReliable && decision->flow != nullptr &&
         decision->flow->journals();
}

bool stagesSaturated(const router::DeliveryPolicy& policy,
                     const std::vector<std::string>& targets) {
  if (targets.empty()) return false;
  for (const auto& flow : policy.flows()) {
    for (const auto& stage : flow->stageMetrics()) {
      if (stage.pressure != stages::Pressure::kSaturated) continue;
      for (const auto& t : targets) {
        if (stage.name == flow->name() + "/" + t) return true;
      }
    }
  }
  return false;
}

}  // namespace cepbus::services::amqp
