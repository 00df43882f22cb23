#pragma once

// Compiled expressions: WHERE conjuncts, RETURN attributes and content
// filters turned into typed evaluators that engines run on the hot path.
//
// Compilation resolves every name once — variables to slots of a
// BindingLayout, attribute names to Symbols, built-ins (ts, start, prob, type)
// to direct reads of the Event — into a flat node array. Evaluation looks up
// no string, touches no map and allocates nothing.
//
// Run-time semantics (two-valued logic):
// - A missing attribute, an unbound variable, an index outside a Kleene
//   binding, a type mismatch (string vs number, arithmetic on a string or
//   bool) or a division by zero makes the value Missing. Arithmetic on Missing
//   is Missing; every comparison with a Missing operand is false (so are
//   `=` and `!=`); NOT of a false comparison is true. Nothing ever throws.
// - Numbers compare across int and double (int/int exactly). `/` always
//   yields a double; `%` on two ints is the integer remainder, else fmod.
//   Integer + - * that overflow fall back to double.
// - count(b[]) is the number of elements of b; sum/avg/min/max/stddev skip
//   elements whose attribute is missing or not a number; sum of nothing is 0,
//   avg, min and max of nothing are Missing, stddev (the sample standard
//   deviation) of fewer than two is Missing. sum of ints stays an int.
//   first/last are the first/last element's value where it is not missing.
// - A value used as a condition is true only if it is the bool `true`.
//
// Thread safety: compiled objects are immutable; evaluate them from any
// number of threads at once.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/api.h"
#include "bus/core/event.h"
#include "bus/core/pattern/ast.h"
#include "bus/core/status.h"
#include "bus/core/symbol.h"

namespace cepbus::pattern {

// Which slot each variable occupies. The engine chooses the order (forQuery
// takes the pattern order); compiled expressions then read slot numbers only.
// Not thread-safe while being built; read-only afterwards.
class CEPBUS_API BindingLayout {
 public:
  BindingLayout() = default;
  // Slot i is query.variables[i].
  static BindingLayout forQuery(const Query& query);

  // Adds a variable and returns its slot; an existing name keeps its slot.
  size_t add(std::string_view name, VarKind kind);
  std::optional<size_t> slotOf(std::string_view name) const;
  VarKind kindOf(size_t slot) const { return vars_[slot].kind; }
  const std::string& nameOf(size_t slot) const { return vars_[slot].name; }
  size_t size() const { return vars_.size(); }

 private:
  struct Entry {
    std::string name;
    VarKind kind;
  };
  std::vector<Entry> vars_;
};

// What one slot is bound to while an engine evaluates. Not owning: the events
// must outlive the evaluation.
struct CEPBUS_API SlotBinding {
  static constexpr size_t kNewest = SIZE_MAX;

  const Event* event = nullptr;          // a single or negated variable
  std::span<const Event* const> events;  // a Kleene variable, in stream order
  // The element b[i] names; b[i-1] is the one before. kNewest means the last
  // element of `events` — the one just added when an engine extends b.
  size_t current = kNewest;
};

// One SlotBinding per slot of the layout the expression was compiled against
// (a shorter span leaves the remaining slots unbound).
using Bindings = std::span<const SlotBinding>;

// The value of an expression. Strings are borrowed from the events or from
// the compiled expression; a Scalar must not outlive either.
class CEPBUS_API Scalar {
 public:
  enum class Kind : uint8_t { kMissing, kBool, kInt, kDouble, kString };

  Scalar() = default;
  static Scalar ofBool(bool v) {
    Scalar s(Kind::kBool);
    s.b_ = v;
    return s;
  }
  static Scalar ofInt(int64_t v) {
    Scalar s(Kind::kInt);
    s.i_ = v;
    return s;
  }
  static Scalar ofDouble(double v) {
    Scalar s(Kind::kDouble);
    s.d_ = v;
    return s;
  }
  static Scalar ofString(std::string_view v) {
    Scalar s(Kind::kString);
    s.s_ = v;
    return s;
  }
  // Borrows the string of a string Value; null becomes Missing.
  static Scalar of(const Value& v) {
    switch (v.kind()) {
      case Value::Kind::kBool:
        return ofBool(v.asBool());
      case Value::Kind::kInt:
        return ofInt(v.asInt());
      case Value::Kind::kDouble:
        return ofDouble(v.asDouble());
      case Value::Kind::kString:
        return ofString(v.asString());
      case Value::Kind::kNull:
        break;
    }
    return Scalar();
  }

