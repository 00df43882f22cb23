#pragma once

// The AST of the cepbus pattern language: one tree shared by every CEP engine
// (NFA, event algebra, Petri net). The grammar is in docs/pattern-language.md;
// parser.h turns text into a Query, printer.h turns
// a Query back into canonical text, expr_compiler.h compiles expressions.
//
// Each pattern operator has its own PatternKind, so an engine walks the tree
// and rejects, naming the operator (operatorName()), what it does not support.
// Names in the tree are plain strings as the author wrote them; engines
// intern them (Symbol::intern) when they build their own model.
//
// Ownership and threads: nodes are immutable once parsed and shared through
// shared_ptr<const ...>, so a Query is cheap to copy and safe to read from any
// thread.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/api.h"
#include "bus/core/value.h"

namespace cepbus::pattern {

// 1-based line and column of the first character of a token or node.
struct CEPBUS_API SourcePos {
  int line = 1;
  int column = 1;
};

// ---------------------------------------------------------------------------
// Expressions: WHERE, RETURN, selection and aggregation predicates, filters.

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

enum class ExprKind : uint8_t {
  kLiteral,    // 10, 10.5, 'IBM', "IBM", true, false
  kAttr,       // a.price, b[i].price, b[i-1].price, b[1].price, b[last].price; price in a filter
  kAggregate,  // count(b[]), sum(b[].price), avg, ...; in a window query count(t), avg(t.x)
  kUnary,      // -x, NOT x
  kBinary,     // arithmetic, comparison, AND, OR
  kMatchProb,  // prob(): the probability of the whole match; RETURN only
};

enum class UnaryOp : uint8_t { kNeg, kNot };

enum class BinaryOp : uint8_t {
  // arithmetic
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMod,
  // comparison
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
  // logic
  kAnd,
  kOr,
};

// Which element(s) of a Kleene variable a reference names.
enum class IndexKind : uint8_t {
  kNone,      // a.price: a single (or negated) variable; also every attribute of a filter
  kCurrent,   // b[i].price: the element being added to b (iteration predicate)
  kPrevious,  // b[i-1].price: the element before it
  kAt,        // b[3].price: the position-th element, 1-based (AttrRef::position)
  kLast,      // b[last].price
  kAll,       // b[].price: every element; only as an aggregate's argument
  // An aggregate's argument in a window query is t.price (kNone): every
  // WHERE-passing event of the window and group.
};

// Attributes every event has, read from the Event rather than its attribute
// list. A user attribute of the same name is shadowed by the built-in.
enum class Builtin : uint8_t {
  kNone,   // an ordinary attribute
  kTs,     // ts: Event::ts() (the end of its interval), int
  kStart,  // start: Event::start(), int
  kProb,   // prob: Event::probability(), double
  kType,   // type: the event type's name, string
};

// stddev is the sample standard deviation; first and last are the values of
// the earliest and the latest event that has the attribute.
enum class AggFunc : uint8_t { kCount, kSum, kAvg, kMin, kMax, kStddev, kFirst, kLast };

// "count", "sum", "avg", "min", "max", "stddev", "first", "last".
CEPBUS_API const char* aggFuncName(AggFunc f);

// var.attr, var[index].attr or, in a content filter, a bare attr (var empty).
struct CEPBUS_API AttrRef {
  std::string var;
  IndexKind index = IndexKind::kNone;
  int64_t position = 0;  // IndexKind::kAt only
  std::string attr;      // empty only for count(b[])
  Builtin builtin = Builtin::kNone;
};

struct CEPBUS_API Expr {
  ExprKind kind = ExprKind::kLiteral;
  SourcePos pos;
  Value literal;                     // kLiteral
  AttrRef ref;                       // kAttr; kAggregate (index kAll; attr empty for count)
  AggFunc agg = AggFunc::kCount;     // kAggregate
  UnaryOp unary = UnaryOp::kNeg;     // kUnary
  BinaryOp binary = BinaryOp::kAdd;  // kBinary
  ExprPtr lhs;                       // kUnary operand; kBinary left
  ExprPtr rhs;                       // kBinary right
};

// The top-level AND conjuncts of `e`, left to right ("a AND (b AND c)" gives
// three); `e` itself when it is not an AND. Empty for a null `e`.
CEPBUS_API std::vector<ExprPtr> splitConjuncts(const ExprPtr& e);

// The distinct variable names `e` mentions, in order of first mention.
CEPBUS_API std::vector<std::string> variablesOf(const Expr& e);

// ---------------------------------------------------------------------------
// Pattern expressions.

struct PatternNode;
using PatternPtr = std::shared_ptr<const PatternNode>;

enum class PatternKind : uint8_t {
  kEvent,            // Stock a, or Stock alone (an unnamed element)
  kKleene,           // Stock+ b[] / Stock* b[]: inside SEQ(...) or as AGG's operand
  kNot,              // NOT(Stock c): SASE+ negation, inside SEQ between positives
  kSeq,              // SEQ(e, ...) or e ; e ; ...   sequence, n-ary (P1 sequence)
  kAnd,              // AND(e, ...) or e + e + ...   conjunction, n-ary
  kOr,               // OR(e, ...) or e | e | ...    disjunction, n-ary
  kConcat,           // e ~ e                        concatenation (P1), binary
  kConcurrent,       // e || e                       concurrency (P1), binary
  kNegation,         // e - e                        P1 negation: left without right inside it
  kIteration,        // e*                           P1 iteration, unary
  kSelection,        // e[predicate]                 P1 selection, unary
  kAggregation,      // AGG(e, predicate)            P1 aggregation, unary
  kTimeRestriction,  // WITHIN(e, n)                 P1 time restriction, unary
};

struct CEPBUS_API PatternNode {
  PatternKind kind = PatternKind::kEvent;
  SourcePos pos;
  // kEvent, kKleene, kNot: the event type and the variable (empty when
  // unnamed; a kKleene always has one).
  std::string type;
  std::string var;
  bool star = false;  // kKleene: Type* (zero or more) rather than Type+ (one or more)
  // kSeq/kAnd/kOr: one or more operands in order; binary kinds: exactly two
  // (left, right); kIteration/kSelection/kAggregation/kTimeRestriction: one.
  std::vector<PatternPtr> children;
  ExprPtr predicate;   // kSelection, kAggregation
  int64_t window = 0;  // kTimeRestriction: inclusive bound on end - start, > 0
};

// "sequence ';'", "concatenation '~'", ... for "engine X does not support ..."
// messages.
CEPBUS_API const char* operatorName(PatternKind kind);

// ---------------------------------------------------------------------------
// Queries.

enum class Strategy : uint8_t { kStrictContiguity, kSkipTillNextMatch, kSkipTillAnyMatch };

// Unspecified lets each engine pick its own default.
enum class Context : uint8_t { kUnspecified, kRecent, kUnrestricted };

enum class VarKind : uint8_t {
  kSingle,   // Stock a
  kKleene,   // Stock+ b[] / Stock* b[]
  kNegated,  // NOT(Stock c)
};

// A variable bound by the pattern. Query::variables lists them in pattern
// order (left to right in the text), which is also the default slot order of
// a BindingLayout (expr_compiler.h).
struct CEPBUS_API Variable {
  std::string name;
  std::string type;
  VarKind kind = VarKind::kSingle;
  SourcePos pos;
};

// One attribute of the composite event: `a.symbol` (named a_symbol) or
// `expr AS name`.
struct CEPBUS_API ReturnItem {
  ExprPtr expr;
  std::string name;
};

// The attribute name RETURN gives `e` when no `AS name` is written:
// a.symbol -> a_symbol, b[1].price -> b_1_price, b[last].price ->
// b_last_price, sum(b[].price) -> sum_b_price, count(b[]) -> count_b,
// prob() -> prob.
// Empty for any other expression (which then needs AS).
CEPBUS_API std::string defaultReturnName(const Expr& e);

struct CEPBUS_API ReturnClause {
  std::string type;  // the composite event type
  std::vector<ReturnItem> items;
  SourcePos pos;
};

// WINDOW TUMBLING L | SLIDING L EVERY S | SESSION GAP G, aligned to ts 0:
// tumbling windows are [kL, (k+1)L), sliding ones [kS, kS + L) (S <= L), a
// session of a group ends when its next event is more than G after its last.
enum class WindowKind : uint8_t { kTumbling, kSliding, kSession };

struct CEPBUS_API WindowSpec {
  WindowKind kind = WindowKind::kTumbling;
  int64_t length = 0;  // L, or the gap G of a session; > 0, in ts units
  int64_t every = 0;   // S: the slide; equal to L for tumbling, 0 for a session
  // EMIT EVERY d: a partial result at every multiple of d strictly inside a
  // window (after its first event); 0 when absent (final results only).
  int64_t emit_every = 0;
  SourcePos pos;
};

// The attribute EMIT EVERY sets on each result of a window query: true on a
// partial result, false on the final one.
inline constexpr const char* kPartialAttribute = "partial";

// "tumbling", "sliding", "session".
CEPBUS_API const char* windowKindName(WindowKind k);

struct CEPBUS_API Query {
  // A pattern query: the pattern. A window query (FROM Type t WINDOW ...):
  // the single element `Type t` whose events the windows aggregate.
  PatternPtr pattern;
  ExprPtr where;                  // null when there is no WHERE
  std::optional<int64_t> within;  // WITHIN n: ts(last) - ts(first) <= n, n > 0
  // PROBABILITY >= p, p in [0, 1]: a match is kept iff its probability (the
  // product of its events' probabilities) is at least p.
  std::optional<double> min_probability;
  std::vector<std::string> partition_by;  // PARTITION BY attr, ...
  Strategy strategy = Strategy::kSkipTillAnyMatch;
  Context context = Context::kUnspecified;
  std::optional<ReturnClause> returns;
  std::vector<Variable> variables;  // every named variable, in pattern order
  // A window query only (docs/pattern-language.md, "Windows"): the window,
  // the grouping attributes of the FROM variable (GROUP BY t.a, t.b gives
  // {"a", "b"}) and the HAVING condition (null when absent).
  std::optional<WindowSpec> window;
  std::vector<std::string> group_by;
  ExprPtr having;

  // The variable called `name`, or nullptr.
  const Variable* findVariable(std::string_view name) const;
};

// "strict_contiguity", "skip_till_next_match", "skip_till_any_match".
CEPBUS_API const char* strategyName(Strategy s);
// "recent", "unrestricted", "" for unspecified.
CEPBUS_API const char* contextName(Context c);

}  // namespace cepbus::pattern
