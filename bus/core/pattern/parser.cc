// Recursive-descent parser and semantic checker of the pattern language.
//
// Parsing is control plane: errors are thrown inside as ParseError and turned
// into a Status at the two entry points. The grammar, with its precedence
// levels, is in docs/pattern-language.md; each parse function below names the
// rule it implements.

#include "bus/core/pattern/parser.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bus/core/pattern/lexer.h"
#include "bus/core/pattern/printer.h"

namespace cepbus::pattern {
namespace {

struct ParseError {
  SourcePos pos;
  std::string message;
};

[[noreturn]] void fail(SourcePos pos, std::string message) {
  throw ParseError{pos, std::move(message)};
}

Status toStatus(const ParseError& e) {
  return Status::invalidArgument("line " + std::to_string(e.pos.line) + ", column " +
                                 std::to_string(e.pos.column) + ": " + e.message);
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

Builtin builtinOf(std::string_view attr) {
  if (attr == "ts") return Builtin::kTs;
  if (attr == "start") return Builtin::kStart;
  if (attr == "prob") return Builtin::kProb;
  if (attr == "type") return Builtin::kType;
  return Builtin::kNone;
}

std::shared_ptr<PatternNode> newPattern(PatternKind kind, SourcePos pos) {
  auto n = std::make_shared<PatternNode>();
  n->kind = kind;
  n->pos = pos;
  return n;
}

std::shared_ptr<Expr> newExpr(ExprKind kind, SourcePos pos) {
  auto e = std::make_shared<Expr>();
  e->kind = kind;
  e->pos = pos;
  return e;
}

enum class Mode { kQuery, kFilter };

// A duration's unit, as long as it is in microseconds: each unit `ts` may be
// declared in (us, ms, s) divides every longer unit, so converting between
// them multiplies or divides by a whole factor.
struct DurationUnit {
  std::string_view name;
  int64_t micros;
};
constexpr DurationUnit kDurationUnits[] = {
    {"us", 1}, {"ms", 1'000}, {"s", 1'000'000}, {"min", 60'000'000}, {"h", 3'600'000'000}};
constexpr std::string_view kDurationUnitList = "us, ms, s, min and h";

// Spellings people write for a unit, each pointing to the one the language
// takes (a short, fixed set keeps `m` from meaning minutes to one reader and
// months to another).
constexpr std::pair<std::string_view, std::string_view> kOtherSpellings[] = {
    {"usec", "us"}, {"micros", "us"}, {"microsecond", "us"}, {"microseconds", "us"},
    {"msec", "ms"}, {"millis", "ms"}, {"millisecond", "ms"}, {"milliseconds", "ms"},
    {"sec", "s"},   {"secs", "s"},    {"second", "s"},       {"seconds", "s"},
    {"m", "min"},   {"mins", "min"},  {"minute", "min"},     {"minutes", "min"},
    {"hr", "h"},    {"hrs", "h"},     {"hour", "h"},         {"hours", "h"},
};

const DurationUnit* durationUnitNamed(std::string_view name) {
  for (const DurationUnit& unit : kDurationUnits) {
    if (unit.name == name) return &unit;
  }
  return nullptr;
}

// The name of a unit `ts` may be declared in; "" for kNone.
std::string_view tsUnitName(TimeUnit unit) {
  switch (unit) {
    case TimeUnit::kMicroseconds:
      return "us";
    case TimeUnit::kMilliseconds:
      return "ms";
    case TimeUnit::kSeconds:
      return "s";
    case TimeUnit::kNone:
      break;
  }
  return "";
}

// Parsing, checking, printing, evaluating and even destroying a tree recurse
// over it, so untrusted text must not build one deep enough to exhaust the
// stack: parentheses and function forms nest at most kMaxNesting deep, and a
// tree (including a long left-associative chain) is at most kMaxHeight tall.
constexpr int kMaxNesting = 200;
constexpr int kMaxHeight = 1000;

class Parser {
 public:
  Parser(std::vector<Token> tokens, Mode mode, ParseOptions options = {})
      : tokens_(std::move(tokens)), mode_(mode), options_(options) {}

  // query := PATTERN pattern { clause } END
  Query query() {
    Query q;
    expectKeyword(Keyword::kPattern);
    q.pattern = pattern();
    std::vector<Keyword> seen;
    while (peek().kind != TokenKind::kEnd) {
      const Token t = peek();
      if (t.kind != TokenKind::kKeyword || !isClause(t.keyword)) {
        expected(
            "WHERE, WITHIN, PROBABILITY, PARTITION BY, STRATEGY, CONTEXT, RETURN or end of input");
      }
      if (std::find(seen.begin(), seen.end(), t.keyword) != seen.end()) {
        fail(t.pos, std::string("duplicate ") + keywordName(t.keyword) + " clause");
      }
      seen.push_back(t.keyword);
      take();
      switch (t.keyword) {
        case Keyword::kWhere:
          q.where = expr();
          break;
        case Keyword::kWithin:
          q.within = duration(DurationUse::kClause);
          break;
        case Keyword::kProbability:
          q.min_probability = probabilityBound();
          break;
        case Keyword::kPartition:
          q.partition_by = partitionBy();
          break;
        case Keyword::kStrategy:
          q.strategy = strategy();
          break;
        case Keyword::kContext:
          q.context = context();
          break;
        default:
          q.returns = returnClause();
          break;  // kReturn, the last clause isClause admits
      }
    }
    return q;
  }

  // filter := expr END
  ExprPtr filter() {
    ExprPtr e = expr();
    if (peek().kind != TokenKind::kEnd) expected("an operator or end of input");
    return e;
  }

 private:
  // --- limits -------------------------------------------------------------

  class NestingGuard {
   public:
    explicit NestingGuard(Parser& p) : p_(p) {
      if (++p_.nesting_ > kMaxNesting) {
        fail(p_.peek().pos, "nesting deeper than " + std::to_string(kMaxNesting) + " levels");
      }
    }
    ~NestingGuard() { --p_.nesting_; }
    NestingGuard(const NestingGuard&) = delete;
    NestingGuard& operator=(const NestingGuard&) = delete;

   private:
    Parser& p_;
  };

  int heightOf(const void* node) const {
    auto it = heights_.find(node);
    return it == heights_.end() ? 1 : it->second;  // leaves are not recorded
  }

  // Records the height of a node whose children are set; fails past kMaxHeight.
  template <typename Node>
  std::shared_ptr<Node> grown(std::shared_ptr<Node> n) {
    int h = 0;
    if constexpr (std::is_same_v<Node, Expr>) {
      h = std::max(n->lhs ? heightOf(n->lhs.get()) : 0, n->rhs ? heightOf(n->rhs.get()) : 0);
    } else {
      for (const PatternPtr& c : n->children) h = std::max(h, heightOf(c.get()));
      if (n->predicate) h = std::max(h, heightOf(n->predicate.get()));
    }
    if (h + 1 > kMaxHeight) {
      fail(n->pos, "expression deeper than " + std::to_string(kMaxHeight) + " operators");
    }
    heights_[n.get()] = h + 1;
    return n;
  }

  // --- tokens -------------------------------------------------------------

  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(at_ + ahead, tokens_.size() - 1)];
  }
  const Token& take() {
    const Token& t = peek();
    if (at_ < tokens_.size() - 1) ++at_;
    return t;
  }
  bool isKeyword(Keyword k, size_t ahead = 0) const {
    return peek(ahead).kind == TokenKind::kKeyword && peek(ahead).keyword == k;
  }
  bool accept(TokenKind k) {
    if (peek().kind != k) return false;
    take();
    return true;
  }
  [[noreturn]] void expected(const std::string& what) const {
    fail(peek().pos, "expected " + what + ", found " + describe(peek()));
  }
  const Token& expect(TokenKind k, const char* what) {
    if (peek().kind != k) expected(what);
    return take();
  }
  void expectKeyword(Keyword k) {
    if (!isKeyword(k)) expected(std::string("keyword ") + keywordName(k));
    take();
  }
  const Token& identifier(const char* what) { return expect(TokenKind::kIdent, what); }

