#pragma once

// The queries a cluster runs on each of its partitions, compiled once when
// a node is built: parsed, planned on the detection host (planner.h: the
// engine each names, or engine auto's choice, loaded and tried on it, each
// query on its own detector) and checked to be partitionable by the
// cluster's key (partitioned_query.h), so that a query its engine refuses is
// a start-up error naming its descriptor line rather than a failure on each
// partition's first event.
//
// Thread-safety: immutable once compiled; every partition runner of a node
// shares them.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bus/core/pattern/ast.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"
#include "bus/host/detection/detector_recipe.h"
#include "bus/host/loader/plugin_loader.h"
#include "services/cluster/cluster_spec.h"

namespace cepbus::services::cluster {

// A cluster query compiled once; each active partition runs a detector of it.
struct CompiledQuery {
  std::string name;
  std::string engine;  // the engine that runs it (engine auto's pick)
  std::string output;  // the routing key of its composites on "<name>.out"
  pattern::Query query;
  // Makes the query's detector on the detection host, once per active
  // partition and again for each new stream (detection::Detection::create()).
  std::shared_ptr<const detection::DetectorRecipe> recipe;
};

// Every query of `spec`, its engine loaded through `plugins`; or
// InvalidArgument listing, by descriptor line, each query that does not
// parse, that the cluster key does not partition, that has a max_delay or slack option
// (the cluster's max-delay orders a partition for every query) or that its
// engine cannot load or run.
Result<std::vector<CompiledQuery>> compileClusterQueries(const ClusterSpec& spec,
                                                         plugin::PluginLoader& plugins);

// The longest WITHIN or window length of `queries` (0 for none): how long
// after an event a partition still needs it (partition_ledger.h).
Timestamp longestWindow(std::span<const CompiledQuery> queries);

}  // namespace cepbus::services::cluster
