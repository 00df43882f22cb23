#pragma once

// What the bus's delivery policy tells the AMQP listener about a publish
// (services/amqp/listener/amqp_listener.h): whether its accept must wait for a
// journal commit, and whether the stages that held a publishing link back
// are still saturated. The listener asks; the policy, its flows and their
// stages answer.
//
// Thread-safety: as the policy's own reads: any thread, while the broker
// that owns the policy is alive.

#include <string>
#include <vector>

#include "bus/core/symbol.h"
#include "router/delivery_policy.h"

namespace cepbus::services::amqp {

// True when an unsettled (reliable) publish to `address` goes through a
// reliable flow that journals it: its accept then waits for the commit.
bool journaledRoute(const router::DeliveryPolicy& policy, Symbol address);

// True while a stage of a queueing flow (SEDA or reliable) that serves one
// of `targets` is saturated. With no target named (a straight-through
// target failed), false: one recheck interval is then the whole back-off.
bool stagesSaturated(const router::DeliveryPolicy& policy, const std::vector<std::string>& targets);

}  // namespace cepbus::services::amqp
