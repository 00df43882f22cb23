#include "bus/core/pattern/checker.h"

#include <algorithm>
#include <string>
#include <vector>

#include "bus/core/pattern/parse_error.h"
#include "bus/core/pattern/printer.h"

namespace cepbus::pattern::parsing {
namespace {

// Semantic checks. Static types catch `price > 'IBM'`-style mistakes where a
// literal or a built-in fixes a type; attribute types are known only at run
// time (kUnknown), where a mismatch makes the comparison false instead.

enum class Type { kUnknown, kBool, kNumber, kString };

const char* typeName(Type t) {
  switch (t) {
    case Type::kUnknown:
      return "a value";
    case Type::kBool:
      return "a boolean";
    case Type::kNumber:
      return "a number";
    case Type::kString:
      return "a string";
  }
  return "?";
}

// Where an expression appears; decides which variables and indexes it may use.
// kWindowReturn and kWindowHaving: RETURN and HAVING of a window query, over
// its aggregates and group keys. kPer: the key of EMIT ... PER, over a match
// as RETURN sees it.
enum class Site {
  kWhere,
  kReturn,
  kPer,
  kSelection,
  kAggregation,
  kFilter,
  kWindowReturn,
  kWindowHaving
};

class Checker {
 public:
  explicit Checker(Query& q) : q_(q) {}

  void run() {
    walk(*q_.pattern, nullptr, 0);
    if (q_.window) {
      runWindow();
      return;
    }
    constexpr size_t kMaxVariables = 64;
    if (q_.variables.size() > kMaxVariables) {
      fail(q_.variables[kMaxVariables].pos, "a pattern binds at most 64 variables");
    }
    if (q_.where) {
      requireBool(*q_.where, check(*q_.where, Site::kWhere, nullptr), "WHERE");
      for (const ExprPtr& c : splitConjuncts(q_.where)) checkIterationVars(*c);
    }
    if (q_.returns) {
      for (const ReturnItem& item : q_.returns->items) check(*item.expr, Site::kReturn, nullptr);
    }
    if (q_.emit && q_.emit->per) check(*q_.emit->per, Site::kPer, nullptr);
  }

  static void checkFilter(const Expr& e) {
    Query none;
    Checker c(none);
    c.requireBool(e, c.check(e, Site::kFilter, nullptr), "a filter");
  }

 private:
  void declare(const PatternNode& p, VarKind kind) {
    if (p.var.empty()) return;
    if (const Variable* v = q_.findVariable(p.var)) {
      fail(p.pos, "duplicate variable '" + p.var + "' (first bound at line " +
                      std::to_string(v->pos.line) + ", column " + std::to_string(v->pos.column) +
                      ")");
    }
    q_.variables.push_back(Variable{p.var, p.type, kind, p.pos});
  }

  void walk(const PatternNode& p, const PatternNode* parent, size_t index) {
    switch (p.kind) {
      case PatternKind::kEvent:
        declare(p, VarKind::kSingle);
        return;
      case PatternKind::kKleene:
        if (parent == nullptr ||
            (parent->kind != PatternKind::kSeq && parent->kind != PatternKind::kAggregation)) {
          fail(p.pos, "Kleene element '" + toString(p) +
                          "' is only allowed inside SEQ(...) or as the operand of AGG(...)");
        }
        declare(p, VarKind::kKleene);
        return;
      case PatternKind::kNot:
        checkNotPlacement(p, parent, index);
        declare(p, VarKind::kNegated);
        return;
      default:
        break;
    }
    for (size_t i = 0; i < p.children.size(); ++i) walk(*p.children[i], &p, i);
    if (p.kind == PatternKind::kSelection || p.kind == PatternKind::kAggregation) {
      const Site site = p.kind == PatternKind::kSelection ? Site::kSelection : Site::kAggregation;
      requireBool(*p.predicate, check(*p.predicate, site, p.children[0].get()),
                  site == Site::kSelection ? "a selection" : "an aggregation");
    }
  }

