#include "services/cluster/partitioned_query.h"

#include <algorithm>

#include "bus/core/pattern/ties.h"

namespace cepbus::services::cluster {
namespace {

// A window query's results are per group, so a partition gives the whole
// stream's results when each group lies in one partition: when GROUP BY
// names every key attribute.
Status checkPartitionedWindow(const pattern::Query& query, const std::string& label,
                              std::span<const std::string> key) {
  if (query.window->kind == pattern::WindowKind::kSession) {
    return Status::invalidArgument(
        label +
        " uses a session window, which has no bounded length: a cluster node settles an input "
        "message only once it is out of every window, so a session that never pauses would keep "
        "every message unsettled; use WINDOW TUMBLING or SLIDING, or run it on one bus");
  }
  for (const std::string& k : key) {
    if (std::find(query.group_by.begin(), query.group_by.end(), k) == query.group_by.end()) {
      return Status::invalidArgument(
          label + " does not group by the cluster key \"" + k +
          "\": a partition sees only its own events, so a group spread over several "
          "partitions would give one partial result in each; add " +
          query.pattern->var + "." + k + " to GROUP BY");
    }
  }
  return Status::ok();
}

}  // namespace

Status checkPartitionedQuery(const pattern::Query& query, std::string_view name,
                             std::string_view engine, std::span<const std::string> key) {
  const std::string label = "query \"" + std::string(name) + "\"";
  if (query.window) return checkPartitionedWindow(query, label, key);
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
