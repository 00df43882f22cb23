#include "services/redeploy_plan.h"

#include <algorithm>

namespace cepbus::services {
namespace {

bool sameParams(const std::vector<descriptor::Param>& a, const std::vector<descriptor::Param>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.name == y.name && x.value == y.value;
  });
}

bool sameQuery(const descriptor::QuerySpec& a, const descriptor::QuerySpec& b) {
  return a.name == b.name && a.engine == b.engine && a.inputs == b.inputs && a.output == b.output &&
         sameParams(a.options, b.options) && a.ts_unit == b.ts_unit && a.text == b.text &&
         a.base_dir == b.base_dir;
}

// What differs between two units of one name apart from their queries; empty
// when nothing does.
std::string unitDifference(const descriptor::ServiceUnit& deployed,
                           const descriptor::ServiceUnit& next) {
  if (deployed.type != next.type) {
    return "its type differs (\"" + deployed.type + "\" runs, \"" + next.type + "\" given)";
  }
  if (!sameParams(deployed.params, next.params)) return "its params differ from the running unit's";
  const bool same_subscriptions = std::equal(
      deployed.subscriptions.begin(), deployed.subscriptions.end(), next.subscriptions.begin(),
      next.subscriptions.end(), [](const auto& x, const auto& y) {
        return x.address == y.address && x.filter == y.filter && x.durable == y.durable;
      });
  if (!same_subscriptions) return "its subscriptions differ from the running unit's";
  const bool same_publications = std::equal(
      deployed.publications.begin(), deployed.publications.end(), next.publications.begin(),
      next.publications.end(), [](const auto& x, const auto& y) { return x.address == y.address; });
  if (!same_publications) return "its publications differ from the running unit's";
  return {};
}

Status refuse(const descriptor::Location& where, const std::string& what) {
  return Status::rejected(where
                              .error(what + "; a redeploy changes only the queries of a running "
                                            "assembly: undeploy and deploy it to change the rest")
                              .toString());
}

const descriptor::QuerySpec* findQuery(const std::vector<descriptor::QuerySpec>& queries,
                                       std::string_view name) {
  const auto it = std::find_if(queries.begin(), queries.end(),
                               [name](const auto& q) { return q.name == name; });
  return it != queries.end() ? &*it : nullptr;
}

}  // namespace

std::string_view queryStepName(QueryStep::Kind kind) {
  switch (kind) {
    case QueryStep::Kind::kRemove:
      return "removed";
    case QueryStep::Kind::kReplace:
      return "replaced";
    case QueryStep::Kind::kAdd:
      return "added";
  }
  return "?";
}

Result<RedeployPlan> planRedeploy(const descriptor::ServiceAssembly& deployed,
                                  const descriptor::ServiceAssembly& next,
                                  const QueryHostOf& host_of) {
  for (const descriptor::ServiceUnit& unit : deployed.units) {
    if (next.unit(unit.name) == nullptr) {
      return refuse(next.where, "service unit \"" + unit.name + "\" runs but is not in the " +
                                    "new descriptor");
    }
  }
  RedeployPlan plan;
  std::vector<QueryStep> replacements, additions;
  for (const descriptor::ServiceUnit& unit : next.units) {
    const descriptor::ServiceUnit* now = deployed.unit(unit.name);
    if (now == nullptr) {
      return refuse(unit.where, "service unit \"" + unit.name + "\" is new");
    }
    if (std::string what = unitDifference(*now, unit); !what.empty()) {
      return refuse(unit.where, "service unit \"" + unit.name + "\": " + what);
    }
    const std::string service = next.name + "." + unit.name;
    const QueryHost* host = host_of(service);
    if (host == nullptr) {
      if (unit.queries.empty()) continue;
      return refuse(unit.where,
                    "service unit \"" + unit.name + "\" runs no queries to change (no CEP unit)");
    }
    const std::vector<descriptor::QuerySpec> queries = host->querySpecs();
    const std::vector<descriptor::QuerySpec> wanted = host->unitQueries(next, unit);
    for (const descriptor::QuerySpec& q : queries) {
      if (findQuery(wanted, q.name) == nullptr) {
        descriptor::QuerySpec name_only;
        name_only.name = q.name;
        plan.steps.push_back({QueryStep::Kind::kRemove, service, std::move(name_only)});
      }
    }
    for (const descriptor::QuerySpec& q : wanted) {
      const descriptor::QuerySpec* runs = findQuery(queries, q.name);
      if (runs == nullptr) {
        additions.push_back({QueryStep::Kind::kAdd, service, q});
      } else if (sameQuery(*runs, q)) {
        plan.kept.push_back(service + "/" + q.name);
      } else {
        replacements.push_back({QueryStep::Kind::kReplace, service, q});
      }
    }
  }
  for (auto* steps : {&replacements, &additions}) {
    std::move(steps->begin(), steps->end(), std::back_inserter(plan.steps));
  }
  return plan;
}

}  // namespace cepbus::services