  // An attribute name: an identifier, or a keyword spelled as written (an
  // event may well have an attribute called `by` or `as`).
  std::string attributeName() {
    if (peek().kind != TokenKind::kIdent && peek().kind != TokenKind::kKeyword) {
      expected("an attribute name");
    }
    return take().text;
  }

  int64_t positiveInt(const char* what) {
    const Token& t = peek();
    if (t.kind != TokenKind::kInt) expected("a positive integer");
    take();
    if (t.int_value <= 0) {
      fail(t.pos, std::string(what) + " must be a positive integer, found " + t.text);
    }
    return t.int_value;
  }

  enum class DurationUse { kClause, kTimeRestriction };

  // duration := posint [ unit ]; the value in `ts` units.
  int64_t duration(DurationUse use) {
    const Token& number = peek();
    const int64_t n = positiveInt(use == DurationUse::kClause ? "WITHIN" : "a time restriction");
    if (peek().kind != TokenKind::kIdent) return n;
    const Token& unit = take();
    const std::string written =
        (use == DurationUse::kClause ? "WITHIN " : "the time restriction ") + number.text + " " +
        unit.text;
    const DurationUnit* known = durationUnitNamed(unit.text);
    if (known == nullptr) failUnknownUnit(unit);
    if (options_.ts_unit == TimeUnit::kNone) {
      fail(unit.pos, written +
                         ": the input's ts has no declared time unit, so a duration is a number of "
                         "ts units; declare the unit (time-unit=\"ms\" on the query, --time-unit "
                         "ms with cepbus match) or drop the unit");
    }
    const DurationUnit& ts = *durationUnitNamed(tsUnitName(options_.ts_unit));
    if (known->micros < ts.micros) {
      const int64_t per_ts = ts.micros / known->micros;
      if (n % per_ts != 0) {
        fail(number.pos, written + " is not a whole number of the input's ts units (" +
                             std::string(ts.name) + ")");
      }
      return n / per_ts;
    }
    int64_t in_ts = 0;
    if (__builtin_mul_overflow(n, known->micros / ts.micros, &in_ts)) {
      fail(number.pos, written + " is too long: it does not fit 64 bits of the input's ts units (" +
                           std::string(ts.name) + ")");
    }
    return in_ts;
  }

