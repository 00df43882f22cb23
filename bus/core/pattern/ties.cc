#include "bus/core/pattern/ties.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace cepbus::pattern {
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

// The variable `e` reads attribute `attr` of as a whole: a single or negated
// variable, or a Kleene variable's current element; empty for anything else.
std::string tiedVariable(const Expr& e, std::string_view attr) {
  if (e.kind != ExprKind::kAttr || e.ref.attr != attr || e.ref.builtin != Builtin::kNone) return {};
  if (e.ref.index == IndexKind::kNone || e.ref.index == IndexKind::kCurrent) return e.ref.var;
  return {};
}

// The tie-graph label of one side of `x.attr = ...`; empty when it ties nothing.
std::string sideLabel(const Expr& e, std::string_view attr) {
  if (e.kind == ExprKind::kLiteral) return "literal:" + e.literal.toString();
  const std::string var = tiedVariable(e, attr);
  return var.empty() ? std::string() : "var:" + var;
}

bool isEquality(const Expr& c) { return c.kind == ExprKind::kBinary && c.binary == BinaryOp::kEq; }

// The type of the first element without a variable (`SEQ(A a, B, C c)`): no
// predicate names it, so it matches an event of any value.
const PatternNode* firstUnnamedElement(const PatternNode& node) {
  const bool element = node.kind == PatternKind::kEvent || node.kind == PatternKind::kKleene ||
                       node.kind == PatternKind::kNot;
  if (element && node.var.empty()) return &node;
  for (const PatternPtr& child : node.children) {
    if (const PatternNode* unnamed = firstUnnamedElement(*child)) return unnamed;
  }
  return nullptr;
}

}  // namespace

std::optional<std::string> firstUntiedVariable(const Query& query, std::string_view attr) {
  if (query.pattern) {
    if (const PatternNode* unnamed = firstUnnamedElement(*query.pattern)) {
      return "the unnamed " + unnamed->type + " element";
    }
  }
  // A conjunct that names a negated variable is a condition of its
  // negation, not of the match: under `a.x = n.x AND c.x = n.x` a and c may
  // differ (the NOT then vetoes only an event equal to both). So the other
  // variables must be tied among themselves (and through literals), and
  // each negated one to them.
  auto negated = [&](const std::string& label) {
    const Variable* v = label.starts_with("var:") ? query.findVariable(label.substr(4)) : nullptr;
    return v != nullptr && v->kind == VarKind::kNegated;
  };
  Ties ties;
  std::vector<std::pair<size_t, size_t>> negation_ties;
  for (const ExprPtr& c : splitConjuncts(query.where)) {
    if (!isEquality(*c)) continue;
    const std::string lhs = sideLabel(*c->lhs, attr);
    const std::string rhs = sideLabel(*c->rhs, attr);
    if (lhs.empty() || rhs.empty()) continue;
    if (negated(lhs) || negated(rhs)) {
      negation_ties.emplace_back(ties.node(lhs), ties.node(rhs));
    } else {
      ties.join(ties.node(lhs), ties.node(rhs));
    }
  }
  const Variable* first = nullptr;
  for (const Variable& v : query.variables) {
    if (v.kind == VarKind::kNegated) continue;
    if (first == nullptr) {
      first = &v;
    } else if (ties.find(ties.node("var:" + v.name)) !=
               ties.find(ties.node("var:" + first->name))) {
      return v.name;
    }
  }
  for (const auto& [a, b] : negation_ties) ties.join(a, b);
  for (const Variable& v : query.variables) {
    if (v.kind != VarKind::kNegated || first == nullptr) continue;
    if (ties.find(ties.node("var:" + v.name)) != ties.find(ties.node("var:" + first->name))) {
      return v.name;
    }
  }
  return std::nullopt;
}

std::vector<std::string> comparedAttributes(const Query& query) {
  std::vector<std::string> attrs;
  for (const ExprPtr& c : splitConjuncts(query.where)) {
    if (!isEquality(*c) || c->lhs->kind != ExprKind::kAttr || c->rhs->kind != ExprKind::kAttr) {
      continue;
    }
    const std::string& attr = c->lhs->ref.attr;
    if (tiedVariable(*c->lhs, attr).empty() || tiedVariable(*c->rhs, attr).empty()) continue;
    if (std::find(attrs.begin(), attrs.end(), attr) == attrs.end()) attrs.push_back(attr);
  }
  return attrs;
}

}  // namespace cepbus::pattern
