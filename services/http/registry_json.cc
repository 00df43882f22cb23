#include "services/http/registry_json.h"

#include <algorithm>
#include <set>
#include <utility>

#include "flows/flow_stats.h"
#include "router/route_stats.h"
#include "services/cluster_member.h"
#include "services/http/cluster_json.h"
#include "services/http/stats_json.h"
#include "services/service.h"
#include "stages/stage_metrics.h"
#include "stages/stage_types.h"

namespace cepbus::services::http {

using nlohmann::json;

json editJson(const QueryEdit& edit) {
  json out{{"at", edit.at_ms}, {"carried_over", edit.carried_over}};
  if (!edit.carried_over) out["why_not"] = edit.why_not;
  if (edit.side_by_side_until) out["side_by_side_until"] = *edit.side_by_side_until;
  out["from"] = edit.from;
  return out;
}

std::map<std::string, json, std::less<>> componentStats(const stats::Store& store) {
  std::map<std::string, json, std::less<>> out;
  const auto named = [](std::string_view component, const stats::Labels& labels) {
    return component != router::kComponentSchema.component &&
           std::any_of(labels.begin(), labels.end(),
                       [](const auto& l) { return l.first == "name"; });
  };
  for (const stats::ScopeSnapshot& scope : store.scopes(named)) {
    const std::string_view name = scope.label("name");
    json& merged = out.try_emplace(std::string(name), json::object()).first->second;
    json metrics = metricsJson(scope);
    for (auto& [key, value] : metrics.items()) {
      if (!merged.contains(key)) merged[key] = std::move(value);
    }
  }
  return out;
}

json componentJson(const router::ComponentSnapshot& c,
                   const std::map<std::string, json, std::less<>>& stats) {
  json metadata = json::object();
  for (const auto& [key, value] : c.metadata) metadata[key] = value;
  const auto numbers = stats.find(c.name);
  return json{{"name", c.name},
              {"kind", router::componentKindName(c.kind)},
              {"owner", c.owner},
              {"state", router::componentStateName(c.state)},
              {"reason", c.reason},
              {"metadata", std::move(metadata)},
              {"stats", numbers != stats.end() ? numbers->second : json::object()},
              {"queue_length", c.queue_length},
              {"delivered", c.delivered},
              {"failed", c.failed},
              {"rejected", c.rejected},
              {"throughput_per_second", c.throughput_per_s}};
}

json routesJson(const stats::Store& store) {
  // By flow: what its stages took and did not finish yet (queued or being
  // handled; a worker takes a batch off the queue before handling it).
  std::map<std::string, double, std::less<>> waiting;
  for (const stats::ScopeSnapshot& scope : store.scopes(stages::kStageSchema.component)) {
    double pending = 0;
    for (const stats::MetricValue& m : scope.metrics) {
      if (m.name == stages::stage_stats::kOffered.name) pending += m.value;
      if (m.name == stages::stage_stats::kRejected.name ||
          m.name == stages::stage_stats::kProcessed.name ||
          m.name == stages::stage_stats::kFailed.name) {
        pending -= m.value;
      }
    }
    waiting[std::string(scope.label("flow"))] += std::max(pending, 0.0);
  }
  json routes = json::array();
  for (const stats::ScopeSnapshot& scope : store.scopes(router::kRouteSchema.component)) {
    const std::string_view route = scope.label("route");
    const std::string_view flow = scope.label("flow");
    json entry{{"route", route}, {"default", route == router::kDefaultRouteLabel}, {"flow", flow}};
    entry.update(metricsJson(scope));
    const auto queued = waiting.find(flow);
    entry["queued"] = static_cast<uint64_t>(queued != waiting.end() ? queued->second : 0);
    entry["paused"] = entry.value("paused", 0) != 0;
    routes.push_back(std::move(entry));
  }
  return json{{"routes", std::move(routes)}};
}

json stagesJson(const stats::Store& store) {
  json out = json::array();
  for (const stats::ScopeSnapshot& scope : store.scopes(stages::kStageSchema.component)) {
    json entry{{"flow", scope.label("flow")}, {"name", scope.label("stage")}};
    entry.update(metricsJson(scope));
    entry["pressure"] =
        stages::pressureName(static_cast<stages::Pressure>(entry.value("pressure", 0)));
    out.push_back(std::move(entry));
  }
  return json{{"stages", std::move(out)}};
}

json flowsJson(const stats::Store& store) {
  std::map<std::string, json, std::less<>> journals;
  for (const stats::ScopeSnapshot& scope : store.scopes(flows::kJournalSchema.component)) {
    journals.try_emplace(std::string(scope.label("flow")), metricsJson(scope));
  }
  json out = json::array();
  for (const stats::ScopeSnapshot& scope : store.scopes(flows::kFlowSchema.component)) {
    const std::string_view flow = scope.label("flow");
    json entry{{"name", flow}};
    entry.update(metricsJson(scope));
    if (const auto journal = journals.find(flow); journal != journals.end()) {
      entry["journal"] = journal->second;
    }
    out.push_back(std::move(entry));
  }
  return json{{"flows", std::move(out)}};
}

json clusterJson(Deployer& deployer, router::Registry& registry) {
  json nodes = json::array();
  for (const DeployedServiceInfo& info : deployer.deployedServices()) {
    const std::shared_ptr<Service> service = deployer.findService(info.name);
    const ClusterMember* member = service != nullptr ? service->clusterMember() : nullptr;
    if (member == nullptr) continue;
    json node = clusterNodeJson(member->clusterStats());
    node["cluster"] = member->clusterName();
    if (auto c = registry.snapshotOf(member->componentName())) {
      node["state"] = router::componentStateName(c->state);
    }
    nodes.push_back(std::move(node));
  }
  return json{{"nodes", std::move(nodes)}};
}

json serviceJson(const router::Registry& registry, const DeployedServiceInfo& info) {
  json entry{{"name", info.name},
             {"assembly", info.assembly},
             {"type", info.type},
             {"finished", info.finished}};
  if (auto c = registry.snapshotOf(info.name)) {
    entry["state"] = router::componentStateName(c->state);
  }
  return entry;
}

std::optional<json> queryJson(const router::Registry& registry, const std::string& service,
                              const std::string& q, const QueryHost& cep) {
  const std::optional<QueryStats> stats = cep.stats(q);
  if (!stats) return std::nullopt;  // removed meanwhile
  json entry{{"service", service},
             {"name", q},
             {"endpoint", cep.endpointName(q)},
             {"consumed", stats->consumed},
             {"matches", stats->matches},
             {"errors", stats->errors},
             {"rejected", stats->rejected},
             {"publish_failures", stats->publish_failures},
             {"output_held", stats->output_held},
             {"queued", stats->queued},
             {"ran_inline", stats->ran_inline},
             {"missing_attribute", stats->missing_attribute},
             {"late", stats->late},
             {"suppressed", stats->suppressed},
             {"sources", stats->sources},
             {"idle_sources", stats->idle_sources}};
  // null before the first event.
  entry["watermark"] = stats->watermark ? json(*stats->watermark) : json();
  // null, not 0, for an engine that does not count what it holds.
  entry["partial_matches"] =
      stats->partial_matches ? json(stats->partial_matches->partial_matches) : json();
  entry["partial_matches_peak"] =
      stats->partial_matches ? json(stats->partial_matches->peak_partial_matches) : json();
  entry["state_evictions"] =
      stats->partial_matches ? json(stats->partial_matches->evicted) : json();
  entry["state_bytes"] = stats->partial_matches ? json(stats->partial_matches->bytes) : json();
  // Only for a checkpointed query (option checkpoint_interval).
  if (const std::optional<CheckpointStats>& c = stats->checkpoints) {
    entry["checkpoints"] = json{{"written", c->written},
                                {"failed", c->failed},
                                {"last_bytes", c->last_bytes},
                                {"last_ms", c->last_ms},
                                {"restored_bytes", c->restored_bytes},
                                {"restore_ms", c->restore_ms},
                                {"restore_refused", c->restore_refused},
                                {"duplicates_dropped", c->duplicates_dropped},
                                {"held", c->held}};
  }
  // Only for a query that replaced another at run time (PUT).
  if (const std::optional<QueryEdit>& e = stats->edited) {
    entry["edited"] = editJson(*e);
  }
  // Only for an engine with counters of its own (the window engine's groups, ...).
  if (!stats->engine_counters.empty()) {
    json& counters = entry["engine_counters"];
    for (const auto& [name, value] : stats->engine_counters) counters[name] = value;
  }
  if (auto detector = registry.snapshotOf(service + "/" + q + ":detector")) {
    for (const auto& [key, value] : detector->metadata) {
      if (key == "engine" || key == "engine_choice" || key == "input" || key == "output" ||
          key == "text" || key == "shared_by") {
        entry[key] = value;
      }
    }
  }
  return entry;
}

json pluginsJson(const router::Registry& registry, const plugin::PluginLoader* loader) {
  constexpr std::string_view kPluginPrefix = "plugin:";
  json plugins = json::array();
  std::set<std::string, std::less<>> listed;  // library paths
  for (const router::ComponentSnapshot& c : registry.snapshot()) {
    if (!c.name.starts_with(kPluginPrefix)) continue;
    json entry{{"name", c.name.substr(kPluginPrefix.size())},
               {"state", router::componentStateName(c.state)},
               {"reason", c.reason},
               {"on_demand", false}};
    for (const auto& [key, value] : c.metadata) {
      entry[key] = value;
      if (key == "path") listed.insert(value);
    }
    plugins.push_back(std::move(entry));
  }
  if (loader == nullptr) return json{{"plugins", std::move(plugins)}};
  for (const plugin::PluginPtr& p : loader->loaded()) {
    if (listed.contains(p->path())) continue;
    std::string engines;
    for (const std::string& e : p->engines()) engines += (engines.empty() ? "" : ",") + e;
    plugins.push_back(json{{"name", p->name()},
                           {"state", router::componentStateName(router::ComponentState::kStarted)},
                           {"reason", ""},
                           {"on_demand", true},
                           {"path", p->path()},
                           {"version", p->version()},
                           {"engines", std::move(engines)}});
  }
  return json{{"plugins", std::move(plugins)}};
}

}  // namespace cepbus::services::http
