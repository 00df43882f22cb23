#include "services/cluster/cluster_queries.h"

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "bus/host/detection/planner.h"
#include "bus/host/time/reorder.h"
#include "services/cluster/partitioned_query.h"

namespace cepbus::services::cluster {

Result<std::vector<CompiledQuery>> compileClusterQueries(const ClusterSpec& spec,
                                                         plugin::PluginLoader& plugins) {
  std::string errors;
  auto fail = [&errors](const std::string& message) {
    errors += (errors.empty() ? "" : "\n") + message;
  };
  // The queries that parse, with the descriptor query each came from.
  std::vector<detection::QueryRequest> requests;
  std::vector<const descriptor::QuerySpec*> sources;
  for (const descriptor::QuerySpec& spec_query : spec.queries) {
    const std::string label = "cluster query \"" + spec_query.name + "\"";
    auto query = pattern::parseQuery(spec_query.text, {.ts_unit = spec_query.ts_unit});
    if (!query) {
      fail(spec_query.text_where.error(label + ": " + query.status().message()).toString());
      continue;
    }
    std::map<std::string, std::string, std::less<>> values;
    for (const descriptor::Param& option : spec_query.options) values[option.name] = option.value;
    if (values.count(plugin::kSlackOption) != 0 || values.count(plugin::kMaxDelayOption) != 0) {
      fail(spec_query.where
               .error(label + ": the cluster's max-delay attribute orders a partition's events for "
                              "every query; a query has no max_delay option or slack option")
               .toString());
      continue;
    }
    // Checked before planning so that every query is checked even when
    // another's engine refuses it; engine auto's pick is checked after.
    if (Status s = checkPartitionedQuery(*query, spec_query.name, spec_query.engine, spec.key);
        !s) {
      fail(spec_query.where.error(s.message()).toString());
      continue;
    }
    detection::QueryRequest request;
    request.name = spec_query.name;
    request.query = std::move(*query);
    request.engine = spec_query.engine;
    request.options = plugin::DetectorOptions(std::move(values)).withBaseDir(spec_query.base_dir);
    request.where = spec_query.where.error(label).toString();
    // Each query has its own detector and its own output exchange key.
    request.share = false;
    requests.push_back(std::move(request));
    sources.push_back(&spec_query);
  }
  if (requests.empty()) {
    if (!errors.empty()) return Status::invalidArgument(errors);
    return std::vector<CompiledQuery>{};
  }
  // No trial: every node of the cluster must run a partition's query on the
  // same engine, so that a partition moved to another node finds the
  // composites it already published under the same ids (bus/host/detection/composite_id.h).
  detection::PlanOptions options;
  options.trial = false;
  auto plan = detection::plan(requests, options, plugins);
  if (!plan) {
    fail(plan.status().message());
    return Status::invalidArgument(errors);
  }
  std::vector<CompiledQuery> queries(requests.size());
  for (detection::DetectionGroup& group : plan->groups) {
    const size_t index = group.members.front();
    const descriptor::QuerySpec& source = *sources[index];
    detection::QueryRequest& request = requests[index];
    if (Status s = checkPartitionedQuery(request.query, source.name, group.engine, spec.key);
        group.engine != request.engine && !s) {
      fail(source.where.error(s.message()).toString());
      continue;
    }
    queries[index] =
        CompiledQuery{source.name, group.engine, source.output, std::move(request.query),
                      std::make_shared<const detection::DetectorRecipe>(std::move(group.recipe))};
  }
  if (!errors.empty()) return Status::invalidArgument(errors);
  return queries;
}

Timestamp longestWindow(std::span<const CompiledQuery> queries) {
  Timestamp window = 0;
  for (const CompiledQuery& q : queries) {
    // An event at ts lies in windows that end by ts + L (checkPartitionedQuery
    // admits no session), as a match holding it ends by ts + WITHIN.
    window = std::max(window, q.query.window ? q.query.window->length : *q.query.within);
  }
  return window;
}

}  // namespace cepbus::services::cluster
