#pragma once

// Wiring a descriptor's <cluster> into a running bus: the broker password
// from the environment, and the cluster node's hooks on the brokers'
// management API (topology check at start, eviction of silent nodes).

#include <memory>
#include <string>

#include "bus/core/status.h"
#include "services/cluster/cluster_node.h"
#include "services/cluster/cluster_spec.h"
#include "services/service.h"

namespace cepbus::services::cluster {

// The broker password of `spec`'s user: "guest" for the user guest without
// password-env, else the named environment variable (an error naming it
// when it is unset).
Result<std::string> clusterPassword(const ClusterSpec& spec);

Result<std::unique_ptr<ClusterNode>> makeClusterNode(const ClusterSpec& spec,
                                                     ServiceContext& context);

}  // namespace cepbus::services::cluster