  // NOT stands between two positive elements of a SEQ, or starts or ends
  // the pattern's own SEQ (leading and trailing negation: absence over the
  // WITHIN span before the first or after the first positive event, so
  // WITHIN bounds it).
  void checkNotPlacement(const PatternNode& p, const PatternNode* parent, size_t index) const {
    if (parent == nullptr || parent->kind != PatternKind::kSeq) {
      fail(p.pos, "NOT(...) is only allowed inside SEQ(...); write 'A - B' for negation elsewhere");
    }
    const auto& siblings = parent->children;
    auto positive = [](const PatternPtr& c) { return c->kind != PatternKind::kNot; };
    const bool before = std::any_of(siblings.begin(), siblings.begin() + index, positive);
    const bool after = std::any_of(siblings.begin() + index + 1, siblings.end(), positive);
    if (before && after) return;
    if (!before && !after) {
      fail(p.pos,
           "'" + toString(p) + "' needs a positive element in its SEQ(...) to negate around");
    }
    if (parent != q_.pattern.get()) {
      fail(p.pos, "'" + toString(p) + "' may start or end only the pattern's outermost SEQ(...)");
    }
    if (!q_.within) {
      fail(p.pos, "'" + toString(p) + "' " + (before ? "ends" : "starts") +
                      " the pattern, so it needs WITHIN n: the absence is checked over the n "
                      "time units " +
                      (before ? "after the first positive event" : "before the last one"));
    }
  }

  static void collectVars(const PatternNode& p, std::vector<std::string>& out) {
    if (!p.var.empty()) out.push_back(p.var);
    for (const PatternPtr& c : p.children) collectVars(*c, out);
  }

  void requireBool(const Expr& e, Type t, const char* what) const {
    if (t != Type::kBool && t != Type::kUnknown) {
      fail(e.pos, std::string(what) + " needs a boolean condition, found " + typeName(t));
    }
  }

  // `scope`: for selection and aggregation predicates, the operand whose
  // variables the predicate may name.
  Type check(const Expr& e, Site site, const PatternNode* scope) {
    switch (e.kind) {
      case ExprKind::kLiteral:
        switch (e.literal.kind()) {
          case Value::Kind::kBool:
            return Type::kBool;
          case Value::Kind::kString:
            return Type::kString;
          default:
            return Type::kNumber;
        }
      case ExprKind::kAttr:
      case ExprKind::kAggregate:
        return checkRef(e, site, scope);
      case ExprKind::kMatchProb:
        if (site != Site::kReturn) {
          fail(e.pos,
               "prob() is the probability of a whole match and is only allowed in RETURN; "
               "filter matches with PROBABILITY >= p");
        }
        return Type::kNumber;
      case ExprKind::kUnary: {
        const Type t = check(*e.lhs, site, scope);
        if (e.unary == UnaryOp::kNot) {
          requireBool(*e.lhs, t, "NOT");
          return Type::kBool;
        }
        if (t != Type::kNumber && t != Type::kUnknown) {
          fail(e.pos, std::string("unary '-' needs a number, found ") + typeName(t));
        }
        return Type::kNumber;
      }
      case ExprKind::kBinary:
        break;
    }
    const Type l = check(*e.lhs, site, scope);
    const Type r = check(*e.rhs, site, scope);
    switch (e.binary) {
      case BinaryOp::kAnd:
      case BinaryOp::kOr:
        requireBool(*e.lhs, l, e.binary == BinaryOp::kAnd ? "AND" : "OR");
        requireBool(*e.rhs, r, e.binary == BinaryOp::kAnd ? "AND" : "OR");
        return Type::kBool;
      case BinaryOp::kEq:
      case BinaryOp::kNe:
      case BinaryOp::kLt:
      case BinaryOp::kLe:
      case BinaryOp::kGt:
      case BinaryOp::kGe:
        if (l != Type::kUnknown && r != Type::kUnknown && l != r) {
          fail(e.pos, std::string("cannot compare ") + typeName(l) + " with " + typeName(r));
        }
        return Type::kBool;
      default:
        for (const auto& [side, t] : {std::pair{e.lhs.get(), l}, std::pair{e.rhs.get(), r}}) {
          if (t != Type::kNumber && t != Type::kUnknown) {
            fail(side->pos, std::string("arithmetic needs numbers, found ") + typeName(t));
          }
        }
        return Type::kNumber;
    }
  }

