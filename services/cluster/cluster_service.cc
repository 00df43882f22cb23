#include "services/cluster/cluster_service.h"

#include <cstdlib>

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
  return ClusterNode::create(spec, *password, std::move(hooks), context);
}

}  // namespace cepbus::services::cluster
