#include "services/cluster/cluster_service.h"

#include <Poco/Logger.h>

#include <cstdlib>

#include "services/cluster/topology.h"

namespace cepbus::services::cluster {

Result<std::string> clusterPassword(const descriptor::ClusterSpec& spec) {
  if (spec.password_env.empty()) return std::string("guest");
  const char* value = std::getenv(spec.password_env.c_str());
  if (value == nullptr) {
    return Status::invalidArgument(spec.where
                                       .error("cluster \"" + spec.name + "\": password-env names $" +
                                              spec.password_env + ", which is not set")
                                       .toString());
  }
  return std::string(value);
}

Result<std::unique_ptr<ClusterNode>> makeClusterNode(const descriptor::ClusterSpec& spec,
                                                     ServiceContext& context) {
  auto password = clusterPassword(spec);
  if (!password) return password.status();
  ClusterHooks hooks;
  const descriptor::ClusterSpec& topology = spec;
  hooks.verify_topology = [topology, pw = *password]() -> Status {
    auto found = inspectTopology(topology, pw);
    if (!found) return found.status();
    if (Status s = checkComplete(*found, topology); !s) {
      return Status::invalidArgument(topology.where
                                         .error("cluster \"" + topology.name +
                                                "\": the brokers' topology does not match: " +
                                                s.message() + " (run `cepbus cluster init`)")
                                         .toString());
    }
    return Status::ok();
  };
  hooks.evict = [topology, pw = *password](const std::string& node,
                                          const std::vector<std::string>& addresses) {
    Poco::Logger& log = Poco::Logger::get("cepbus.cluster");
    if (Status s = closeConnectionsFrom(topology, pw, addresses); !s) {
      log.warning("cluster %s: cannot close the connections of silent node %s: %s",
                  topology.name, node, s.message());
    } else {
      log.information("cluster %s: closed the broker connections of silent node %s",
                      topology.name, node);
    }
  };
  return ClusterNode::create(spec, *password, std::move(hooks), context);
}

}  // namespace cepbus::services::cluster
