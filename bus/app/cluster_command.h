#pragma once

// `cepbus cluster`: the operator's side of a scale-out cluster on RabbitMQ
// (the descriptor's <cluster>; docs/cluster.md).
//
//   cepbus cluster init DESCRIPTOR.xml
//       declares the cluster's exchanges, partition queues (quorum, single
//       active consumer) and bindings through the brokers' management API;
//       idempotent, and refuses a topology declared with other partitions
//   cepbus cluster publish DESCRIPTOR.xml --events FILE [--rate N]
//       publishes a JSON-lines file into the partitions (the key attributes
//       hashed as partitioner.h says), resending what was in doubt after a
//       broker failover, and prints {"published":N,"resent":N,"reconnects":N}
//
// Exit status: 0 success, 1 failure (named), 2 bad command line.

#include <ostream>
#include <string>
#include <vector>

#include "bus/app/command_spec.h"

namespace cepbus::app {

int runClusterCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

const CommandSpec& clusterSpec();

}  // namespace cepbus::app
