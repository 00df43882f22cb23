#include "services/cluster/cluster_queries.h"

#include <algorithm>
#include <map>
#include <memory>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "services/cluster/partitioned_query.h"

namespace cepbus::services::cluster {

Result<std::vector<CompiledQuery>> compileClusterQueries(const ClusterSpec& spec,
                                                         plugin::PluginLoader& plugins) {
  std::vector<CompiledQuery> queries;
  std::string errors;
  auto fail = [&errors](const descriptor::Location& where, const std::string& message) {
    errors += (errors.empty() ? "" : "\n") + where.error(message).toString();
  };
  for (const descriptor::QuerySpec& spec_query : spec.queries) {
    const std::string label = "cluster query \"" + spec_query.name + "\"";
    auto query = pattern::parseQuery(spec_query.text);
    if (!query) {
      fail(spec_query.text_where, label + ": " + query.status().message());
      continue;
    }
    if (Status s = checkPartitionedQuery(*query, spec_query.name, spec_query.engine, spec.key);
        !s) {
      fail(spec_query.where, s.message());
      continue;
    }
    auto plugin = plugins.load(spec_query.engine);
    if (!plugin) {
      fail(spec_query.where, label + ": engine \"" + spec_query.engine +
                                 "\" cannot be loaded: " + plugin.status().message());
      continue;
    }
    std::map<std::string, std::string, std::less<>> values;
    for (const descriptor::Param& option : spec_query.options) values[option.name] = option.value;
    if (values.count("slack") != 0) {
      fail(spec_query.where, label +
                                 ": the cluster's slack attribute orders a partition's events "
                                 "for every query; a query has no slack option");
      continue;
    }
    CompiledQuery compiled{
        spec_query.name,
        spec_query.engine,
        spec_query.output,
        std::move(*query),
        plugin::DetectorOptions(std::move(values)).withBaseDir(spec_query.base_dir),
        *plugin,
        nullptr};
    // One query, its own detector; the partition's order is the cluster's
    // (query_runs.h), so the recipe has no slack.
    compiled.recipe = std::make_shared<const detection::DetectorRecipe>(
        detection::EngineRef{compiled.plugin, compiled.engine},
        std::make_shared<const std::vector<plugin::NamedQuery>>(
            std::vector<plugin::NamedQuery>{{compiled.name, compiled.query}}),
        compiled.options, /*many=*/false, /*slack=*/0);
    auto probe = compiled.recipe->make();
    if (!probe) {
      fail(spec_query.where, label + ": engine \"" + spec_query.engine +
                                 "\" cannot run the query: " + probe.status().message());
      continue;
    }
    queries.push_back(std::move(compiled));
  }
  if (!errors.empty()) return Status::invalidArgument(errors);
  return queries;
}

Timestamp longestWindow(std::span<const CompiledQuery> queries) {
  Timestamp window = 0;
  for (const CompiledQuery& q : queries) window = std::max(window, *q.query.within);
  return window;
}

}  // namespace cepbus::services::cluster