  [[noreturn]] static void failUnknownUnit(const Token& unit) {
    for (const auto& [spelling, meant] : kOtherSpellings) {
      if (equalsIgnoreCase(unit.text, spelling)) {
        fail(unit.pos, "unknown time unit '" + unit.text + "'; write " + std::string(meant) +
                           " (the units are " + std::string(kDurationUnitList) + ")");
      }
    }
    for (const DurationUnit& u : kDurationUnits) {
      if (equalsIgnoreCase(unit.text, u.name)) {
        fail(unit.pos, "unknown time unit '" + unit.text + "'; write " + std::string(u.name) +
                           " (units are lower case: " + std::string(kDurationUnitList) + ")");
      }
    }
    fail(unit.pos,
         "unknown time unit '" + unit.text + "'; the units are " + std::string(kDurationUnitList));
  }

  // probability := '>=' number, the number in [0, 1]
  double probabilityBound() {
    expect(TokenKind::kGe,
           "'>=' after PROBABILITY (a match is kept when its probability is at least p)");
    const Token& t = peek();
    if (t.kind != TokenKind::kInt && t.kind != TokenKind::kDouble)
      expected("a probability in [0, 1]");
    take();
    const double p = t.kind == TokenKind::kInt ? static_cast<double>(t.int_value) : t.double_value;
    if (!(p >= 0 && p <= 1)) {
      fail(t.pos, "PROBABILITY must be in [0, 1], found " + t.text);
    }
    return p;
  }

  static bool isClause(Keyword k) {
    return k == Keyword::kWhere || k == Keyword::kWithin || k == Keyword::kProbability ||
           k == Keyword::kPartition || k == Keyword::kStrategy || k == Keyword::kContext ||
           k == Keyword::kReturn;
  }

  // partition := BY attr { ',' attr }
  std::vector<std::string> partitionBy() {
    expectKeyword(Keyword::kBy);
    std::vector<std::string> attrs;
    do {
      const SourcePos pos = peek().pos;
      std::string attr = attributeName();
      if (std::find(attrs.begin(), attrs.end(), attr) != attrs.end()) {
        fail(pos, "duplicate PARTITION BY attribute '" + attr + "'");
      }
      attrs.push_back(std::move(attr));
    } while (accept(TokenKind::kComma));
    return attrs;
  }

  // strategy := name { '-' name }, matched case-insensitively with '-' as '_'
  Strategy strategy() {
    const Token& first = identifier("a strategy name");
    const SourcePos pos = first.pos;
    std::string name = first.text;
    while (peek().kind == TokenKind::kMinus && peek(1).kind == TokenKind::kIdent) {
      take();
      name += "_" + take().text;
    }
    for (Strategy s :
         {Strategy::kStrictContiguity, Strategy::kSkipTillNextMatch, Strategy::kSkipTillAnyMatch}) {
      if (equalsIgnoreCase(name, strategyName(s))) return s;
    }
    fail(pos, "unknown strategy '" + name +
                  "'; expected strict_contiguity, skip_till_next_match or skip_till_any_match");
  }