  Kind kind() const { return kind_; }
  bool isMissing() const { return kind_ == Kind::kMissing; }
  bool isNumber() const { return kind_ == Kind::kInt || kind_ == Kind::kDouble; }
  bool asBool() const { return b_; }
  int64_t asInt() const { return i_; }
  double asDouble() const { return d_; }
  std::string_view asString() const { return s_; }
  // The numeric value as a double; 0 when not a number.
  double toDouble() const {
    return kind_ == Kind::kInt ? static_cast<double>(i_) : (kind_ == Kind::kDouble ? d_ : 0);
  }
  // An owning Value (null for Missing).
  Value toValue() const;

 private:
  explicit Scalar(Kind kind) : kind_(kind) {}

  Kind kind_ = Kind::kMissing;
  bool b_ = false;
  int64_t i_ = 0;
  double d_ = 0;
  std::string_view s_;
};

// An expression compiled against a layout.
class CEPBUS_API CompiledExpr {
 public:
  // The expression's value over `bindings` (Missing per the rules above;
  // always Missing for a default-constructed CompiledExpr).
  // prob() reads as Missing: it exists only in RETURN (see CompiledReturn).
  Scalar evaluate(Bindings bindings) const;
  // The same, with prob() reading `match_probability`.
  Scalar evaluate(Bindings bindings, double match_probability) const;
  // True iff the expression evaluates to the bool `true`.
  bool test(Bindings bindings) const;
  // Canonical text of the source expression.
  const std::string& text() const { return text_; }

 private:
  friend class ExprCompiler;

  enum class Op : uint8_t {
    kConst,
    kConstString,
    kAttr,
    kAgg,
    kMatchProb,  // prob(): the evaluation's match probability
    kNeg,
    kNot,
    kAdd,
    kSub,
    kMul,
    kDiv,
    kMod,
    kEq,
    kNe,
    kLt,
    kLe,
    kGt,
    kGe,
    kAnd,
    kOr,
  };
  struct Node {
    Op op = Op::kConst;
    IndexKind index = IndexKind::kNone;  // kAttr, kAgg
    Builtin builtin = Builtin::kNone;    // kAttr, kAgg
    AggFunc agg = AggFunc::kCount;       // kAgg
    uint32_t slot = 0;                   // kAttr, kAgg
    uint32_t lhs = 0;                    // operand; for kConstString, the index in strings_
    uint32_t rhs = 0;
    Symbol attr;
    int64_t position = 0;  // IndexKind::kAt
    Scalar constant;       // kConst (numbers and bools)
  };

  Scalar eval(uint32_t node, Bindings bindings, double probability) const;
  static Scalar readAttr(const Node& n, Bindings bindings);
  static Scalar aggregate(const Node& n, Bindings bindings);
  static Scalar arithmetic(Op op, const Scalar& l, const Scalar& r);

  std::vector<Node> nodes_;  // children before parents; the root is last
  std::vector<std::string> strings_;
  std::string text_;
};

// Compiles `expr` against `layout`. Fails (naming line and column) on a
// variable the layout lacks, an index that does not fit the variable's kind
// (b[i] on a single variable, a.x on a Kleene one, an aggregate over a single
// variable), or a bare attribute in a query expression.
CEPBUS_API Result<CompiledExpr> compileExpr(const Expr& expr, const BindingLayout& layout);

// A top-level AND conjunct of a WHERE clause, compiled, with what an engine
// needs to check it as soon as every variable it names is bound.
struct CEPBUS_API Conjunct {
  ExprPtr source;
  CompiledExpr expr;
  std::vector<size_t> slots;  // the slots it mentions, ascending
  uint64_t slot_mask = 0;     // bit s set for each slot s in `slots`
  // The Kleene slot it indexes with b[i]/b[i-1], if any: an iteration
  // predicate, checked for every element an engine adds to that variable.
  std::optional<size_t> iteration_slot;
  bool uses_previous = false;  // mentions b[i-1]

  // expr.test(bindings), except that an iteration predicate holds vacuously
  // when its Kleene slot has no element, and one using b[i-1] when b[i] is
  // the first element (there is no previous one to compare with).
  bool test(Bindings bindings) const;
};

// Splits `where` (may be null: no conjuncts) into top-level AND conjuncts and
// compiles each. Layouts of up to 64 slots (slot_mask is 64 bits).
CEPBUS_API Result<std::vector<Conjunct>> compileConjuncts(const ExprPtr& where,
                                                          const BindingLayout& layout);

// A compiled RETURN clause: the composite event's type and attributes.
struct CEPBUS_API CompiledReturn {
  struct Item {
    Symbol name;
    CompiledExpr expr;
  };
  Symbol type;
  std::vector<Item> items;

  // Sets every item that is not Missing on `builder` (which the engine
  // created with `type`, adding constituents, the interval and the
  // probability itself); prob() reads `probability`, the match's.
  void apply(Bindings bindings, double probability, EventBuilder& builder) const;
};

CEPBUS_API Result<CompiledReturn> compileReturn(const ReturnClause& clause,
                                                const BindingLayout& layout);

}  // namespace cepbus::pattern
