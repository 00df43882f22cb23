#pragma once

// The bus's registry, stats and deployer as the JSON bodies of the admin
// API's lists (services/http/admin_api.h names each resource; the bodies are
// in docs/operations.md). Views only: each reads what it shows and changes
// nothing.

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "bus/base/stats/store.h"
#include "bus/host/loader/plugin_loader.h"
#include "router/registry.h"
#include "services/deployer.h"
#include "services/query_host.h"

namespace cepbus::services::http {

// The numbers of the registry components that report into stats scopes
// labelled with their name (the AMQP listener and its links, the HTTP
// listener, a bridge), by name: the metrics of every such scope in one
// object; of two scopes with the same labels, the older one's.
std::map<std::string, nlohmann::json, std::less<>> componentStats(const stats::Store& store);

// One registry component, with its numbers from componentStats().
nlohmann::json componentJson(const router::ComponentSnapshot& c,
                             const std::map<std::string, nlohmann::json, std::less<>>& stats);

// {"routes": [...]}: the delivery-policy routes, default route included.
// "queued" is what the stages of the route's flow hold now (the route's
// counter "enqueued" only grows).
nlohmann::json routesJson(const stats::Store& store);

// {"stages": [...]}: the SEDA stages of the flows.
nlohmann::json stagesJson(const stats::Store& store);

// {"flows": [...]}: the flows, each reliable one with its journal's numbers.
nlohmann::json flowsJson(const stats::Store& store);

// {"nodes": [...]}: the cluster nodes this bus runs (services/cluster/), each
// as it reports itself through ClusterMember, with its registry entry's state.
nlohmann::json clusterJson(Deployer& deployer, router::Registry& registry);

// One deployed service, with its registry entry's state.
nlohmann::json serviceJson(const router::Registry& registry, const DeployedServiceInfo& info);

// What a PUT of a query did: {"at" (ms since the epoch), "carried_over",
// "why_not" (only when not), "side_by_side_until" (only when the replaced
// version runs on beside it), "from" (the replaced text)}.
nlohmann::json editJson(const QueryEdit& edit);

// One entry of /api/queries; nullopt when `cep` no longer runs `q`.
std::optional<nlohmann::json> queryJson(const router::Registry& registry,
                                        const std::string& service, const std::string& q,
                                        const QueryHost& cep);

// {"plugins": [...]}: the descriptor's plugins (the bus registers each as
// "plugin:<name>"), then those the loader loaded since, on demand.
nlohmann::json pluginsJson(const router::Registry& registry, const plugin::PluginLoader* loader);

}  // namespace cepbus::services::http
