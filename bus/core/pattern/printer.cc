#include "bus/core/pattern/printer.h"

#include <cmath>

namespace cepbus::pattern {
namespace {

// Binding strength of an expression's top operator; see the grammar.
enum Prec : int {
  kOrPrec = 1,
  kAndPrec,
  kNotPrec,
  kComparePrec,
  kAddPrec,
  kMulPrec,
  kUnaryPrec,
  kPrimaryPrec,
};

int precedence(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      // A negative number prints with its sign, like a unary minus.
      return e.literal.isNumber() && std::signbit(e.literal.toDouble()) ? kUnaryPrec : kPrimaryPrec;
    case ExprKind::kAttr:
    case ExprKind::kAggregate:
    case ExprKind::kMatchProb:
      return kPrimaryPrec;
    case ExprKind::kUnary:
      return e.unary == UnaryOp::kNot ? kNotPrec : kUnaryPrec;
    case ExprKind::kBinary:
      break;
  }
  switch (e.binary) {
    case BinaryOp::kOr:
      return kOrPrec;
    case BinaryOp::kAnd:
      return kAndPrec;
    case BinaryOp::kAdd:
    case BinaryOp::kSub:
      return kAddPrec;
    case BinaryOp::kMul:
    case BinaryOp::kDiv:
    case BinaryOp::kMod:
      return kMulPrec;
    default:
      return kComparePrec;
  }
}

const char* binaryText(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kEq:
      return "=";
    case BinaryOp::kNe:
      return "!=";
    case BinaryOp::kLt:
      return "<";
    case BinaryOp::kLe:
      return "<=";
    case BinaryOp::kGt:
      return ">";
    case BinaryOp::kGe:
      return ">=";
    case BinaryOp::kAnd:
      return "AND";
    case BinaryOp::kOr:
      return "OR";
  }
  return "?";
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\'':
        out += "\\'";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += c;
    }
  }
  return out + "'";
}

std::string literalText(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kString:
      return quote(v.asString());
    case Value::Kind::kBool:
      return v.asBool() ? "true" : "false";
    default:
      return v.toString();  // ints as digits, doubles always with '.' or 'e'
  }
}

std::string refText(const AttrRef& r) {
  std::string out = r.var;
  switch (r.index) {
    case IndexKind::kNone:
      break;
    case IndexKind::kCurrent:
      out += "[i]";
      break;
    case IndexKind::kPrevious:
      out += "[i-1]";
      break;
    case IndexKind::kAt:
      out += "[" + std::to_string(r.position) + "]";
      break;
    case IndexKind::kLast:
      out += "[last]";
      break;
    case IndexKind::kAll:
      out += "[]";
      break;
  }
  if (r.attr.empty()) return out;
  return out.empty() ? r.attr : out + "." + r.attr;
}

std::string wrap(const Expr& e, bool parens) {
  return parens ? "(" + toString(e) + ")" : toString(e);
}

}  // namespace

std::string toString(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return literalText(e.literal);
    case ExprKind::kAttr:
      return refText(e.ref);
    case ExprKind::kAggregate:
      return std::string(aggFuncName(e.agg)) + "(" + refText(e.ref) + ")";
    case ExprKind::kMatchProb:
      return "prob()";
    case ExprKind::kUnary: {
      if (e.unary == UnaryOp::kNot) return "NOT " + wrap(*e.lhs, precedence(*e.lhs) < kNotPrec);
      // A nested minus is parenthesized: "--" would start a comment.
      const std::string operand = wrap(*e.lhs, precedence(*e.lhs) <= kUnaryPrec);
      return "-" + operand;
    }
    case ExprKind::kBinary:
      break;
  }
  const int p = precedence(e);
  // Left-associative: the right operand needs parentheses at equal strength;
  // comparisons do not chain, so both sides do.
  const bool left_parens = precedence(*e.lhs) < p || (p == kComparePrec && precedence(*e.lhs) == p);
  const bool right_parens = precedence(*e.rhs) <= p;
  return wrap(*e.lhs, left_parens) + " " + binaryText(e.binary) + " " + wrap(*e.rhs, right_parens);
}

