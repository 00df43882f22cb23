#include "bus/core/pattern/ast.h"

#include <algorithm>

namespace cepbus::pattern {
namespace {

void collectConjuncts(const ExprPtr& e, std::vector<ExprPtr>& out) {
  if (e->kind == ExprKind::kBinary && e->binary == BinaryOp::kAnd) {
    collectConjuncts(e->lhs, out);
    collectConjuncts(e->rhs, out);
  } else {
    out.push_back(e);
  }
}

void collectVariables(const Expr& e, std::vector<std::string>& out) {
  if ((e.kind == ExprKind::kAttr || e.kind == ExprKind::kAggregate) && !e.ref.var.empty() &&
      std::find(out.begin(), out.end(), e.ref.var) == out.end()) {
    out.push_back(e.ref.var);
  }
  if (e.lhs) collectVariables(*e.lhs, out);
  if (e.rhs) collectVariables(*e.rhs, out);
}

}  // namespace

std::vector<ExprPtr> splitConjuncts(const ExprPtr& e) {
  std::vector<ExprPtr> out;
  if (e) collectConjuncts(e, out);
  return out;
}

std::vector<std::string> variablesOf(const Expr& e) {
  std::vector<std::string> out;
  collectVariables(e, out);
  return out;
}

const char* operatorName(PatternKind kind) {
  switch (kind) {
    case PatternKind::kEvent:
      return "event element 'Type var'";
    case PatternKind::kKleene:
      return "Kleene element 'Type+ var[]'";
    case PatternKind::kNot:
      return "negated element 'NOT(Type var)'";
    case PatternKind::kSeq:
      return "sequence 'SEQ(...)' / ';'";
    case PatternKind::kAnd:
      return "conjunction 'AND(...)' / '+'";
    case PatternKind::kOr:
      return "disjunction 'OR(...)' / '|'";
    case PatternKind::kConcat:
      return "concatenation '~'";
    case PatternKind::kConcurrent:
      return "concurrency '||'";
    case PatternKind::kNegation:
      return "negation '-'";
    case PatternKind::kIteration:
      return "iteration '*'";
    case PatternKind::kSelection:
      return "selection 'e[predicate]'";
    case PatternKind::kAggregation:
      return "aggregation 'AGG(e, predicate)'";
    case PatternKind::kTimeRestriction:
      return "time restriction 'WITHIN(e, n)'";
  }
  return "?";
}

const char* aggFuncName(AggFunc f) {
  switch (f) {
    case AggFunc::kCount:
      return "count";
    case AggFunc::kSum:
      return "sum";
    case AggFunc::kAvg:
      return "avg";
    case AggFunc::kMin:
      return "min";
    case AggFunc::kMax:
      return "max";
    case AggFunc::kStddev:
      return "stddev";
    case AggFunc::kFirst:
      return "first";
    case AggFunc::kLast:
      return "last";
  }
  return "?";
}

const char* windowKindName(WindowKind k) {
  switch (k) {
    case WindowKind::kTumbling:
      return "tumbling";
    case WindowKind::kSliding:
      return "sliding";
    case WindowKind::kSession:
      return "session";
  }
  return "?";
}

const char* emitKindName(EmitKind k) { return k == EmitKind::kFirst ? "first" : "last"; }

std::string defaultReturnName(const Expr& e) {
  if (e.kind == ExprKind::kAttr && !e.ref.var.empty()) {
    switch (e.ref.index) {
      case IndexKind::kNone:
        return e.ref.var + "_" + e.ref.attr;
      case IndexKind::kAt:
        return e.ref.var + "_" + std::to_string(e.ref.position) + "_" + e.ref.attr;
      case IndexKind::kLast:
        return e.ref.var + "_last_" + e.ref.attr;
      default:
        return "";
    }
  }
  if (e.kind == ExprKind::kAggregate) {
    std::string name = std::string(aggFuncName(e.agg)) + "_" + e.ref.var;
    if (!e.ref.attr.empty()) name += "_" + e.ref.attr;
    return name;
  }
  if (e.kind == ExprKind::kMatchProb) return "prob";
  return "";
}

const Variable* Query::findVariable(std::string_view name) const {
  for (const Variable& v : variables) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

const char* strategyName(Strategy s) {
  switch (s) {
    case Strategy::kStrictContiguity:
      return "strict_contiguity";
    case Strategy::kSkipTillNextMatch:
      return "skip_till_next_match";
    case Strategy::kSkipTillAnyMatch:
      return "skip_till_any_match";
  }
  return "?";
}

const char* contextName(Context c) {
  switch (c) {
    case Context::kUnspecified:
      return "";
    case Context::kRecent:
      return "recent";
    case Context::kUnrestricted:
      return "unrestricted";
  }
  return "?";
}

}  // namespace cepbus::pattern
