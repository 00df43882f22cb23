#include "bus/core/pattern/expr_parser.h"

#include <string>
#include <utility>

namespace cepbus::pattern::parsing {
namespace {

std::shared_ptr<Expr> newExpr(ExprKind kind, SourcePos pos) {
  auto e = std::make_shared<Expr>();
  e->kind = kind;
  e->pos = pos;
  return e;
}

bool comparisonOp(TokenKind k, BinaryOp& op) {
  switch (k) {
    case TokenKind::kEq:
      op = BinaryOp::kEq;
      return true;
    case TokenKind::kNe:
      op = BinaryOp::kNe;
      return true;
    case TokenKind::kLt:
      op = BinaryOp::kLt;
      return true;
    case TokenKind::kLe:
      op = BinaryOp::kLe;
      return true;
    case TokenKind::kGt:
      op = BinaryOp::kGt;
      return true;
    case TokenKind::kGe:
      op = BinaryOp::kGe;
      return true;
    default:
      return false;
  }
}

ExprPtr literal(SourcePos pos, Value v) {
  auto e = newExpr(ExprKind::kLiteral, pos);
  e->literal = std::move(v);
  return e;
}

}  // namespace

Builtin builtinOf(std::string_view attr) {
  if (attr == "ts") return Builtin::kTs;
  if (attr == "start") return Builtin::kStart;
  if (attr == "prob") return Builtin::kProb;
  if (attr == "type") return Builtin::kType;
  return Builtin::kNone;
}

ExprPtr ExprParser::filter() {
  ExprPtr e = expr();
  if (peek().kind != TokenKind::kEnd) expected("an operator or end of input");
  return e;
}

ExprPtr ExprParser::expr() {
  NestingGuard guard(*this);
  return orExpr();
}

ExprPtr ExprParser::binary(BinaryOp op, SourcePos pos, ExprPtr lhs, ExprPtr rhs) {
  auto e = newExpr(ExprKind::kBinary, pos);
  e->binary = op;
  e->lhs = std::move(lhs);
  e->rhs = std::move(rhs);
  return grown(e);
}

ExprPtr ExprParser::orExpr() {
  const SourcePos pos = peek().pos;
  ExprPtr lhs = andExpr();
  while (isKeyword(Keyword::kOr)) {
    take();
    lhs = binary(BinaryOp::kOr, pos, std::move(lhs), andExpr());
  }
  return lhs;
}

ExprPtr ExprParser::andExpr() {
  const SourcePos pos = peek().pos;
  ExprPtr lhs = notExpr();
  while (isKeyword(Keyword::kAnd)) {
    take();
    lhs = binary(BinaryOp::kAnd, pos, std::move(lhs), notExpr());
  }
  return lhs;
}

ExprPtr ExprParser::notExpr() {
  if (!isKeyword(Keyword::kNot)) return comparison();
  NestingGuard guard(*this);
  auto e = newExpr(ExprKind::kUnary, take().pos);
  e->unary = UnaryOp::kNot;
  e->lhs = notExpr();
  return grown(e);
}

ExprPtr ExprParser::comparison() {
  const SourcePos pos = peek().pos;
  ExprPtr lhs = additive();
  BinaryOp op;
  if (!comparisonOp(peek().kind, op)) return lhs;
  take();
  ExprPtr e = binary(op, pos, std::move(lhs), additive());
  if (comparisonOp(peek().kind, op)) {
    fail(peek().pos, "comparisons do not chain: write 'a < b AND b < c'");
  }
  return e;
}

ExprPtr ExprParser::additive() {
  const SourcePos pos = peek().pos;
  ExprPtr lhs = multiplicative();
  while (peek().kind == TokenKind::kPlus || peek().kind == TokenKind::kMinus) {
    const BinaryOp op = take().kind == TokenKind::kPlus ? BinaryOp::kAdd : BinaryOp::kSub;
    lhs = binary(op, pos, std::move(lhs), multiplicative());
  }
  return lhs;
}

ExprPtr ExprParser::multiplicative() {
  const SourcePos pos = peek().pos;
  ExprPtr lhs = unary();
  while (true) {
    BinaryOp op;
    switch (peek().kind) {
      case TokenKind::kStar:
        op = BinaryOp::kMul;
        break;
      case TokenKind::kSlash:
        op = BinaryOp::kDiv;
        break;
      case TokenKind::kPercent:
        op = BinaryOp::kMod;
        break;
      default:
        return lhs;
    }
    take();
    lhs = binary(op, pos, std::move(lhs), unary());
  }
}

ExprPtr ExprParser::unary() {
  if (peek().kind != TokenKind::kMinus) return primaryExpr();
  NestingGuard guard(*this);
  const SourcePos pos = take().pos;
  ExprPtr operand = unary();
  if (operand->kind == ExprKind::kLiteral && operand->literal.isNumber()) {
    auto e = newExpr(ExprKind::kLiteral, pos);
    e->literal = operand->literal.kind() == Value::Kind::kInt ? Value(-operand->literal.asInt())
                                                              : Value(-operand->literal.asDouble());
    return e;
  }
  auto e = newExpr(ExprKind::kUnary, pos);
  e->unary = UnaryOp::kNeg;
  e->lhs = std::move(operand);
  return grown(e);
}

ExprPtr ExprParser::primaryExpr() {
  const Token& t = peek();
  switch (t.kind) {
    case TokenKind::kInt:
      take();
      return literal(t.pos, Value(t.int_value));
    case TokenKind::kDouble:
      take();
      return literal(t.pos, Value(t.double_value));
    case TokenKind::kString:
      take();
      return literal(t.pos, Value(t.text));
    case TokenKind::kLParen: {
      take();
      ExprPtr e = expr();
      expect(TokenKind::kRParen, "an operator or ')'");
      return e;
    }
    case TokenKind::kKeyword:
      if (t.keyword == Keyword::kTrue || t.keyword == Keyword::kFalse) {
        take();
        return literal(t.pos, Value(t.keyword == Keyword::kTrue));
      }
      break;
    case TokenKind::kIdent:
      if (mode_ == Mode::kFilter) return bareAttribute();
      if (peek(1).kind == TokenKind::kLParen && peek(2).kind == TokenKind::kRParen &&
          equalsIgnoreCase(t.text, "prob")) {
        return matchProbability();
      }
      if (peek(1).kind == TokenKind::kLParen) return aggregate();
      return reference();
    default:
      break;
  }
  expected("an expression");
}

ExprPtr ExprParser::bareAttribute() {
  const Token& t = take();
  if (peek().kind == TokenKind::kLParen) {
    fail(peek().pos, "a filter has no functions: '" + t.text + "(' is not allowed");
  }
  if (peek().kind == TokenKind::kDot || peek().kind == TokenKind::kLBracket) {
    fail(peek().pos,
         "a filter names attributes of one event: write '" + t.text + "' without a variable");
  }
  auto e = newExpr(ExprKind::kAttr, t.pos);
  e->ref.attr = t.text;
  e->ref.builtin = builtinOf(t.text);
  return e;
}

ExprPtr ExprParser::reference() {
  const Token& var = take();
  auto e = newExpr(ExprKind::kAttr, var.pos);
  e->ref.var = var.text;
  if (accept(TokenKind::kLBracket)) {
    const Token& idx = peek();
    if (idx.kind == TokenKind::kIdent && idx.text == "i") {
      take();
      e->ref.index = IndexKind::kCurrent;
      if (accept(TokenKind::kMinus)) {
        const Token& one = peek();
        if (one.kind != TokenKind::kInt || one.int_value != 1) {
          expected("1 after 'i-' (b[i-1] is the previous element)");
        }
        take();
        e->ref.index = IndexKind::kPrevious;
      }
    } else if (idx.kind == TokenKind::kIdent && idx.text == "last") {
      take();
      e->ref.index = IndexKind::kLast;
    } else if (idx.kind == TokenKind::kInt) {
      e->ref.position = positiveInt("a Kleene position");
      e->ref.index = IndexKind::kAt;
    } else {
      expected("'i', 'i-1', 'last' or a position");
    }
    expect(TokenKind::kRBracket, "']'");
  }
  if (!accept(TokenKind::kDot)) {
    expected(e->ref.index == IndexKind::kNone ? "'.' or '[' after variable '" + var.text + "'"
                                              : std::string("'.' and an attribute name"));
  }
  e->ref.attr = attributeName();
  e->ref.builtin = builtinOf(e->ref.attr);
  return e;
}

ExprPtr ExprParser::matchProbability() {
  auto e = newExpr(ExprKind::kMatchProb, take().pos);
  take();  // '('
  take();  // ')'
  return e;
}

ExprPtr ExprParser::aggregate() {
  const Token& fn = take();
  auto e = newExpr(ExprKind::kAggregate, fn.pos);
  bool known = false;
  for (AggFunc f : {AggFunc::kCount, AggFunc::kSum, AggFunc::kAvg, AggFunc::kMin, AggFunc::kMax,
                    AggFunc::kStddev, AggFunc::kFirst, AggFunc::kLast}) {
    if (equalsIgnoreCase(fn.text, aggFuncName(f))) {
      e->agg = f;
      known = true;
    }
  }
  if (!known) {
    fail(fn.pos, "unknown function '" + fn.text +
                     "'; expected count, sum, avg, min, max, stddev, first or last");
  }
  take();  // '('
  e->ref.var = identifier("a variable").text;
  if (accept(TokenKind::kLBracket)) {
    expect(TokenKind::kRBracket, "']'");
    e->ref.index = IndexKind::kAll;
  }
  if (accept(TokenKind::kDot)) {
    e->ref.attr = attributeName();
    e->ref.builtin = builtinOf(e->ref.attr);
  } else if (e->agg != AggFunc::kCount) {
    expected(std::string("'.' and an attribute: ") + aggFuncName(e->agg) + "(" + e->ref.var +
             (e->ref.index == IndexKind::kAll ? "[]" : "") + ".attr)");
  }
  expect(TokenKind::kRParen, "')'");
  return e;
}

}  // namespace cepbus::pattern::parsing