std::string toString(const PatternNode& p) {
  auto list = [&](const char* name) {
    std::string out = std::string(name) + "(";
    for (size_t i = 0; i < p.children.size(); ++i) {
      if (i > 0) out += ", ";
      out += toString(*p.children[i]);
    }
    return out + ")";
  };
  auto infix = [&](const char* op) {
    return "(" + toString(*p.children[0]) + " " + op + " " + toString(*p.children[1]) + ")";
  };
  // The operand of a postfix operator must print as one primary.
  auto operand = [&]() {
    const PatternNode& c = *p.children[0];
    const std::string text = toString(c);
    return c.kind == PatternKind::kEvent && !c.var.empty() ? "(" + text + ")" : text;
  };
  switch (p.kind) {
    case PatternKind::kEvent:
      return p.var.empty() ? p.type : p.type + " " + p.var;
    case PatternKind::kKleene:
      return p.type + (p.star ? "* " : "+ ") + p.var + "[]";
    case PatternKind::kNot:
      return "NOT(" + (p.var.empty() ? p.type : p.type + " " + p.var) + ")";
    case PatternKind::kSeq:
      return list("SEQ");
    case PatternKind::kAnd:
      return list("AND");
    case PatternKind::kOr:
      return list("OR");
    case PatternKind::kConcat:
      return infix("~");
    case PatternKind::kConcurrent:
      return infix("||");
    case PatternKind::kNegation:
      return infix("-");
    case PatternKind::kIteration:
      return operand() + "*";
    case PatternKind::kSelection:
      return operand() + "[" + toString(*p.predicate) + "]";
    case PatternKind::kAggregation:
      return "AGG(" + toString(*p.children[0]) + ", " + toString(*p.predicate) + ")";
    case PatternKind::kTimeRestriction:
      return "WITHIN(" + toString(*p.children[0]) + ", " + std::to_string(p.window) + ")";
  }
  return "?";
}

namespace {

std::string returnText(const ReturnClause& r) {
  std::string out = "\nRETURN " + r.type + "(";
  for (size_t i = 0; i < r.items.size(); ++i) {
    const ReturnItem& item = r.items[i];
    if (i > 0) out += ", ";
    out += toString(*item.expr);
    if (item.name != defaultReturnName(*item.expr)) out += " AS " + item.name;
  }
  return out + ")";
}

std::string windowQueryText(const Query& q) {
  std::string out = "FROM " + toString(*q.pattern);
  if (q.where) out += "\nWHERE " + toString(*q.where);
  const WindowSpec& w = *q.window;
  switch (w.kind) {
    case WindowKind::kTumbling:
      out += "\nWINDOW TUMBLING " + std::to_string(w.length);
      break;
    case WindowKind::kSliding:
      out += "\nWINDOW SLIDING " + std::to_string(w.length) + " EVERY " + std::to_string(w.every);
      break;
    case WindowKind::kSession:
      out += "\nWINDOW SESSION GAP " + std::to_string(w.length);
      break;
  }
  for (size_t i = 0; i < q.group_by.size(); ++i) {
    out += (i > 0 ? ", " : "\nGROUP BY ") + q.pattern->var + "." + q.group_by[i];
  }
  if (q.having) out += "\nHAVING " + toString(*q.having);
  if (q.returns) out += returnText(*q.returns);
  if (w.emit_every > 0) out += "\nEMIT EVERY " + std::to_string(w.emit_every);
  return out;
}

}  // namespace

std::string toString(const Query& q) {
  if (q.window) return windowQueryText(q);
  std::string out = "PATTERN " + toString(*q.pattern);
  if (q.where) out += "\nWHERE " + toString(*q.where);
  if (q.within) out += "\nWITHIN " + std::to_string(*q.within);
  if (q.min_probability) out += "\nPROBABILITY >= " + literalText(Value(*q.min_probability));
  if (!q.partition_by.empty()) {
    out += "\nPARTITION BY ";
    for (size_t i = 0; i < q.partition_by.size(); ++i) {
      out += (i > 0 ? ", " : "") + q.partition_by[i];
    }
  }
  out += std::string("\nSTRATEGY ") + strategyName(q.strategy);
  if (q.context != Context::kUnspecified) out += std::string("\nCONTEXT ") + contextName(q.context);
  if (q.returns) out += returnText(*q.returns);
  return out;
}

}  // namespace cepbus::pattern
