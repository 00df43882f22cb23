#include "services/cluster/partitioned_query.h"

#include <algorithm>
#include <map>
#include <vector>

namespace cepbus::services::cluster {
namespace {

// Union-find over the query's variables plus one node per literal value.
class Ties {
 public:
  size_t node(const std::string& label) {
    auto [it, added] = index_.try_emplace(label, parent_.size());
    if (added) parent_.push_back(parent_.size());
    return it->second;
  }
  void join(size_t a, size_t b) { parent_[find(a)] = find(b); }
  size_t find(size_t a) {
    while (parent_[a] != a) a = parent_[a] = parent_[parent_[a]];
    return a;
  }

 private:
  std::map<std::string, size_t> index_;
  std::vector<size_t> parent_;
};

// The tie-graph label of one side of `x.k = ...`: the variable for a single
// or negated variable, or a Kleene variable's current element; the literal
// for a literal; empty for anything that does not tie a whole variable.
std::string sideLabel(const pattern::Expr& e, const std::string& key) {
  if (e.kind == pattern::ExprKind::kLiteral) return "literal:" + e.literal.toString();
  if (e.kind != pattern::ExprKind::kAttr || e.ref.attr != key ||
      e.ref.builtin != pattern::Builtin::kNone) {
    return {};
  }
  if (e.ref.index == pattern::IndexKind::kNone || e.ref.index == pattern::IndexKind::kCurrent) {
    return "var:" + e.ref.var;
  }
  return {};
}

}  // namespace

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
    Ties ties;
    for (const pattern::Variable& v : query.variables) ties.node("var:" + v.name);
    for (const pattern::ExprPtr& c : pattern::splitConjuncts(query.where)) {
      if (c->kind != pattern::ExprKind::kBinary || c->binary != pattern::BinaryOp::kEq) continue;
      const std::string lhs = sideLabel(*c->lhs, k);
      const std::string rhs = sideLabel(*c->rhs, k);
      if (!lhs.empty() && !rhs.empty()) ties.join(ties.node(lhs), ties.node(rhs));
    }
    for (size_t i = 1; i < query.variables.size(); ++i) {
      const std::string& a = query.variables[0].name;
      const std::string& b = query.variables[i].name;
      if (ties.find(ties.node("var:" + a)) == ties.find(ties.node("var:" + b))) continue;
      return Status::invalidArgument(
          label + " may join events of different partitions: the cluster key \"" + k +
          "\" does not tie variable " + a + " to " + b + " (add PARTITION BY " + k + ", or WHERE " +
          a + "." + k + " = " + b + "." + k +
          ", or partition the cluster by an attribute the query compares for equality)");
    }
  }
  return Status::ok();
}

}  // namespace cepbus::services::cluster