  Type checkRef(const Expr& e, Site site, const PatternNode* scope) {
    const AttrRef& ref = e.ref;
    if (site != Site::kFilter) {
      const Variable* v = q_.findVariable(ref.var);
      if (v == nullptr) fail(e.pos, "unknown variable '" + ref.var + "'");
      if (scope != nullptr) {
        std::vector<std::string> bound;
        collectVars(*scope, bound);
        if (std::find(bound.begin(), bound.end(), ref.var) == bound.end()) {
          fail(e.pos, "variable '" + ref.var + "' is not bound inside the " +
                          (site == Site::kSelection ? "selected" : "aggregated") + " expression");
        }
      }
      if (q_.window) return checkWindowRef(e, site);
      if (e.kind == ExprKind::kAggregate) {
        if (v->kind != VarKind::kKleene) {
          fail(e.pos,
               std::string(aggFuncName(e.agg)) + "() needs a Kleene variable ('Type+ " + ref.var +
                   "[]'); '" + ref.var + "' is not one" +
                   (ref.index == IndexKind::kAll ? ""
                                                 : " (aggregates over windows: FROM ... WINDOW)"));
        }
        if (ref.index != IndexKind::kAll) {
          fail(e.pos, std::string(aggFuncName(e.agg)) + "() over the Kleene variable '" + ref.var +
                          "' names it with '[]': write " + aggFuncName(e.agg) + "(" + ref.var +
                          "[]" + (ref.attr.empty() ? "" : "." + ref.attr) + ")");
        }
        return ref.builtin == Builtin::kType ? Type::kUnknown : Type::kNumber;
      }
      if (v->kind == VarKind::kKleene && ref.index == IndexKind::kNone) {
        fail(e.pos, "'" + ref.var + "' is a Kleene variable: write " + ref.var + "[i]." + ref.attr +
                        ", " + ref.var + "[1]." + ref.attr + ", " + ref.var + "[last]." + ref.attr +
                        " or an aggregate such as avg(" + ref.var + "[]." + ref.attr + ")");
      }
      if (v->kind != VarKind::kKleene && ref.index != IndexKind::kNone) {
        fail(e.pos, "'" + ref.var + "' is not a Kleene variable; indexing it needs 'Type+ " +
                        ref.var + "[]' in the pattern");
      }
      if ((ref.index == IndexKind::kCurrent || ref.index == IndexKind::kPrevious) &&
          site != Site::kWhere) {
        fail(e.pos, ref.var + "[i] and " + ref.var +
                        "[i-1] are iteration predicates and only allowed in WHERE");
      }
      if (site == Site::kReturn && v->kind == VarKind::kNegated) {
        fail(e.pos, "negated variable '" + ref.var + "' matches no event and cannot be returned");
      }
      if (site == Site::kPer && v->kind == VarKind::kNegated) {
        fail(e.pos, "negated variable '" + ref.var + "' matches no event and cannot key EMIT PER");
      }
    }
    return builtinType(ref.builtin);
  }

  static Type builtinType(Builtin b) {
    switch (b) {
      case Builtin::kTs:
      case Builtin::kStart:
      case Builtin::kProb:
        return Type::kNumber;
      case Builtin::kType:
        return Type::kString;
      case Builtin::kNone:
        return Type::kUnknown;
    }
    return Type::kUnknown;
  }