  Context context() {
    const Token& t = identifier("recent or unrestricted");
    if (equalsIgnoreCase(t.text, "recent")) return Context::kRecent;
    if (equalsIgnoreCase(t.text, "unrestricted")) return Context::kUnrestricted;
    fail(t.pos, "unknown context '" + t.text + "'; expected recent or unrestricted");
  }

  // return := Type [ '(' [ item { ',' item } ] ')' ];  item := expr [ AS name ]
  ReturnClause returnClause() {
    ReturnClause r;
    const Token& type = identifier("a composite event type");
    r.type = type.text;
    r.pos = type.pos;
    if (!accept(TokenKind::kLParen)) return r;
    if (accept(TokenKind::kRParen)) return r;
    do {
      ReturnItem item;
      const SourcePos pos = peek().pos;
      item.expr = expr();
      if (isKeyword(Keyword::kAs)) {
        take();
        item.name = identifier("an attribute name after AS").text;
      } else {
        item.name = defaultReturnName(*item.expr);
        if (item.name.empty()) {
          fail(pos,
               "RETURN item '" + toString(*item.expr) + "' needs a name: write 'expr AS name'");
        }
      }
      for (const ReturnItem& other : r.items) {
        if (other.name == item.name) {
          fail(pos, "duplicate RETURN attribute '" + item.name + "'");
        }
      }
      r.items.push_back(std::move(item));
    } while (accept(TokenKind::kComma));
    expect(TokenKind::kRParen, "',' or ')'");
    return r;
  }

  // --- pattern expressions ------------------------------------------------
  // Loosest to tightest: |  +  ||  -  ; ~  postfix(* [pred])  primary

  PatternPtr pattern() {
    NestingGuard guard(*this);
    return disjunction();
  }

  // Builds one n-ary node from a chain `a op b op c` at one level.
  template <typename Next>
  PatternPtr naryChain(PatternKind kind, TokenKind op, Next next) {
    const SourcePos pos = peek().pos;
    PatternPtr first = (this->*next)();
    if (peek().kind != op) return first;
    auto n = newPattern(kind, pos);
    n->children.push_back(std::move(first));
    while (accept(op)) n->children.push_back((this->*next)());
    return grown(n);
  }

  template <typename Next>
  PatternPtr binaryChain(PatternKind kind, TokenKind op, Next next) {
    const SourcePos pos = peek().pos;
    PatternPtr lhs = (this->*next)();
    while (accept(op)) {
      auto n = newPattern(kind, pos);
      n->children = {std::move(lhs), (this->*next)()};
      lhs = grown(n);
    }
    return lhs;
  }

  PatternPtr disjunction() {
    return naryChain(PatternKind::kOr, TokenKind::kBar, &Parser::conjunction);
  }
  PatternPtr conjunction() {
    return naryChain(PatternKind::kAnd, TokenKind::kPlus, &Parser::concurrency);
  }
  PatternPtr concurrency() {
    return binaryChain(PatternKind::kConcurrent, TokenKind::kBarBar, &Parser::negation);
  }
  PatternPtr negation() {
    return binaryChain(PatternKind::kNegation, TokenKind::kMinus, &Parser::sequence);
  }

  // `;` and `~` share a level and associate to the left; a run of `;`
  // becomes one SEQ node.
  PatternPtr sequence() {
    const SourcePos pos = peek().pos;
    PatternPtr lhs = postfix();
    std::shared_ptr<PatternNode> open_seq;
    while (true) {
      if (accept(TokenKind::kSemicolon)) {
        PatternPtr rhs = postfix();
        if (open_seq) {
          open_seq->children.push_back(std::move(rhs));
        } else {
          open_seq = newPattern(PatternKind::kSeq, pos);
          open_seq->children = {std::move(lhs), std::move(rhs)};
          lhs = open_seq;
        }
        grown(open_seq);
      } else if (accept(TokenKind::kTilde)) {
        auto n = newPattern(PatternKind::kConcat, pos);
        n->children = {std::move(lhs), postfix()};
        lhs = grown(n);
        open_seq.reset();
      } else {
        return lhs;
      }
    }
  }

