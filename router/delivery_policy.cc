#include "router/delivery_policy.h"

#include <utility>

#include "router/topic.h"

namespace cepbus::router {

DeliveryPolicy::DeliveryPolicy(std::string default_flow) : default_flow_(std::move(default_flow)) {}

Status DeliveryPolicy::addFlow(std::unique_ptr<flows::AbstractFlow> flow) {
  if (flow == nullptr) return Status::invalidArgument("delivery policy: null flow");
  if (this->flow(flow->name()) != nullptr) {
    return Status::alreadyExists("delivery policy: a flow named '" + flow->name() +
                                 "' already exists");
  }
  flows_.push_back(std::move(flow));
  return Status::ok();
}

Status DeliveryPolicy::addRoute(RouteRule rule) {
  const std::string where =
      "route " + std::to_string(routes_.size() + 1) + " ('" + rule.pattern + "')";
  if (Status s = validatePattern(rule.pattern); !s.isOk()) {
    return Status::invalidArgument(where + ": " + s.message());
  }
  if (flow(rule.flow) == nullptr) {
    return Status::invalidArgument(where + ": unknown flow '" + rule.flow + "'");
  }
  const bool can_be_reliable = rule.default_qos == flows::Qos::kReliable || rule.allow_reliable;
  if (can_be_reliable && flow(rule.reliable_flow) == nullptr) {
    return Status::invalidArgument(where + ": reliable delivery needs the flow '" +
                                   rule.reliable_flow + "', which is unknown");
  }
  routes_.push_back(std::move(rule));
  return Status::ok();
}

Status DeliveryPolicy::setDefaultFlow(std::string name) {
  if (flow(name) == nullptr) {
    return Status::invalidArgument("delivery policy: unknown default flow '" + name + "'");
  }
  default_flow_ = std::move(name);
  return Status::ok();
}

Result<DeliveryDecision> DeliveryPolicy::decide(std::string_view address, flows::Qos asked) const {
  for (size_t i = 0; i < routes_.size(); ++i) {
    const RouteRule& rule = routes_[i];
    if (!topicMatches(rule.pattern, address)) continue;
    flows::Qos qos = rule.default_qos;
    if (asked == flows::Qos::kReliable && rule.allow_reliable) qos = flows::Qos::kReliable;
    return DeliveryDecision{flow(qos == flows::Qos::kReliable ? rule.reliable_flow : rule.flow),
                            qos, i};
  }
  flows::AbstractFlow* fallback = flow(default_flow_);
  if (fallback == nullptr) {
    return Status::notFound("delivery policy: the default flow '" + default_flow_ +
                            "' was never added");
  }
  return DeliveryDecision{fallback, flows::Qos::kBestEffort, routes_.size()};
}

flows::AbstractFlow* DeliveryPolicy::flow(std::string_view name) const {
  for (const auto& f : flows_) {
    if (f->name() == name) return f.get();
  }
  return nullptr;
}

}  // namespace cepbus::router