  // A window query: its source `Type t` is its one variable; WHERE filters
  // single events; RETURN (required) and HAVING see aggregates of t and the
  // GROUP BY attributes only.
  void runWindow() {
    if (q_.variables.empty()) fail(q_.pattern->pos, "FROM needs a variable: FROM Type t");
    if (q_.where) requireBool(*q_.where, check(*q_.where, Site::kWhere, nullptr), "WHERE");
    if (q_.having) {
      requireBool(*q_.having, check(*q_.having, Site::kWindowHaving, nullptr), "HAVING");
    }
    if (!q_.returns || q_.returns->items.empty()) {
      fail(q_.window->pos,
           "a window query returns its results: write RETURN Name(expr [AS alias], ...)");
    }
    for (const ReturnItem& item : q_.returns->items) {
      check(*item.expr, Site::kWindowReturn, nullptr);
    }
  }

  Type checkWindowRef(const Expr& e, Site site) {
    const AttrRef& ref = e.ref;
    const char* clause = site == Site::kWindowHaving ? "HAVING" : "RETURN";
    if (ref.index != IndexKind::kNone) {
      fail(e.pos, "'" + ref.var + "' is the FROM variable of a window query, not a Kleene " +
                      "variable: write " + (e.kind == ExprKind::kAggregate ? "avg(" : "") +
                      ref.var + "." + (ref.attr.empty() ? "attr" : ref.attr) +
                      (e.kind == ExprKind::kAggregate ? ")" : ""));
    }
    if (e.kind == ExprKind::kAggregate) {
      if (site != Site::kWindowReturn && site != Site::kWindowHaving) {
        fail(e.pos, std::string(aggFuncName(e.agg)) +
                        "() in WHERE: WHERE keeps or drops single events; a condition over "
                        "a window's aggregates goes in HAVING");
      }
      const bool numeric =
          e.agg == AggFunc::kSum || e.agg == AggFunc::kAvg || e.agg == AggFunc::kStddev;
      if (numeric && (ref.builtin == Builtin::kType)) {
        fail(e.pos, std::string(aggFuncName(e.agg)) + "(" + ref.var + "." + ref.attr +
                        ") aggregates numbers, and '" + ref.attr + "' is a string");
      }
      if (e.agg == AggFunc::kCount || numeric) return Type::kNumber;
      return ref.builtin == Builtin::kNone ? Type::kUnknown : builtinType(ref.builtin);
    }
    if (site == Site::kWindowReturn || site == Site::kWindowHaving) {
      const bool grouped =
          ref.builtin == Builtin::kNone &&
          std::find(q_.group_by.begin(), q_.group_by.end(), ref.attr) != q_.group_by.end();
      if (!grouped) {
        fail(e.pos, std::string(clause) + " names " + ref.var + "." + ref.attr +
                        ", which is neither grouped nor aggregated: add GROUP BY " + ref.var + "." +
                        ref.attr + " or aggregate it, as in last(" + ref.var + "." + ref.attr +
                        ")");
      }
      return Type::kUnknown;
    }
    return ref.builtin == Builtin::kNone ? Type::kUnknown : builtinType(ref.builtin);
  }

  static void indexedVars(const Expr& e, std::vector<const Expr*>& out) {
    if (e.kind == ExprKind::kAttr &&
        (e.ref.index == IndexKind::kCurrent || e.ref.index == IndexKind::kPrevious)) {
      out.push_back(&e);
    }
    if (e.lhs) indexedVars(*e.lhs, out);
    if (e.rhs) indexedVars(*e.rhs, out);
  }

  // `i` names the element being added to one Kleene variable; a conjunct
  // indexing two with it would have no single moment to be checked at.
  static void checkIterationVars(const Expr& conjunct) {
    std::vector<const Expr*> refs;
    indexedVars(conjunct, refs);
    for (const Expr* r : refs) {
      if (r->ref.var != refs.front()->ref.var) {
        fail(r->pos, "a predicate may index only one Kleene variable with i; found '" +
                         refs.front()->ref.var + "' and '" + r->ref.var + "'");
      }
    }
  }

  Query& q_;
};

}  // namespace

void checkQuery(Query& query) { Checker(query).run(); }

void checkFilter(const Expr& filter) { Checker::checkFilter(filter); }

}  // namespace cepbus::pattern::parsing