  // postfix := primary { '*' | '[' expr ']' }
  PatternPtr postfix() {
    const SourcePos pos = peek().pos;
    PatternPtr p = primary();
    while (true) {
      if (accept(TokenKind::kStar)) {
        auto n = newPattern(PatternKind::kIteration, pos);
        n->children = {std::move(p)};
        p = grown(n);
      } else if (accept(TokenKind::kLBracket)) {
        auto n = newPattern(PatternKind::kSelection, pos);
        n->children = {std::move(p)};
        n->predicate = expr();
        expect(TokenKind::kRBracket, "an operator or ']'");
        p = grown(n);
      } else {
        return p;
      }
    }
  }

  PatternPtr primary() {
    const Token& t = peek();
    const SourcePos pos = t.pos;
    if (accept(TokenKind::kLParen)) {
      PatternPtr p = pattern();
      expect(TokenKind::kRParen, "a pattern operator or ')'");
      return p;
    }
    if (t.kind == TokenKind::kIdent) return element();
    if (t.kind == TokenKind::kKeyword) {
      switch (t.keyword) {
        case Keyword::kSeq:
          return list(PatternKind::kSeq);
        case Keyword::kAnd:
          return list(PatternKind::kAnd);
        case Keyword::kOr:
          return list(PatternKind::kOr);
        case Keyword::kNot: {
          take();
          expect(TokenKind::kLParen, "'(' after NOT");
          auto n = newPattern(PatternKind::kNot, pos);
          n->type = identifier("an event type").text;
          if (peek().kind == TokenKind::kIdent) n->var = take().text;
          expect(TokenKind::kRParen, "')' after NOT(Type var");
          return n;
        }
        case Keyword::kAgg: {
          take();
          expect(TokenKind::kLParen, "'(' after AGG");
          auto n = newPattern(PatternKind::kAggregation, pos);
          n->children = {pattern()};
          expect(TokenKind::kComma, "',' and an aggregate condition");
          n->predicate = expr();
          expect(TokenKind::kRParen, "an operator or ')'");
          return grown(n);
        }
        case Keyword::kWithin: {
          take();
          expect(TokenKind::kLParen, "'(' after WITHIN in a pattern");
          auto n = newPattern(PatternKind::kTimeRestriction, pos);
          n->children = {pattern()};
          expect(TokenKind::kComma, "',' and a time bound");
          n->window = duration(DurationUse::kTimeRestriction);
          expect(TokenKind::kRParen, "')'");
          return grown(n);
        }
        default:
          break;
      }
    }
    expected("an event type, '(', SEQ, AND, OR, NOT, AGG or WITHIN");
  }

  // SEQ|AND|OR '(' pattern { ',' pattern } ')'
  PatternPtr list(PatternKind kind) {
    const SourcePos pos = take().pos;
    expect(TokenKind::kLParen, "'('");
    auto n = newPattern(kind, pos);
    do {
      n->children.push_back(pattern());
    } while (accept(TokenKind::kComma));
    expect(TokenKind::kRParen, "',' or ')'");
    return grown(n);
  }

  // element := Type [ var ] | Type ('+'|'*') var '[' ']'
  PatternPtr element() {
    const Token& type = take();
    const bool kleene = (peek().kind == TokenKind::kPlus || peek().kind == TokenKind::kStar) &&
                        peek(1).kind == TokenKind::kIdent && peek(2).kind == TokenKind::kLBracket &&
                        peek(3).kind == TokenKind::kRBracket;
    if (!kleene) rejectKleeneWithoutBrackets(type);
    auto n = newPattern(kleene ? PatternKind::kKleene : PatternKind::kEvent, type.pos);
    n->type = type.text;
    if (kleene) {
      n->star = take().kind == TokenKind::kStar;
      n->var = take().text;
      take();
      take();
    } else if (peek().kind == TokenKind::kIdent) {
      n->var = take().text;
    }
    return n;
  }

