#pragma once

// DeliveryPolicy (P1): which flow carries an exchange, and with what QoS.
//
// Routes are (address pattern -> flow, default QoS, whether the sender may ask
// for reliable delivery); the first route whose pattern matches the address
// wins; an address no route matches uses the default flow, best effort.
//
//   effective QoS = route.default_qos, raised to reliable when the exchange
//                   asks for reliable and route.allow_reliable is set
//   flow          = route.reliable_flow when the effective QoS is reliable,
//                   else route.flow
//
// So a sender can raise best effort to reliable only where the route allows
// it, and can never lower a route that is reliable by default.

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/status.h"
#include "flows/abstract_flow.h"
#include "flows/exchange.h"

namespace cepbus::router {

struct RouteRule {
  std::string pattern;  // a topic pattern (router/topic.h)
  std::string flow;     // the flow for best-effort exchanges
  flows::Qos default_qos = flows::Qos::kBestEffort;
  bool allow_reliable = false;             // a sender may raise best effort to reliable
  std::string reliable_flow = "reliable";  // the flow for reliable exchanges
};

struct DeliveryDecision {
  flows::AbstractFlow* flow = nullptr;
  flows::Qos qos = flows::Qos::kBestEffort;
  size_t route = 0;  // index of the winning route; routeCount() for the default
};

// Thread-safety: configured on one thread (addFlow, addRoute,
// setDefaultFlow), then read-only and safe from any thread. Ownership: owns
// its flows.
class DeliveryPolicy {
 public:
  // `default_flow` must be added with addFlow() before decide() is used.
  explicit DeliveryPolicy(std::string default_flow = "st");

  // AlreadyExists when a flow has the same name.
  Status addFlow(std::unique_ptr<flows::AbstractFlow> flow);
  // InvalidArgument naming the route for a bad pattern, an unknown flow, or a
  // reliable QoS without a known reliable_flow.
  Status addRoute(RouteRule rule);
  Status setDefaultFlow(std::string name);

  // The decision for an exchange to `address` asking for `asked`. NotFound
  // when the default flow is needed but was never added.
  Result<DeliveryDecision> decide(std::string_view address, flows::Qos asked) const;

  flows::AbstractFlow* flow(std::string_view name) const;
  std::span<const std::unique_ptr<flows::AbstractFlow>> flows() const { return flows_; }
  size_t routeCount() const { return routes_.size(); }
  const RouteRule& route(size_t index) const { return routes_[index]; }
  const std::string& defaultFlow() const { return default_flow_; }

 private:
  std::string default_flow_;
  std::vector<std::unique_ptr<flows::AbstractFlow>> flows_;
  std::vector<RouteRule> routes_;
};

}  // namespace cepbus::router
