#include "services/cluster/partitioned_query.h"

#include <algorithm>

#include "bus/core/pattern/ties.h"

namespace cepbus::services::cluster {

Status checkPartitionedQuery(const pattern::Query& query, std::string_view name,
                             std::string_view engine, std::span<const std::string> key) {
  const std::string label = "query \"" + std::string(name) + "\"";
  if (!query.within) {
    return Status::invalidArgument(
        label +
        " has no WITHIN: a cluster node settles an input message only once it is out "
        "of every window, so an unbounded window would keep every message unsettled; "
        "add WITHIN n");
  }
  for (const std::string& k : key) {
    if (std::find(query.partition_by.begin(), query.partition_by.end(), k) !=
        query.partition_by.end()) {
      continue;
    }
    const bool order_sensitive =
        query.strategy == pattern::Strategy::kStrictContiguity ||
        query.context == pattern::Context::kRecent ||
        (engine == "algebra" && query.context != pattern::Context::kUnrestricted);
    if (order_sensitive) {
      return Status::invalidArgument(
          label +
          (query.strategy == pattern::Strategy::kStrictContiguity ? " uses strict contiguity"
                                                                  : " runs in the recent context") +
          ", which looks at neighbouring events of the whole stream: a partition sees only its "
          "own, so the query needs PARTITION BY " +
          k + (engine == "algebra" ? " (or CONTEXT unrestricted)" : ""));
    }
    if (const std::optional<std::string> b = pattern::firstUntiedVariable(query, k)) {
      const std::string a = query.variables.empty() ? "its first element" : query.variables[0].name;
      const bool unnamed = b->starts_with("the unnamed ");
      return Status::invalidArgument(
          label + " may join events of different partitions: the cluster key \"" + k +
          "\" does not tie " + (unnamed ? "" : "variable ") + a + " to " + *b +
          " (add PARTITION BY " + k + ", or " +
          (unnamed ? "name the element and tie it with WHERE"
                   : "WHERE " + a + "." + k + " = " + *b + "." + k) +
          ", or partition the cluster by an attribute the query compares for equality)");
    }
  }
  return Status::ok();
}

}  // namespace cepbus::services::cluster
