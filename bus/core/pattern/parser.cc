// Recursive-descent parser of the pattern language; the semantic checks are
// checker.cc's, the units of durations duration_units.cc's.
//
// Parsing is control plane: errors are thrown inside as ParseError
// (parse_error.h) and turned into a Status at the two entry points. The grammar, with its
// precedence levels, is in docs/pattern-language.md; each parse function below names the rule it
// implements.

#include "bus/core/pattern/parser.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bus/core/pattern/checker.h"
#include "bus/core/pattern/duration_units.h"
#include "bus/core/pattern/lexer.h"
#include "bus/core/pattern/parse_error.h"
#include "bus/core/pattern/printer.h"

namespace cepbus::pattern {
namespace {

using parsing::fail;

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

  // query := PATTERN pattern { clause } END | window_query
  Query query() {
    if (isWord("FROM")) return windowQuery();
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
          q.within = duration("WITHIN", "WITHIN ");
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
  // The words of a window query (FROM, WINDOW, GROUP, HAVING, ...) are
  // keywords only where they stand, so they remain free as names elsewhere.
  bool isWord(const char* word) const {
    return peek().kind == TokenKind::kIdent && equalsIgnoreCase(peek().text, word);
  }

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

  // duration := posint [ unit ]; the value in `ts` units. `what` names the
  // duration in errors, `written` is what precedes it as the query wrote it.
  // The words that may follow a window's duration are not units.
  int64_t duration(const char* what, const std::string& written) {
    const Token& number = peek();
    const int64_t n = positiveInt(what);
    if (peek().kind != TokenKind::kIdent || isWord("EVERY") || isWord("GROUP") ||
        isWord("HAVING")) {
      return n;
    }
    const Token& unit = take();
    return parsing::inTsUnits(n, number, unit, written + number.text + " " + unit.text,
                              options_.ts_unit);
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

  // --- window queries -----------------------------------------------------

  // window_query := FROM Type var [ WHERE expr ] WINDOW window
  //                 [ GROUP BY var.attr { ',' var.attr } ] [ HAVING expr ] RETURN return
  //                 [ EMIT EVERY duration ]
  Query windowQuery() {
    Query q;
    take();  // FROM
    const Token& type = identifier("an event type after FROM");
    auto source = newPattern(PatternKind::kEvent, type.pos);
    source->type = type.text;
    if (peek().kind != TokenKind::kIdent || isWord("WINDOW")) {
      expected("a variable after the event type, as in 'FROM " + type.text + " t'");
    }
    source->var = take().text;
    q.pattern = source;
    if (isKeyword(Keyword::kWhere)) {
      take();
      q.where = expr();
    }
    if (!isWord("WINDOW")) expected(q.where ? "an operator or WINDOW" : "WHERE or WINDOW");
    q.window = windowSpec();
    if (isWord("GROUP")) {
      take();
      expectKeyword(Keyword::kBy);
      q.group_by = groupBy(source->var);
    }
    if (isWord("HAVING")) {
      take();
      q.having = expr();
    }
    if (!isKeyword(Keyword::kReturn)) {
      expected(q.having ? "an operator or RETURN"
                        : (q.group_by.empty() ? "GROUP BY, HAVING or RETURN" : "HAVING or RETURN"));
    }
    take();
    q.returns = returnClause();
    if (isWord("EMIT")) q.window->emit_every = emitEvery(*q.returns);
    if (peek().kind != TokenKind::kEnd) expected("EMIT EVERY or end of input");
    return q;
  }

  // emit := EMIT EVERY duration; RETURN may not name an attribute `partial`,
  // which marks the results.
  int64_t emitEvery(const ReturnClause& returns) {
    const SourcePos emit = take().pos;  // EMIT
    if (!isWord("EVERY")) {
      expected("EVERY and how often partial results come out, as in 'EMIT EVERY 10'");
    }
    take();
    const int64_t every = duration("the partial results' period (EMIT EVERY)", "EMIT EVERY ");
    for (const ReturnItem& item : returns.items) {
      if (item.name == kPartialAttribute) {
        fail(emit, std::string("EMIT EVERY marks each result with the attribute '") +
                       kPartialAttribute + "'; RETURN names one too: rename it with AS");
      }
    }
    return every;
  }

  // window := TUMBLING duration | SLIDING duration EVERY duration | SESSION GAP duration
  WindowSpec windowSpec() {
    WindowSpec w;
    w.pos = take().pos;  // WINDOW
    if (isWord("TUMBLING")) {
      take();
      w.kind = WindowKind::kTumbling;
      w.length = duration("the window length (TUMBLING)", "TUMBLING ");
      w.every = w.length;
    } else if (isWord("SLIDING")) {
      take();
      w.kind = WindowKind::kSliding;
      w.length = duration("the window length (SLIDING)", "SLIDING ");
      if (!isWord("EVERY")) expected("EVERY and the slide, as in 'SLIDING 60 EVERY 10'");
      const SourcePos every = take().pos;
      w.every = duration("the slide (EVERY)", "EVERY ");
      if (w.every > w.length) {
        fail(every, "the slide (EVERY " + std::to_string(w.every) +
                        ") is longer than the window (SLIDING " + std::to_string(w.length) +
                        "): events between two windows would be in none; use a slide <= the "
                        "length");
      }
    } else if (isWord("SESSION")) {
      take();
      w.kind = WindowKind::kSession;
      if (!isWord("GAP")) expected("GAP and the gap that ends a session, as in 'SESSION GAP 30'");
      take();
      w.length = duration("the session gap (GAP)", "SESSION GAP ");
    } else {
      expected("TUMBLING, SLIDING or SESSION after WINDOW");
    }
    return w;
  }

  // group_by := var.attr { ',' var.attr }, attributes of the FROM variable
  std::vector<std::string> groupBy(const std::string& var) {
    std::vector<std::string> attrs;
    do {
      const Token& name = identifier("the FROM variable and an attribute, as in 't.sensor'");
      if (name.text != var) {
        fail(name.pos, "GROUP BY names attributes of the FROM variable: write '" + var +
                           ".attr', found '" + name.text + "'");
      }
      expect(TokenKind::kDot, "'.' and an attribute name");
      const SourcePos pos = peek().pos;
      std::string attr = attributeName();
      if (builtinOf(attr) != Builtin::kNone) {
        fail(pos, "GROUP BY " + var + "." + attr + ": the built-in '" + attr +
                      "' cannot be a group key");
      }
      if (std::find(attrs.begin(), attrs.end(), attr) != attrs.end()) {
        fail(pos, "duplicate GROUP BY attribute '" + var + "." + attr + "'");
      }
      attrs.push_back(std::move(attr));
    } while (accept(TokenKind::kComma));
    return attrs;
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
          n->window = duration("a time restriction", "the time restriction ");
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

  // aggregate := function '(' var [ '[' ']' ] [ '.' attr ] ')'; `b[]` over a
  // Kleene variable of a pattern, a bare `t` over a window's events.
  ExprPtr aggregate() {
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

  std::vector<Token> tokens_;
  size_t at_ = 0;
  Mode mode_;
  ParseOptions options_;
  int nesting_ = 0;
  std::unordered_map<const void*, int> heights_;
};

// ---------------------------------------------------------------------------
}  // namespace

Result<Query> parseQuery(std::string_view text) { return parseQuery(text, ParseOptions{}); }

Result<Query> parseQuery(std::string_view text, const ParseOptions& options) {
  Result<std::vector<Token>> tokens = tokenize(text);
  if (!tokens.isOk()) return tokens.status();
  try {
    Query q = Parser(std::move(tokens).value(), Mode::kQuery, options).query();
    parsing::checkQuery(q);
    return q;
  } catch (const parsing::ParseError& e) {
    return parsing::toStatus(e);
  }
}

Result<ExprPtr> parseFilter(std::string_view text) {
  Result<std::vector<Token>> tokens = tokenize(text);
  if (!tokens.isOk()) return tokens.status();
  try {
    ExprPtr e = Parser(std::move(tokens).value(), Mode::kFilter).filter();
    parsing::checkFilter(*e);
    return e;
  } catch (const parsing::ParseError& e) {
    return parsing::toStatus(e);
  }
}

}  // namespace cepbus::pattern