  // `Temp+ b` (the operator written against the type, a lone name after it,
  // no `[]`) is a Kleene element missing its brackets: read as written it is
  // the conjunction of Temp with an event of type 'b' (or, for `*`, an
  // iteration followed by a stray name), which compiles on some engine and
  // then never matches. The spaced form `Temp + b` stays a conjunction.
  void rejectKleeneWithoutBrackets(const Token& type) {
    const Token& op = peek();
    if ((op.kind != TokenKind::kPlus && op.kind != TokenKind::kStar) ||
        peek(1).kind != TokenKind::kIdent || peek(2).kind == TokenKind::kLBracket ||
        peek(2).kind == TokenKind::kIdent) {
      return;
    }
    const bool glued = op.pos.line == type.pos.line &&
                       op.pos.column == type.pos.column + static_cast<int>(type.text.size());
    if (!glued) return;
    const std::string written = type.text + op.text + " " + peek(1).text;
    const std::string kleene = written + "[]";
    const std::string spaced = type.text + " " + op.text + " " + peek(1).text;
    fail(op.pos, "'" + written +
                     "' is not a Kleene element: a Kleene variable needs '[]', as in '" + kleene +
                     "'" +
                     (op.kind == TokenKind::kPlus
                          ? "; for the conjunction of " + type.text + " and an event of type '" +
                                peek(1).text + "', write '" + spaced + "'"
                          : std::string()));
  }

  // --- expressions --------------------------------------------------------
  // Loosest to tightest: OR  AND  NOT  comparison  + -  * / %  unary -  primary

  ExprPtr expr() {
    NestingGuard guard(*this);
    return orExpr();
  }

  ExprPtr binary(BinaryOp op, SourcePos pos, ExprPtr lhs, ExprPtr rhs) {
    auto e = newExpr(ExprKind::kBinary, pos);
    e->binary = op;
    e->lhs = std::move(lhs);
    e->rhs = std::move(rhs);
    return grown(e);
  }

  ExprPtr orExpr() {
    const SourcePos pos = peek().pos;
    ExprPtr lhs = andExpr();
    while (isKeyword(Keyword::kOr)) {
      take();
      lhs = binary(BinaryOp::kOr, pos, std::move(lhs), andExpr());
    }
    return lhs;
  }

  ExprPtr andExpr() {
    const SourcePos pos = peek().pos;
    ExprPtr lhs = notExpr();
    while (isKeyword(Keyword::kAnd)) {
      take();
      lhs = binary(BinaryOp::kAnd, pos, std::move(lhs), notExpr());
    }
    return lhs;
  }

  ExprPtr notExpr() {
    if (!isKeyword(Keyword::kNot)) return comparison();
    NestingGuard guard(*this);
    auto e = newExpr(ExprKind::kUnary, take().pos);
    e->unary = UnaryOp::kNot;
    e->lhs = notExpr();
    return grown(e);
  }

