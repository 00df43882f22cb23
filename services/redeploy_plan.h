#pragma once

// RedeployPlan: what redeploying a running service assembly with a new
// descriptor of it changes (Deployer::redeploy(), PUT /api/assemblies/{name}).
//
// A redeploy keeps every service unit running and changes only the queries
// of its query hosts (CEP units): a query of the new descriptor that runs
// unchanged is kept, one that differs replaces the running one
// (QueryHost::replaceQuery(), which carries its state over when the edit
// allows it), one that does not run is added, and a running query the new
// descriptor does not name is removed. The running queries, not the
// descriptor deployed first, are what the new one is compared with: queries
// added, edited or removed over the admin API since count as they run now.
//
// Any other difference (a unit added or removed, another type, other params,
// subscriptions or publications) is refused: a unit reads those when it is
// built, so changing them means undeploying and deploying the assembly,
// which starts its units empty. The refusal names the unit and what differs.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/status.h"
#include "bus/host/descriptor/descriptor.h"
#include "services/query_host.h"

namespace cepbus::services {

// One query change of a redeploy, in the order they are applied: removals,
// then replacements, then additions.
struct QueryStep {
  enum class Kind { kRemove, kReplace, kAdd };
  Kind kind;
  std::string service;         // "<assembly>.<unit>"
  descriptor::QuerySpec spec;  // the new query; for kRemove only its name
};

std::string_view queryStepName(QueryStep::Kind kind);  // "removed", "replaced", "added"

struct RedeployPlan {
  std::vector<QueryStep> steps;
  // "<service>/<query>" of each query that runs unchanged.
  std::vector<std::string> kept;
};

// The running query host of service `service`; nullptr when it runs no
// queries.
using QueryHostOf = std::function<const QueryHost*(std::string_view service)>;

// The plan that turns `deployed` (as it runs: each unit's queries as its
// host runs them) into `next`, whose queries are compared as the host would
// run them (QueryHost::unitQueries()). Rejected, naming the unit of `next`
// (its descriptor line) and what differs, when anything but queries differs.
Result<RedeployPlan> planRedeploy(const descriptor::ServiceAssembly& deployed,
                                  const descriptor::ServiceAssembly& next,
                                  const QueryHostOf& host_of);

}  // namespace cepbus::services
