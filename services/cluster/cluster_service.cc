#include "services/cluster/cluster_service.h"

#include <Poco/Logger.h>

#include <cstdlib>
#include <filesystem>

#include "services/cluster/topology.h"

namespace cepbus::services::cluster {

namespace {

std::string joinAddresses(const std::vector<std::string>& addresses) {
  std::string out;
  for (const std::string& a : addresses) out += (out.empty() ? "" : ", ") + a;
  return out;
}

}  // namespace

Result<std::string> clusterPassword(const ClusterSpec& spec) {
  if (spec.password_env.empty()) return std::string("guest");
  const char* value = std::getenv(spec.password_env.c_str());
  if (value == nullptr) {
    return Status::invalidArgument(spec.where
                                       .error("cluster \"" + spec.name +
                                              "\": password-env names $" + spec.password_env +
                                              ", which is not set")
                                       .toString());
  }
  return std::string(value);
}

Result<std::unique_ptr<ClusterNode>> makeClusterNode(const ClusterSpec& spec,
                                                     ServiceContext& context) {
  auto password = clusterPassword(spec);
  if (!password) return password.status();
  ClusterHooks hooks;
  // The watchdog is this program again (cepbus __cluster-watchdog).
  std::error_code ec;
  hooks.watchdog_program = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  const ClusterSpec& topology = spec;
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
    auto closed = closeConnectionsFrom(topology, pw, addresses);
    if (!closed) {
      log.warning("cluster %s: cannot close the connections of silent node %s: %s", topology.name,
                  node, closed.status().message());
    } else {
      log.information("cluster %s: closed %z broker connection(s) of silent node %s (from %s)",
                      topology.name, *closed, node, joinAddresses(addresses));
    }
  };
  return ClusterNode::create(spec, *password, std::move(hooks), context);
}

}  // namespace cepbus::services::cluster