  static bool comparisonOp(TokenKind k, BinaryOp& op) {
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

  ExprPtr comparison() {
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

  ExprPtr additive() {
    const SourcePos pos = peek().pos;
    ExprPtr lhs = multiplicative();
    while (peek().kind == TokenKind::kPlus || peek().kind == TokenKind::kMinus) {
      const BinaryOp op = take().kind == TokenKind::kPlus ? BinaryOp::kAdd : BinaryOp::kSub;
      lhs = binary(op, pos, std::move(lhs), multiplicative());
    }
    return lhs;
  }

  ExprPtr multiplicative() {
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

  // A minus sign directly before a number folds into the literal, so `-3`
  // is the constant -3 rather than an operation.
  ExprPtr unary() {
    if (peek().kind != TokenKind::kMinus) return primaryExpr();
    NestingGuard guard(*this);
    const SourcePos pos = take().pos;
    ExprPtr operand = unary();
    if (operand->kind == ExprKind::kLiteral && operand->literal.isNumber()) {
      auto e = newExpr(ExprKind::kLiteral, pos);
      e->literal = operand->literal.kind() == Value::Kind::kInt
                       ? Value(-operand->literal.asInt())
                       : Value(-operand->literal.asDouble());
      return e;
    }
    auto e = newExpr(ExprKind::kUnary, pos);
    e->unary = UnaryOp::kNeg;
    e->lhs = std::move(operand);
    return grown(e);
  }

  ExprPtr literal(SourcePos pos, Value v) {
    auto e = newExpr(ExprKind::kLiteral, pos);
    e->literal = std::move(v);
    return e;
  }

  ExprPtr primaryExpr() {
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

  ExprPtr bareAttribute() {
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

  // reference := var '.' attr | var '[' index ']' '.' attr
  // index := 'i' | 'i' '-' 1 | 'last' | positive integer
  ExprPtr reference() {
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

  // prob := 'prob' '(' ')'
  ExprPtr matchProbability() {
    auto e = newExpr(ExprKind::kMatchProb, take().pos);
    take();  // '('
    take();  // ')'
    return e;
  }

  // aggregate := (count|sum|avg|min|max) '(' var '[' ']' [ '.' attr ] ')'
  ExprPtr aggregate() {
    const Token& fn = take();
    auto e = newExpr(ExprKind::kAggregate, fn.pos);
    bool known = false;
    for (AggFunc f :
         {AggFunc::kCount, AggFunc::kSum, AggFunc::kAvg, AggFunc::kMin, AggFunc::kMax}) {
      if (equalsIgnoreCase(fn.text, aggFuncName(f))) {
        e->agg = f;
        known = true;
      }
    }
    if (!known) {
      fail(fn.pos, "unknown function '" + fn.text + "'; expected count, sum, avg, min or max");
    }
    take();  // '('
    e->ref.var = identifier("a Kleene variable").text;
    e->ref.index = IndexKind::kAll;
    expect(TokenKind::kLBracket, "'[]' after the Kleene variable");
    expect(TokenKind::kRBracket, "']'");
    if (accept(TokenKind::kDot)) {
      e->ref.attr = attributeName();
      e->ref.builtin = builtinOf(e->ref.attr);
    } else if (e->agg != AggFunc::kCount) {
      expected(std::string("'.' and an attribute: ") + aggFuncName(e->agg) + "(" + e->ref.var +
               "[].attr)");
    }
    expect(TokenKind::kRParen, "')'");
    return e;
  }

  std::vector<Token> tokens_;
  size_t at_ = 0;
  Mode mode_;
  ParseOptions options_;
  int nesting_ = 0;
  std::unordered_map<const void*, int> heights_;
};

// ---------------------------------------------------------------------------
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
enum class Site { kWhere, kReturn, kSelection, kAggregation, kFilter };

class Checker {
 public:
  explicit Checker(Query& q) : q_(q) {}

  void run() {
    walk(*q_.pattern, nullptr, 0);
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

  static void checkNotPlacement(const PatternNode& p, const PatternNode* parent, size_t index) {
    if (parent == nullptr || parent->kind != PatternKind::kSeq) {
      fail(p.pos, "NOT(...) is only allowed inside SEQ(...); write 'A - B' for negation elsewhere");
    }
    const auto& siblings = parent->children;
    auto positive = [](const PatternPtr& c) { return c->kind != PatternKind::kNot; };
    const bool before = std::any_of(siblings.begin(), siblings.begin() + index, positive);
    const bool after = std::any_of(siblings.begin() + index + 1, siblings.end(), positive);
    if (!before || !after) {
      fail(p.pos, "'" + toString(p) + "' must stand between two positive elements of SEQ(...)");
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
      if (e.kind == ExprKind::kAggregate) {
        if (v->kind != VarKind::kKleene) {
          fail(e.pos, std::string(aggFuncName(e.agg)) + "() needs a Kleene variable ('Type+ " +
                          ref.var + "[]'); '" + ref.var + "' is not one");
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
    }
    switch (ref.builtin) {
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

std::optional<TimeUnit> tsUnitNamed(std::string_view name) {
  for (TimeUnit unit : {TimeUnit::kMicroseconds, TimeUnit::kMilliseconds, TimeUnit::kSeconds}) {
    if (tsUnitName(unit) == name) return unit;
  }
  return std::nullopt;
}

Result<Query> parseQuery(std::string_view text) { return parseQuery(text, ParseOptions{}); }

Result<Query> parseQuery(std::string_view text, const ParseOptions& options) {
  Result<std::vector<Token>> tokens = tokenize(text);
  if (!tokens.isOk()) return tokens.status();
  try {
    Query q = Parser(std::move(tokens).value(), Mode::kQuery, options).query();
    Checker(q).run();
    return q;
  } catch (const ParseError& e) {
    return toStatus(e);
  }
}

Result<ExprPtr> parseFilter(std::string_view text) {
  Result<std::vector<Token>> tokens = tokenize(text);
  if (!tokens.isOk()) return tokens.status();
  try {
    ExprPtr e = Parser(std::move(tokens).value(), Mode::kFilter).filter();
    Checker::checkFilter(*e);
    return e;
  } catch (const ParseError& e) {
    return toStatus(e);
  }
}

}  // namespace cepbus::pattern
