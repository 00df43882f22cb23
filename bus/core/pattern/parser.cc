// Recursive-descent parser of the pattern language: queries, their patterns,
// clauses, output control and windows. Expressions are expr_parser.cc's, the
// reading of tokens and the nesting limits token_cursor.h's, the semantic
// checks checker.cc's.
//
// Parsing is control plane: errors are thrown inside as ParseError
// (parse_error.h) and turned into a Status at the two entry points. The
// grammar, with its precedence levels, is in docs/pattern-language.md; each
// parse function below names the rule it implements.

#include "bus/core/pattern/parser.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "bus/core/pattern/checker.h"
#include "bus/core/pattern/expr_parser.h"
#include "bus/core/pattern/lexer.h"
#include "bus/core/pattern/parse_error.h"
#include "bus/core/pattern/printer.h"

namespace cepbus::pattern {
namespace {

using parsing::builtinOf;
using parsing::ExprParser;
using parsing::fail;
using parsing::Mode;

std::shared_ptr<PatternNode> newPattern(PatternKind kind, SourcePos pos) {
  auto n = std::make_shared<PatternNode>();
  n->kind = kind;
  n->pos = pos;
  return n;
}

class Parser : public ExprParser {
 public:
  Parser(std::vector<Token> tokens, ParseOptions options)
      : ExprParser(std::move(tokens), Mode::kQuery, options) {}

  // query := PATTERN pattern { clause } END | window_query
  Query query() {
    if (isWord("FROM")) return windowQuery();
    Query q;
    expectKeyword(Keyword::kPattern);
    q.pattern = pattern();
    std::vector<Keyword> seen;
    while (peek().kind != TokenKind::kEnd) {
      const Token t = peek();
      if (outputControl(q)) continue;
      if (t.kind != TokenKind::kKeyword || !isClause(t.keyword)) {
        expected(
            "WHERE, WITHIN, PROBABILITY, PARTITION BY, STRATEGY, CONTEXT, RETURN, EMIT, "
            "AFTER MATCH or end of input");
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

 private:
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

  // --- output control of pattern queries ---------------------------------

  // Parses an output-control clause of `q` if one starts here:
  //   EMIT (FIRST | LAST) EVERY duration [ PER expr ]
  //   AFTER MATCH SKIP PAST LAST EVENT
  // Whether it did.
  bool outputControl(Query& q) {
    const Token start = peek();
    if (isWord("EMIT")) {
      if (q.emit) fail(start.pos, "duplicate EMIT clause");
      take();
      EmitClause e;
      e.pos = start.pos;
      if (isWord("FIRST")) {
        e.kind = EmitKind::kFirst;
      } else if (isWord("LAST")) {
        e.kind = EmitKind::kLast;
      } else {
        expected("FIRST or LAST after EMIT (EMIT FIRST EVERY d or EMIT LAST EVERY d)");
      }
      take();
      expectWord("EVERY", e.kind == EmitKind::kFirst ? "EMIT FIRST" : "EMIT LAST");
      e.every = duration("the EMIT interval (EVERY)", "EVERY ");
      if (isWord("PER")) {
        take();
        e.per = expr();
      }
      q.emit = std::move(e);
      return true;
    }
    if (isWord("AFTER")) {
      if (q.skip_past_last_event) fail(start.pos, "duplicate AFTER MATCH clause");
      take();
      expectWord("MATCH", "AFTER");
      expectWord("SKIP", "AFTER MATCH");
      expectWord("PAST", "AFTER MATCH SKIP");
      expectWord("LAST", "AFTER MATCH SKIP PAST");
      expectWord("EVENT", "AFTER MATCH SKIP PAST LAST");
      q.skip_past_last_event = true;
      return true;
    }
    return false;
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
};

// ---------------------------------------------------------------------------
}  // namespace

Result<Query> parseQuery(std::string_view text) { return parseQuery(text, ParseOptions{}); }

Result<Query> parseQuery(std::string_view text, const ParseOptions& options) {
  Result<std::vector<Token>> tokens = tokenize(text);
  if (!tokens.isOk()) return tokens.status();
  try {
    Query q = Parser(std::move(tokens).value(), options).query();
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
    ExprPtr e = ExprParser(std::move(tokens).value(), Mode::kFilter).filter();
    parsing::checkFilter(*e);
    return e;
  } catch (const parsing::ParseError& e) {
    return parsing::toStatus(e);
  }
}

}  // namespace cepbus::pattern
