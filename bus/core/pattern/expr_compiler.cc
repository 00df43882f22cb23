#include "bus/core/pattern/expr_compiler.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>

#include "bus/core/pattern/printer.h"

namespace cepbus::pattern {

// --- BindingLayout ---------------------------------------------------------

BindingLayout BindingLayout::forQuery(const Query& query) {
  BindingLayout layout;
  for (const Variable& v : query.variables) layout.add(v.name, v.kind);
  return layout;
}

size_t BindingLayout::add(std::string_view name, VarKind kind) {
  if (auto slot = slotOf(name)) return *slot;
  vars_.push_back(Entry{std::string(name), kind});
  return vars_.size() - 1;
}

std::optional<size_t> BindingLayout::slotOf(std::string_view name) const {
  for (size_t i = 0; i < vars_.size(); ++i) {
    if (vars_[i].name == name) return i;
  }
  return std::nullopt;
}

// --- Scalar ----------------------------------------------------------------

Value Scalar::toValue() const {
  switch (kind_) {
    case Kind::kMissing:
      return Value();
    case Kind::kBool:
      return Value(b_);
    case Kind::kInt:
      return Value(i_);
    case Kind::kDouble:
      return Value(d_);
    case Kind::kString:
      return Value(s_);
  }
  return Value();
}

// --- evaluation ------------------------------------------------------------

namespace {

bool isTrue(const Scalar& s) { return s.kind() == Scalar::Kind::kBool && s.asBool(); }

// -1, 0, 1; or 2 when the operands cannot be ordered (Missing, mixed kinds,
// NaN), which makes every comparison false.
int order(const Scalar& l, const Scalar& r) {
  constexpr int kUnordered = 2;
  using K = Scalar::Kind;
  if (l.kind() == K::kInt && r.kind() == K::kInt) {
    return l.asInt() < r.asInt() ? -1 : (l.asInt() > r.asInt() ? 1 : 0);
  }
  if (l.isNumber() && r.isNumber()) {
    const double x = l.toDouble(), y = r.toDouble();
    if (std::isnan(x) || std::isnan(y)) return kUnordered;
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (l.kind() == K::kString && r.kind() == K::kString) {
    const int c = l.asString().compare(r.asString());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (l.kind() == K::kBool && r.kind() == K::kBool) {
    return static_cast<int>(l.asBool()) - static_cast<int>(r.asBool());
  }
  return kUnordered;
}

// The index `current` names in a Kleene binding; SIZE_MAX when none.
size_t currentIndex(const SlotBinding& s) {
  if (s.events.empty()) return SIZE_MAX;
  return s.current == SlotBinding::kNewest ? s.events.size() - 1 : s.current;
}

const Event* elementAt(const SlotBinding& s, size_t i) {
  return i < s.events.size() ? s.events[i] : nullptr;
}

Scalar attributeOf(const Event& e, Builtin builtin, Symbol attr) {
  switch (builtin) {
    case Builtin::kTs:
      return Scalar::ofInt(e.ts());
    case Builtin::kStart:
      return Scalar::ofInt(e.start());
    case Builtin::kProb:
      return Scalar::ofDouble(e.probability());
    case Builtin::kType:
      return Scalar::ofString(e.type().name());
    case Builtin::kNone:
      break;
  }
  const Value* v = e.find(attr);
  return v == nullptr ? Scalar() : Scalar::of(*v);
}

}  // namespace

Scalar CompiledExpr::readAttr(const Node& n, Bindings bindings) {
  if (n.slot >= bindings.size()) return Scalar();
  const SlotBinding& s = bindings[n.slot];
  const Event* e = nullptr;
  switch (n.index) {
    case IndexKind::kNone:
      e = s.event;
      break;
    case IndexKind::kCurrent:
      e = elementAt(s, currentIndex(s));
      break;
    case IndexKind::kPrevious: {
      const size_t cur = currentIndex(s);
      e = cur == 0 || cur == SIZE_MAX ? nullptr : elementAt(s, cur - 1);
      break;
    }
    case IndexKind::kAt:
      e = elementAt(s, static_cast<size_t>(n.position - 1));
      break;
    case IndexKind::kLast:
      e = s.events.empty() ? nullptr : s.events.back();
      break;
    case IndexKind::kAll:
      break;  // only inside aggregates, compiled as kAgg
  }
  return e == nullptr ? Scalar() : attributeOf(*e, n.builtin, n.attr);
}

Scalar CompiledExpr::aggregate(const Node& n, Bindings bindings) {
  if (n.slot >= bindings.size()) return Scalar();
  const std::span<const Event* const> events = bindings[n.slot].events;
  if (n.agg == AggFunc::kCount && n.attr.empty() && n.builtin == Builtin::kNone) {
    return Scalar::ofInt(static_cast<int64_t>(events.size()));
  }
  int64_t count = 0;
  int64_t int_sum = 0;
  double double_sum = 0;
  bool all_int = true;
  double mean = 0;  // Welford's running mean and sum of squared deviations, for stddev
  double m2 = 0;
  Scalar best;
  for (const Event* e : events) {
    const Scalar v = e == nullptr ? Scalar() : attributeOf(*e, n.builtin, n.attr);
    if (n.agg == AggFunc::kCount) {
      count += v.isMissing() ? 0 : 1;
      continue;
    }
    if (n.agg == AggFunc::kFirst || n.agg == AggFunc::kLast) {
      if (!v.isMissing() && (best.isMissing() || n.agg == AggFunc::kLast)) best = v;
      continue;
    }
    if (!v.isNumber()) continue;
    ++count;
    double_sum += v.toDouble();
    const double delta = v.toDouble() - mean;
    mean += delta / static_cast<double>(count);
    m2 += delta * (v.toDouble() - mean);
    if (all_int &&
        (v.kind() != Scalar::Kind::kInt || __builtin_add_overflow(int_sum, v.asInt(), &int_sum))) {
      all_int = false;
    }
    if (n.agg == AggFunc::kMin || n.agg == AggFunc::kMax) {
      const int c = best.isMissing() ? 0 : order(v, best);
      if (best.isMissing() || (n.agg == AggFunc::kMin ? c < 0 : c > 0)) best = v;
    }
  }
  switch (n.agg) {
    case AggFunc::kCount:
      return Scalar::ofInt(count);
    case AggFunc::kSum:
      return all_int ? Scalar::ofInt(int_sum) : Scalar::ofDouble(double_sum);
    case AggFunc::kAvg:
      return count == 0 ? Scalar() : Scalar::ofDouble(double_sum / static_cast<double>(count));
    case AggFunc::kMin:
    case AggFunc::kMax:
    case AggFunc::kFirst:
    case AggFunc::kLast:
      return best;
    case AggFunc::kStddev:
      return count < 2 ? Scalar()
                       : Scalar::ofDouble(std::sqrt(m2 / static_cast<double>(count - 1)));
  }
  return Scalar();
}

Scalar CompiledExpr::eval(uint32_t index, Bindings bindings, double probability) const {
  const Node& n = nodes_[index];
  switch (n.op) {
    case Op::kConst:
      return n.constant;
    case Op::kConstString:
      return Scalar::ofString(strings_[n.lhs]);
    case Op::kAttr:
      return readAttr(n, bindings);
    case Op::kAgg:
      return aggregate(n, bindings);
    case Op::kMatchProb:
      return std::isnan(probability) ? Scalar() : Scalar::ofDouble(probability);
    case Op::kNeg: {
      const Scalar v = eval(n.lhs, bindings, probability);
      if (v.kind() == Scalar::Kind::kInt && v.asInt() != INT64_MIN)
        return Scalar::ofInt(-v.asInt());
      if (v.isNumber()) return Scalar::ofDouble(-v.toDouble());
      return Scalar();
    }
    case Op::kNot:
      return Scalar::ofBool(!isTrue(eval(n.lhs, bindings, probability)));
    case Op::kAnd:
      return Scalar::ofBool(isTrue(eval(n.lhs, bindings, probability)) &&
                            isTrue(eval(n.rhs, bindings, probability)));
    case Op::kOr:
      return Scalar::ofBool(isTrue(eval(n.lhs, bindings, probability)) ||
                            isTrue(eval(n.rhs, bindings, probability)));
    case Op::kAdd:
    case Op::kSub:
    case Op::kMul:
    case Op::kDiv:
    case Op::kMod:
      return arithmetic(n.op, eval(n.lhs, bindings, probability),
                        eval(n.rhs, bindings, probability));
    case Op::kEq:
    case Op::kNe:
    case Op::kLt:
    case Op::kLe:
    case Op::kGt:
    case Op::kGe:
      break;
  }
  const int c = order(eval(n.lhs, bindings, probability), eval(n.rhs, bindings, probability));
  if (c == 2) return Scalar::ofBool(false);
  switch (n.op) {
    case Op::kEq:
      return Scalar::ofBool(c == 0);
    case Op::kNe:
      return Scalar::ofBool(c != 0);
    case Op::kLt:
      return Scalar::ofBool(c < 0);
    case Op::kLe:
      return Scalar::ofBool(c <= 0);
    case Op::kGt:
      return Scalar::ofBool(c > 0);
    default:
      return Scalar::ofBool(c >= 0);
  }
}

Scalar CompiledExpr::arithmetic(Op op, const Scalar& l, const Scalar& r) {
  if (!l.isNumber() || !r.isNumber()) return Scalar();
  if (op == Op::kDiv) {
    const double d = r.toDouble();
    return d == 0 ? Scalar() : Scalar::ofDouble(l.toDouble() / d);
  }
  if (l.kind() == Scalar::Kind::kInt && r.kind() == Scalar::Kind::kInt) {
    const int64_t a = l.asInt(), b = r.asInt();
    int64_t out;
    switch (op) {
      case Op::kAdd:
        if (!__builtin_add_overflow(a, b, &out)) return Scalar::ofInt(out);
        break;
      case Op::kSub:
        if (!__builtin_sub_overflow(a, b, &out)) return Scalar::ofInt(out);
        break;
      case Op::kMul:
        if (!__builtin_mul_overflow(a, b, &out)) return Scalar::ofInt(out);
        break;
      default:  // kMod; INT64_MIN % -1 overflows in hardware although the answer is 0
        if (b == 0) return Scalar();
        return Scalar::ofInt(b == -1 ? 0 : a % b);
    }
  }
  const double x = l.toDouble(), y = r.toDouble();
  switch (op) {
    case Op::kAdd:
      return Scalar::ofDouble(x + y);
    case Op::kSub:
      return Scalar::ofDouble(x - y);
    case Op::kMul:
      return Scalar::ofDouble(x * y);
    default:
      return y == 0 ? Scalar() : Scalar::ofDouble(std::fmod(x, y));
  }
}

Scalar CompiledExpr::evaluate(Bindings bindings) const {
  return evaluate(bindings, std::numeric_limits<double>::quiet_NaN());
}

Scalar CompiledExpr::evaluate(Bindings bindings, double match_probability) const {
  if (nodes_.empty()) return Scalar();
  return eval(static_cast<uint32_t>(nodes_.size() - 1), bindings, match_probability);
}

bool CompiledExpr::test(Bindings bindings) const { return isTrue(evaluate(bindings)); }

// --- compilation -----------------------------------------------------------

namespace {

struct CompileError {
  SourcePos pos;
  std::string message;
};

Status toStatus(const CompileError& e) {
  return Status::invalidArgument("line " + std::to_string(e.pos.line) + ", column " +
                                 std::to_string(e.pos.column) + ": " + e.message);
}

}  // namespace

class ExprCompiler {
 public:
  using Op = CompiledExpr::Op;
  using Node = CompiledExpr::Node;

  ExprCompiler(const BindingLayout& layout, CompiledExpr& out) : layout_(layout), out_(out) {}

  void compile(const Expr& e) {
    emit(e);
    out_.text_ = toString(e);
  }

 private:
  uint32_t emit(const Expr& e) {
    Node n;
    switch (e.kind) {
      case ExprKind::kLiteral:
        if (e.literal.kind() == Value::Kind::kString) {
          n.op = Op::kConstString;
          n.lhs = static_cast<uint32_t>(out_.strings_.size());
          out_.strings_.push_back(e.literal.asString());
        } else {
          n.op = Op::kConst;
          n.constant = Scalar::of(e.literal);
        }
        break;
      case ExprKind::kAttr:
      case ExprKind::kAggregate:
        reference(e, n);
        break;
      case ExprKind::kMatchProb:
        n.op = Op::kMatchProb;
        break;
      case ExprKind::kUnary:
        n.op = e.unary == UnaryOp::kNeg ? Op::kNeg : Op::kNot;
        n.lhs = emit(*e.lhs);
        break;
      case ExprKind::kBinary:
        n.op = binaryOp(e.binary);
        n.lhs = emit(*e.lhs);
        n.rhs = emit(*e.rhs);
        break;
    }
    out_.nodes_.push_back(n);
    return static_cast<uint32_t>(out_.nodes_.size() - 1);
  }

  static Op binaryOp(BinaryOp op) {
    switch (op) {
      case BinaryOp::kAdd:
        return Op::kAdd;
      case BinaryOp::kSub:
        return Op::kSub;
      case BinaryOp::kMul:
        return Op::kMul;
      case BinaryOp::kDiv:
        return Op::kDiv;
      case BinaryOp::kMod:
        return Op::kMod;
      case BinaryOp::kEq:
        return Op::kEq;
      case BinaryOp::kNe:
        return Op::kNe;
      case BinaryOp::kLt:
        return Op::kLt;
      case BinaryOp::kLe:
        return Op::kLe;
      case BinaryOp::kGt:
        return Op::kGt;
      case BinaryOp::kGe:
        return Op::kGe;
      case BinaryOp::kAnd:
        return Op::kAnd;
      case BinaryOp::kOr:
        return Op::kOr;
    }
    return Op::kAnd;
  }

  void reference(const Expr& e, Node& n) {
    const AttrRef& ref = e.ref;
    const std::optional<size_t> slot = layout_.slotOf(ref.var);
    if (!slot) {
      throw CompileError{e.pos, ref.var.empty()
                                    ? "bare attribute '" + ref.attr + "' needs a variable"
                                    : "variable '" + ref.var + "' is not in the binding layout"};
    }
    const bool kleene = layout_.kindOf(*slot) == VarKind::kKleene;
    if (e.kind == ExprKind::kAggregate) {
      if (!kleene) {
        throw CompileError{e.pos, std::string(aggFuncName(e.agg)) + "() over '" + ref.var +
                                      "', which is not a Kleene variable"};
      }
      n.op = Op::kAgg;
      n.agg = e.agg;
    } else {
      if (kleene != (ref.index != IndexKind::kNone)) {
        throw CompileError{e.pos, kleene ? "Kleene variable '" + ref.var + "' needs an index"
                                         : "variable '" + ref.var + "' cannot be indexed"};
      }
      n.op = Op::kAttr;
    }
    n.slot = static_cast<uint32_t>(*slot);
    n.index = ref.index;
    n.position = ref.position;
    n.builtin = ref.builtin;
    if (ref.builtin == Builtin::kNone && !ref.attr.empty()) n.attr = Symbol::intern(ref.attr);
  }

  const BindingLayout& layout_;
  CompiledExpr& out_;
};

Result<CompiledExpr> compileExpr(const Expr& expr, const BindingLayout& layout) {
  CompiledExpr out;
  try {
    ExprCompiler(layout, out).compile(expr);
  } catch (const CompileError& e) {
    return toStatus(e);
  } catch (const std::exception& e) {  // a full symbol table; engines call this across the ABI
    return Status::internal(std::string("compiling '") + toString(expr) + "': " + e.what());
  }
  return out;
}

// --- conjuncts and RETURN --------------------------------------------------

namespace {

void collectRefs(const Expr& e, std::vector<const Expr*>& out) {
  if (e.kind == ExprKind::kAttr || e.kind == ExprKind::kAggregate) out.push_back(&e);
  if (e.lhs) collectRefs(*e.lhs, out);
  if (e.rhs) collectRefs(*e.rhs, out);
}

}  // namespace

bool Conjunct::test(Bindings bindings) const {
  if (iteration_slot) {
    if (*iteration_slot >= bindings.size()) return true;
    const size_t cur = currentIndex(bindings[*iteration_slot]);
    if (cur == SIZE_MAX || (uses_previous && cur == 0)) return true;
  }
  return expr.test(bindings);
}

Result<std::vector<Conjunct>> compileConjuncts(const ExprPtr& where, const BindingLayout& layout) {
  constexpr size_t kMaxSlots = 64;
  std::vector<Conjunct> out;
  for (const ExprPtr& c : splitConjuncts(where)) {
    Result<CompiledExpr> compiled = compileExpr(*c, layout);
    if (!compiled.isOk()) return compiled.status();
    Conjunct conj;
    conj.source = c;
    conj.expr = std::move(compiled).value();
    std::vector<const Expr*> refs;
    collectRefs(*c, refs);
    for (const Expr* r : refs) {
      const size_t slot = *layout.slotOf(r->ref.var);
      if (slot >= kMaxSlots) {
        return Status::invalidArgument("line " + std::to_string(r->pos.line) + ", column " +
                                       std::to_string(r->pos.column) + ": variable '" + r->ref.var +
                                       "' has slot " + std::to_string(slot) +
                                       "; conjuncts support slots below 64");
      }
      if (std::find(conj.slots.begin(), conj.slots.end(), slot) == conj.slots.end()) {
        conj.slots.push_back(slot);
      }
      conj.slot_mask |= uint64_t{1} << slot;
      if (r->kind == ExprKind::kAttr &&
          (r->ref.index == IndexKind::kCurrent || r->ref.index == IndexKind::kPrevious)) {
        if (conj.iteration_slot && *conj.iteration_slot != slot) {
          return Status::invalidArgument("line " + std::to_string(r->pos.line) + ", column " +
                                         std::to_string(r->pos.column) +
                                         ": a predicate may index only one Kleene variable with i");
        }
        conj.iteration_slot = slot;
        conj.uses_previous |= r->ref.index == IndexKind::kPrevious;
      }
    }
    std::sort(conj.slots.begin(), conj.slots.end());
    out.push_back(std::move(conj));
  }
  return out;
}

void CompiledReturn::apply(Bindings bindings, double probability, EventBuilder& builder) const {
  for (const Item& item : items) {
    const Scalar v = item.expr.evaluate(bindings, probability);
    if (!v.isMissing()) builder.set(item.name, v.toValue());
  }
}

Result<CompiledReturn> compileReturn(const ReturnClause& clause, const BindingLayout& layout) {
  CompiledReturn out;
  try {
    out.type = Symbol::intern(clause.type);
    for (const ReturnItem& item : clause.items) {
      Result<CompiledExpr> compiled = compileExpr(*item.expr, layout);
      if (!compiled.isOk()) return compiled.status();
      out.items.push_back({Symbol::intern(item.name), std::move(compiled).value()});
    }
  } catch (const std::exception& e) {
    return Status::internal(std::string("compiling RETURN ") + clause.type + ": " + e.what());
  }
  return out;
}

}  // namespace cepbus::pattern
