#pragma once

// A cluster node's report (services/cluster_member.h) as the JSON object of
// /api/cluster: the counters as numbers, the partitions as an array, the
// stream offsets only for partitions that read a stream.

#include <nlohmann/json.hpp>

#include "services/cluster_member.h"

namespace cepbus::services::http {

nlohmann::json clusterNodeJson(const ClusterStats& stats);

}  // namespace cepbus::services::http
