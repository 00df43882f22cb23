#include "bus/core/pattern/parser.h"

#include <gtest/gtest.h>

#include "bus/core/pattern/printer.h"

namespace cepbus::pattern {
namespace {

Query mustParse(std::string_view text) {
  Result<Query> r = parseQuery(text);
  if (!r.isOk()) {
    ADD_FAILURE() << text << "\n-> " << r.status().toString();
    return *parseQuery("PATTERN ParseFailed");
  }
  return *r;
}

std::string errorOf(std::string_view text) {
  Result<Query> r = parseQuery(text);
  return r.isOk() ? "OK" : r.status().message();
}

// The pattern of `PATTERN <text>` in canonical form; the printer is tested on
// its own in printer_test.cc, so this is a compact way to state a tree shape.
std::string shape(std::string_view pattern) {
  return toString(*mustParse("PATTERN " + std::string(pattern)).pattern);
}

TEST(ParserTest, DesignExample) {
  Query q = mustParse(R"(
    PATTERN SEQ(Stock a, Stock b, Stock c)
    WHERE a.price = b.price AND b.price = c.price AND a.symbol != b.symbol
    WITHIN 1000
    STRATEGY skip_till_any_match
    RETURN EqualPrices(a.symbol, b.symbol, c.symbol, a.price)
  )");
  ASSERT_EQ(q.pattern->kind, PatternKind::kSeq);
  ASSERT_EQ(q.pattern->children.size(), 3u);
  const char* names[] = {"a", "b", "c"};
  for (int i = 0; i < 3; ++i) {
    const PatternNode& e = *q.pattern->children[i];
    EXPECT_EQ(e.kind, PatternKind::kEvent);
    EXPECT_EQ(e.type, "Stock");
    EXPECT_EQ(e.var, names[i]);
    EXPECT_EQ(q.variables[i].name, names[i]);
    EXPECT_EQ(q.variables[i].kind, VarKind::kSingle);
  }
  EXPECT_EQ(q.pattern->children[1]->pos.line, 2);
  EXPECT_EQ(q.pattern->children[1]->pos.column, 26);

  std::vector<ExprPtr> conj = splitConjuncts(q.where);
  ASSERT_EQ(conj.size(), 3u);
  EXPECT_EQ(conj[0]->binary, BinaryOp::kEq);
  EXPECT_EQ(conj[0]->lhs->ref.var, "a");
  EXPECT_EQ(conj[0]->lhs->ref.attr, "price");
  EXPECT_EQ(conj[2]->binary, BinaryOp::kNe);
  EXPECT_EQ(variablesOf(*conj[1]), (std::vector<std::string>{"b", "c"}));

  EXPECT_EQ(q.within, 1000);
  EXPECT_EQ(q.strategy, Strategy::kSkipTillAnyMatch);
  EXPECT_EQ(q.context, Context::kUnspecified);
  ASSERT_TRUE(q.returns.has_value());
  EXPECT_EQ(q.returns->type, "EqualPrices");
  std::vector<std::string> attrs;
  for (const ReturnItem& item : q.returns->items) attrs.push_back(item.name);
  EXPECT_EQ(attrs, (std::vector<std::string>{"a_symbol", "b_symbol", "c_symbol", "a_price"}));
}

// The examples of the grammar documentation.
TEST(ParserTest, DocumentedExamplesParse) {
  const char* examples[] = {
      "-- a rising run of one stock, then a drop below the run's start\n"
      "PATTERN SEQ(Stock a, Stock+ b[], Stock c)\n"
      "WHERE b[i].price > b[i-1].price AND b[i].symbol = a.symbol\n"
      "  AND c.symbol = a.symbol AND c.price < b[1].price AND count(b[]) >= 3\n"
      "WITHIN 500\n"
      "PARTITION BY symbol\n"
      "STRATEGY skip-till-next-match\n"
      "RETURN Run(a.symbol, b[last].price AS top, avg(b[].price) AS mean)",
      "PATTERN SEQ(Order o, NOT(Cancel x), Ship s)\n"
      "WHERE x.id = o.id AND s.id = o.id\n"
      "WITHIN 86400",
      "PATTERN WITHIN((A ; B) - C, 10) CONTEXT recent",
      "PATTERN SEQ(Start s, AGG(Fill* f[], sum(f[].qty) >= 100), End e)",
  };
  for (const char* text : examples) EXPECT_EQ(errorOf(text), "OK") << text;
}

TEST(ParserTest, DefaultsWhenClausesAreAbsent) {
  Query q = mustParse("PATTERN SEQ(A a, B b)");
  EXPECT_EQ(q.where, nullptr);
  EXPECT_FALSE(q.within.has_value());
  EXPECT_TRUE(q.partition_by.empty());
  EXPECT_EQ(q.strategy, Strategy::kSkipTillAnyMatch);
  EXPECT_EQ(q.context, Context::kUnspecified);
  EXPECT_FALSE(q.returns.has_value());
}

TEST(ParserTest, ClausesInAnyOrderAndKeywordsInAnyCase) {
  Query q = mustParse(
      "pattern seq(A a, B b) return Out(a.x) Within 5 partition BY sym, region "
      "context Recent strategy Strict_Contiguity where a.x > 1");
  EXPECT_EQ(q.within, 5);
  EXPECT_EQ(q.partition_by, (std::vector<std::string>{"sym", "region"}));
  EXPECT_EQ(q.context, Context::kRecent);
  EXPECT_EQ(q.strategy, Strategy::kStrictContiguity);
  ASSERT_NE(q.where, nullptr);
  EXPECT_EQ(q.returns->type, "Out");
}

TEST(ParserTest, StrategiesWithUnderscoresOrDashes) {
  const std::pair<const char*, Strategy> cases[] = {
      {"strict_contiguity", Strategy::kStrictContiguity},
      {"strict-contiguity", Strategy::kStrictContiguity},
      {"skip_till_next_match", Strategy::kSkipTillNextMatch},
      {"skip-till-next-match", Strategy::kSkipTillNextMatch},
      {"skip_till_any_match", Strategy::kSkipTillAnyMatch},
      {"skip-till-any-match", Strategy::kSkipTillAnyMatch},
      {"SKIP-TILL-ANY-MATCH", Strategy::kSkipTillAnyMatch},
  };
  for (const auto& [text, strategy] : cases) {
    EXPECT_EQ(mustParse(std::string("PATTERN SEQ(A a, B b) STRATEGY ") + text).strategy, strategy)
        << text;
  }
  // A dashed strategy is followed by further clauses as usual.
  Query q = mustParse("PATTERN SEQ(A a, B b) STRATEGY skip-till-next-match WITHIN 3");
  EXPECT_EQ(q.strategy, Strategy::kSkipTillNextMatch);
  EXPECT_EQ(q.within, 3);
}

TEST(ParserTest, Contexts) {
  EXPECT_EQ(mustParse("PATTERN A ; B CONTEXT unrestricted").context, Context::kUnrestricted);
  EXPECT_EQ(mustParse("PATTERN A ; B CONTEXT RECENT").context, Context::kRecent);
}

TEST(ParserTest, NegationAndKleeneInsideSeq) {
  Query q = mustParse(
      "PATTERN SEQ(A a, NOT(C c), B+ b[], D* d[], E e) "
      "WHERE b[i].price > b[i-1].price AND b[i].qty < 10 AND c.x = a.x");
  const auto& kids = q.pattern->children;
  ASSERT_EQ(kids.size(), 5u);
  EXPECT_EQ(kids[1]->kind, PatternKind::kNot);
  EXPECT_EQ(kids[1]->type, "C");
  EXPECT_EQ(kids[1]->var, "c");
  EXPECT_EQ(kids[2]->kind, PatternKind::kKleene);
  EXPECT_FALSE(kids[2]->star);
  EXPECT_EQ(kids[2]->var, "b");
  EXPECT_EQ(kids[3]->kind, PatternKind::kKleene);
  EXPECT_TRUE(kids[3]->star);
  ASSERT_EQ(q.variables.size(), 5u);
  EXPECT_EQ(q.variables[1].kind, VarKind::kNegated);
  EXPECT_EQ(q.variables[2].kind, VarKind::kKleene);
  EXPECT_EQ(q.variables[3].kind, VarKind::kKleene);
  EXPECT_EQ(q.findVariable("d")->type, "D");
  EXPECT_EQ(q.findVariable("zz"), nullptr);

  std::vector<ExprPtr> conj = splitConjuncts(q.where);
  ASSERT_EQ(conj.size(), 3u);
  EXPECT_EQ(conj[0]->lhs->ref.index, IndexKind::kCurrent);
  EXPECT_EQ(conj[0]->rhs->ref.index, IndexKind::kPrevious);
}

TEST(ParserTest, NegatedElementWithoutVariable) {
  Query q = mustParse("PATTERN SEQ(A a, NOT(C), B b)");
  EXPECT_EQ(q.pattern->children[1]->kind, PatternKind::kNot);
  EXPECT_EQ(q.pattern->children[1]->var, "");
  EXPECT_EQ(q.variables.size(), 2u);
}

TEST(ParserTest, KleeneReferencesAndAggregates) {
  Query q = mustParse(
      "PATTERN SEQ(A a, B+ b[]) WHERE b[1].x = b[last].x AND b[12].x > 0 AND "
      "count(b[]) > 2 AND SUM(b[].qty) > 100 AND avg(b[].price) < a.price AND "
      "min(b[].ts) >= 0 AND max(b[].price) < 50 AND count(b[].qty) = 3");
  std::vector<ExprPtr> c = splitConjuncts(q.where);
  ASSERT_EQ(c.size(), 8u);
  EXPECT_EQ(c[0]->lhs->ref.index, IndexKind::kAt);
  EXPECT_EQ(c[0]->lhs->ref.position, 1);
  EXPECT_EQ(c[0]->rhs->ref.index, IndexKind::kLast);
  EXPECT_EQ(c[1]->lhs->ref.position, 12);
  const ExprPtr& count = c[2]->lhs;
  EXPECT_EQ(count->kind, ExprKind::kAggregate);
  EXPECT_EQ(count->agg, AggFunc::kCount);
  EXPECT_EQ(count->ref.var, "b");
  EXPECT_EQ(count->ref.index, IndexKind::kAll);
  EXPECT_EQ(count->ref.attr, "");
  EXPECT_EQ(c[3]->lhs->agg, AggFunc::kSum);  // function names are case-insensitive
  EXPECT_EQ(c[3]->lhs->ref.attr, "qty");
  EXPECT_EQ(c[4]->lhs->agg, AggFunc::kAvg);
  EXPECT_EQ(c[5]->lhs->agg, AggFunc::kMin);
  EXPECT_EQ(c[5]->lhs->ref.builtin, Builtin::kTs);
  EXPECT_EQ(c[6]->lhs->agg, AggFunc::kMax);
  EXPECT_EQ(c[7]->lhs->ref.attr, "qty");
}

TEST(ParserTest, BuiltinAttributes) {
  Query q = mustParse(
      "PATTERN SEQ(A a, B b) WHERE a.ts < b.start AND a.prob > 0.5 AND b.type = 'B' AND a.tsx = 1");
  std::vector<ExprPtr> c = splitConjuncts(q.where);
  EXPECT_EQ(c[0]->lhs->ref.builtin, Builtin::kTs);
  EXPECT_EQ(c[0]->rhs->ref.builtin, Builtin::kStart);
  EXPECT_EQ(c[1]->lhs->ref.builtin, Builtin::kProb);
  EXPECT_EQ(c[2]->lhs->ref.builtin, Builtin::kType);
  EXPECT_EQ(c[3]->lhs->ref.builtin, Builtin::kNone);
}

TEST(ParserTest, KeywordsMayNameAttributes) {
  Query q = mustParse("PATTERN SEQ(A a, B b) WHERE a.by = b.as PARTITION BY where");
  EXPECT_EQ(q.where->lhs->ref.attr, "by");
  EXPECT_EQ(q.where->rhs->ref.attr, "as");
  EXPECT_EQ(q.partition_by, std::vector<std::string>{"where"});
}

TEST(ParserTest, Literals) {
  Query q = mustParse(
      "PATTERN SEQ(A a, B b) WHERE a.i = 7 AND a.d = 2.5 AND a.s = 'x' AND a.t = \"y\" "
      "AND a.b = true AND a.c = FALSE AND a.n = -3 AND a.m = -1.5 AND a.k = - -4");
  std::vector<ExprPtr> c = splitConjuncts(q.where);
  ASSERT_EQ(c.size(), 9u);
  EXPECT_EQ(c[0]->rhs->literal, Value(7));
  EXPECT_EQ(c[0]->rhs->literal.kind(), Value::Kind::kInt);
  EXPECT_EQ(c[1]->rhs->literal.kind(), Value::Kind::kDouble);
  EXPECT_EQ(c[2]->rhs->literal, Value("x"));
  EXPECT_EQ(c[3]->rhs->literal, Value("y"));
  EXPECT_EQ(c[4]->rhs->literal, Value(true));
  EXPECT_EQ(c[5]->rhs->literal, Value(false));
  // A minus before a number folds into the literal.
  EXPECT_EQ(c[6]->rhs->kind, ExprKind::kLiteral);
  EXPECT_EQ(c[6]->rhs->literal, Value(-3));
  EXPECT_EQ(c[7]->rhs->literal, Value(-1.5));
  EXPECT_EQ(c[8]->rhs->literal, Value(4));
}

TEST(ParserTest, ExpressionPrecedence) {
  // OR < AND < NOT < comparison < + - < * / % < unary minus
  Query q = mustParse(
      "PATTERN SEQ(A a, B b) WHERE a.x + b.y * 2 > -a.z OR NOT a.w = 1 AND b.v % 3 - 1 < 0");
  const Expr& top = *q.where;
  ASSERT_EQ(top.binary, BinaryOp::kOr);
  const Expr& gt = *top.lhs;
  EXPECT_EQ(gt.binary, BinaryOp::kGt);
  EXPECT_EQ(gt.lhs->binary, BinaryOp::kAdd);
  EXPECT_EQ(gt.lhs->rhs->binary, BinaryOp::kMul);
  EXPECT_EQ(gt.rhs->kind, ExprKind::kUnary);
  EXPECT_EQ(gt.rhs->unary, UnaryOp::kNeg);
  const Expr& conj = *top.rhs;
  ASSERT_EQ(conj.binary, BinaryOp::kAnd);
  EXPECT_EQ(conj.lhs->kind, ExprKind::kUnary);
  EXPECT_EQ(conj.lhs->unary, UnaryOp::kNot);
  EXPECT_EQ(conj.lhs->lhs->binary, BinaryOp::kEq);
  EXPECT_EQ(conj.rhs->binary, BinaryOp::kLt);
  EXPECT_EQ(conj.rhs->lhs->binary, BinaryOp::kSub);
  EXPECT_EQ(conj.rhs->lhs->lhs->binary, BinaryOp::kMod);
}

TEST(ParserTest, ArithmeticIsLeftAssociativeAndParenthesesGroup) {
  Query q = mustParse("PATTERN SEQ(A a, B b) WHERE a.x - b.y - 1 = a.x - (b.y - 1)");
  const Expr& l = *q.where->lhs;
  EXPECT_EQ(l.lhs->binary, BinaryOp::kSub);  // (a.x - b.y) - 1
  EXPECT_EQ(l.rhs->kind, ExprKind::kLiteral);
  const Expr& r = *q.where->rhs;
  EXPECT_EQ(r.lhs->kind, ExprKind::kAttr);  // a.x - (b.y - 1)
  EXPECT_EQ(r.rhs->binary, BinaryOp::kSub);
}

TEST(ParserTest, AlgebraOperatorsEachHaveTheirOwnKind) {
  const std::pair<const char*, PatternKind> cases[] = {
      {"A + B", PatternKind::kAnd},
      {"AND(A, B)", PatternKind::kAnd},
      {"A | B", PatternKind::kOr},
      {"OR(A, B)", PatternKind::kOr},
      {"A ; B", PatternKind::kSeq},
      {"SEQ(A, B)", PatternKind::kSeq},
      {"A ~ B", PatternKind::kConcat},
      {"A || B", PatternKind::kConcurrent},
      {"A - B", PatternKind::kNegation},
      {"A*", PatternKind::kIteration},
      {"A a[a.x > 3]", PatternKind::kSelection},
      {"AGG(A* a[], sum(a[].qty) > 100)", PatternKind::kAggregation},
      {"WITHIN(A ; B, 10)", PatternKind::kTimeRestriction},
  };
  for (const auto& [text, kind] : cases) {
    EXPECT_EQ(mustParse(std::string("PATTERN ") + text).pattern->kind, kind) << text;
  }
}

TEST(ParserTest, AlgebraPrecedenceLoosestToTightest) {
  // |  <  +  <  ||  <  -  <  ; ~  <  postfix
  EXPECT_EQ(shape("A | B + C"), "OR(A, AND(B, C))");
  EXPECT_EQ(shape("A + B | C"), "OR(AND(A, B), C)");
  EXPECT_EQ(shape("A + B || C"), "AND(A, (B || C))");
  EXPECT_EQ(shape("A || B - C"), "(A || (B - C))");
  EXPECT_EQ(shape("A - B ; C"), "(A - SEQ(B, C))");
  EXPECT_EQ(shape("A ; B - C"), "(SEQ(A, B) - C)");
  EXPECT_EQ(shape("A ; B*"), "SEQ(A, B*)");
  EXPECT_EQ(shape("A ~ B*"), "(A ~ B*)");
  EXPECT_EQ(shape("A | B ; C + D ~ E"), "OR(A, AND(SEQ(B, C), (D ~ E)))");
}

TEST(ParserTest, AlgebraAssociativity) {
  // n-ary operators collect a whole chain into one node...
  EXPECT_EQ(shape("A ; B ; C"), "SEQ(A, B, C)");
  EXPECT_EQ(shape("A + B + C"), "AND(A, B, C)");
  EXPECT_EQ(shape("A | B | C"), "OR(A, B, C)");
  // ...unless parentheses group them.
  EXPECT_EQ(shape("(A ; B) ; C"), "SEQ(SEQ(A, B), C)");
  EXPECT_EQ(shape("A ; (B ; C)"), "SEQ(A, SEQ(B, C))");
  // Binary operators associate to the left.
  EXPECT_EQ(shape("A - B - C"), "((A - B) - C)");
  EXPECT_EQ(shape("A ~ B ~ C"), "((A ~ B) ~ C)");
  EXPECT_EQ(shape("A || B || C"), "((A || B) || C)");
  // ';' and '~' share a level, left to right.
  EXPECT_EQ(shape("A ; B ~ C ; D"), "SEQ((SEQ(A, B) ~ C), D)");
  EXPECT_EQ(shape("A ~ B ; C"), "SEQ((A ~ B), C)");
  EXPECT_EQ(shape("A - (B - C)"), "(A - (B - C))");
}

TEST(ParserTest, PostfixOperatorsChain) {
  EXPECT_EQ(shape("(A ; B)*"), "SEQ(A, B)*");
  EXPECT_EQ(shape("A**"), "A**");
  EXPECT_EQ(shape("(A a ; B b)[a.x < b.x]*"), "SEQ(A a, B b)[a.x < b.x]*");
  Query q = mustParse("PATTERN (A a ; B b)[a.x < b.x]");
  ASSERT_EQ(q.pattern->kind, PatternKind::kSelection);
  EXPECT_EQ(q.pattern->children[0]->kind, PatternKind::kSeq);
  EXPECT_EQ(q.pattern->predicate->binary, BinaryOp::kLt);
}

TEST(ParserTest, KleeneNeedsEmptyBracketsOtherwisePlusIsConjunction) {
  // `B+ b[]` is a Kleene element; `B + b[...]` is a conjunction with a
  // selection on an element of type b.
  Query kleene = mustParse("PATTERN SEQ(A a, B+ b[])");
  EXPECT_EQ(kleene.pattern->children[1]->kind, PatternKind::kKleene);
  Query conj = mustParse("PATTERN B + b x[x.v > 1]");
  ASSERT_EQ(conj.pattern->kind, PatternKind::kAnd);
  EXPECT_EQ(conj.pattern->children[1]->kind, PatternKind::kSelection);
}

TEST(ParserTest, KleeneWithoutBracketsSaysWhatItMeansAndSuggestsBrackets) {
  EXPECT_EQ(errorOf("PATTERN SEQ(Temp a,\n  Temp+ b)\nWHERE b.value > a.value"),
            "line 2, column 7: 'Temp+ b' is not a Kleene element: a Kleene variable needs '[]', "
            "as in 'Temp+ b[]'; for the conjunction of Temp and an event of type 'b', write "
            "'Temp + b'");
  EXPECT_EQ(errorOf("PATTERN SEQ(Temp a, Temp* b)"),
            "line 1, column 25: 'Temp* b' is not a Kleene element: a Kleene variable needs '[]', "
            "as in 'Temp* b[]'");
  // Written apart, or with a variable of its own, it is the conjunction.
  EXPECT_EQ(shape("Temp + b"), "AND(Temp, b)");
  EXPECT_EQ(shape("Temp+ B b"), "AND(Temp, B b)");
}

TEST(ParserTest, AggregationAndTimeRestriction) {
  Query q = mustParse(
      "PATTERN WITHIN(SEQ(A a, AGG(B* b[], sum(b[].qty) > 100 AND count(b[]) >= 2)), 50)");
  ASSERT_EQ(q.pattern->kind, PatternKind::kTimeRestriction);
  EXPECT_EQ(q.pattern->window, 50);
  const PatternNode& agg = *q.pattern->children[0]->children[1];
  ASSERT_EQ(agg.kind, PatternKind::kAggregation);
  EXPECT_EQ(agg.children[0]->kind, PatternKind::kKleene);
  EXPECT_EQ(agg.predicate->binary, BinaryOp::kAnd);
  EXPECT_EQ(q.findVariable("b")->kind, VarKind::kKleene);
}

TEST(ParserTest, ElementsWithoutVariables) {
  Query q = mustParse("PATTERN (A ; B) - C");
  EXPECT_TRUE(q.variables.empty());
  EXPECT_EQ(q.pattern->children[0]->children[0]->type, "A");
  EXPECT_EQ(q.pattern->children[0]->children[0]->var, "");
}

TEST(ParserTest, ReturnNamesAndExpressions) {
  Query q = mustParse(
      "PATTERN SEQ(A a, B+ b[]) RETURN Out(a.symbol, b[1].price, b[last].price, "
      "sum(b[].qty), count(b[]), a.ts, a.price * 2 AS doubled, b[2].x AS second)");
  std::vector<std::string> names;
  for (const ReturnItem& item : q.returns->items) names.push_back(item.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a_symbol", "b_1_price", "b_last_price", "sum_b_qty",
                                             "count_b", "a_ts", "doubled", "second"}));
  EXPECT_TRUE(mustParse("PATTERN A a RETURN Empty").returns->items.empty());
  EXPECT_TRUE(mustParse("PATTERN A a RETURN Empty()").returns->items.empty());
}

TEST(ParserTest, SyntaxErrorsNameLineColumnExpectedAndFound) {
  EXPECT_EQ(errorOf("SEQ(A a)"), "line 1, column 1: expected keyword PATTERN, found keyword SEQ");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b"),
            "line 1, column 21: expected ',' or ')', found end of input");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a,\n  B b))"),
            "line 2, column 7: expected WHERE, WITHIN, PROBABILITY, PARTITION BY, STRATEGY, "
            "CONTEXT, RETURN, EMIT, AFTER MATCH or end of input, found ')'");
  EXPECT_EQ(errorOf("PATTERN"),
            "line 1, column 8: expected an event type, '(', SEQ, AND, OR, NOT, AGG or WITHIN, "
            "found end of input");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b) WHERE a.x >"),
            "line 1, column 34: expected an expression, found end of input");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b) WHERE a > 1"),
            "line 1, column 31: expected '.' or '[' after variable 'a', found '>'");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b) WHERE (a.x > 1"),
            "line 1, column 37: expected an operator or ')', found end of input");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b) WHERE a.x < b.x < 3"),
            "line 1, column 39: comparisons do not chain: write 'a < b AND b < c'");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B+ b[]) WHERE b[j].x > 1"),
            "line 1, column 34: expected 'i', 'i-1', 'last' or a position, found identifier 'j'");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B+ b[]) WHERE b[i-2].x > 1"),
            "line 1, column 36: expected 1 after 'i-' (b[i-1] is the previous element), found "
            "integer 2");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B+ b[]) WHERE b[0].x > 1"),
            "line 1, column 34: a Kleene position must be a positive integer, found 0");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B+ b[]) WHERE sum(b[]) > 1"),
            "line 1, column 39: expected '.' and an attribute: sum(b[].attr), found ')'");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B+ b[]) WHERE median(b[].x) > 1"),
            "line 1, column 32: unknown function 'median'; expected count, sum, avg, min, max, "
            "stddev, first or last");
  EXPECT_EQ(errorOf("PATTERN A a STRATEGY skip_till_some_match"),
            "line 1, column 22: unknown strategy 'skip_till_some_match'; expected "
            "strict_contiguity, skip_till_next_match or skip_till_any_match");
  EXPECT_EQ(errorOf("PATTERN A a CONTEXT chronicle"),
            "line 1, column 21: unknown context 'chronicle'; expected recent or unrestricted");
  EXPECT_EQ(errorOf("PATTERN A a PARTITION symbol"),
            "line 1, column 23: expected keyword BY, found identifier 'symbol'");
  EXPECT_EQ(errorOf("PATTERN A a RETURN Out(a.x + 1)"),
            "line 1, column 24: RETURN item 'a.x + 1' needs a name: write 'expr AS name'");
  EXPECT_EQ(errorOf("PATTERN A a RETURN Out(a.x, a.x)"),
            "line 1, column 29: duplicate RETURN attribute 'a_x'");
  EXPECT_EQ(errorOf("PATTERN A a WITHIN 5 WITHIN 6"), "line 1, column 22: duplicate WITHIN clause");
  EXPECT_EQ(errorOf("PATTERN A a PARTITION BY s, s"),
            "line 1, column 29: duplicate PARTITION BY attribute 's'");
  EXPECT_EQ(errorOf("PATTERN NOT C c"),
            "line 1, column 13: expected '(' after NOT, found identifier 'C'");
  EXPECT_EQ(errorOf("PATTERN WITHIN(A ; B)"),
            "line 1, column 21: expected ',' and a time bound, found ')'");
  EXPECT_EQ(errorOf("PATTERN A a WHERE a.x = 'open"),
            "line 1, column 25: unterminated string literal");
}

TEST(ParserTest, WithinMustBePositive) {
  EXPECT_EQ(errorOf("PATTERN A a WITHIN 0"),
            "line 1, column 20: WITHIN must be a positive integer, found 0");
  EXPECT_EQ(errorOf("PATTERN A a WITHIN -5"),
            "line 1, column 20: expected a positive integer, found '-'");
  EXPECT_EQ(errorOf("PATTERN A a WITHIN 2.5"),
            "line 1, column 20: expected a positive integer, found number 2.5");
  EXPECT_EQ(errorOf("PATTERN WITHIN(A, 0)"),
            "line 1, column 19: a time restriction must be a positive integer, found 0");
}

Query parsedIn(TimeUnit ts_unit, std::string_view text) {
  Result<Query> r = parseQuery(text, ParseOptions{ts_unit});
  if (!r.isOk()) {
    ADD_FAILURE() << text << "\n-> " << r.status().toString();
    return *parseQuery("PATTERN ParseFailed");
  }
  return *r;
}

std::string errorIn(TimeUnit ts_unit, std::string_view text) {
  Result<Query> r = parseQuery(text, ParseOptions{ts_unit});
  return r.isOk() ? "OK" : r.status().message();
}

TEST(ParserTest, DurationUnitsConvertToTheDeclaredTsUnit) {
  EXPECT_EQ(parsedIn(TimeUnit::kMilliseconds, "PATTERN A a WITHIN 30 s").within, 30'000);
  EXPECT_EQ(parsedIn(TimeUnit::kMilliseconds, "PATTERN A a WITHIN 250 ms").within, 250);
  EXPECT_EQ(parsedIn(TimeUnit::kMilliseconds, "PATTERN A a WITHIN 5 min").within, 300'000);
  EXPECT_EQ(parsedIn(TimeUnit::kMilliseconds, "PATTERN A a WITHIN 2 h").within, 7'200'000);
  EXPECT_EQ(parsedIn(TimeUnit::kMilliseconds, "PATTERN A a WITHIN 3000 us").within, 3);
  EXPECT_EQ(parsedIn(TimeUnit::kSeconds, "PATTERN A a WITHIN 2 h").within, 7'200);
  EXPECT_EQ(parsedIn(TimeUnit::kSeconds, "PATTERN A a WITHIN 2000 ms").within, 2);
  EXPECT_EQ(parsedIn(TimeUnit::kMicroseconds, "PATTERN A a WITHIN 1 s").within, 1'000'000);
  // A bare number keeps meaning ts units, with or without a declared unit.
  EXPECT_EQ(parsedIn(TimeUnit::kSeconds, "PATTERN A a WITHIN 30").within, 30);
  EXPECT_EQ(parsedIn(TimeUnit::kNone, "PATTERN A a WITHIN 30").within, 30);
}

TEST(ParserTest, TimeRestrictionTakesAUnitToo) {
  const Query q = parsedIn(TimeUnit::kMilliseconds, "PATTERN WITHIN(A ; B, 2 s) CONTEXT recent");
  EXPECT_EQ(q.pattern->window, 2'000);
  // The unit is gone once parsed: the query prints, and parses back, in ts units.
  EXPECT_EQ(toString(*q.pattern), "WITHIN(SEQ(A, B), 2000)");
  const Query clause =
      parsedIn(TimeUnit::kMilliseconds, "PATTERN SEQ(A a, B b) WITHIN 2 s PARTITION BY id");
  EXPECT_EQ(clause.within, 2'000);
  EXPECT_EQ(clause.partition_by, std::vector<std::string>{"id"});
}

TEST(ParserTest, AUnitNeedsADeclaredTsUnit) {
  EXPECT_EQ(errorOf("PATTERN A a\nWITHIN 30 s"),
            "line 2, column 11: WITHIN 30 s: the input's ts has no declared time unit, so a "
            "duration is a number of ts units; declare the unit (time-unit=\"ms\" on the query, "
            "--time-unit ms with cepbus match) or drop the unit");
  EXPECT_EQ(errorIn(TimeUnit::kNone, "PATTERN WITHIN(A ; B, 5 min)"),
            "line 1, column 25: the time restriction 5 min: the input's ts has no declared time "
            "unit, so a duration is a number of ts units; declare the unit (time-unit=\"ms\" on "
            "the query, --time-unit ms with cepbus match) or drop the unit");
}

TEST(ParserTest, UnknownUnitsSayWhichUnitsThereAre) {
  EXPECT_EQ(errorIn(TimeUnit::kMilliseconds, "PATTERN A a WITHIN 30 parsecs"),
            "line 1, column 23: unknown time unit 'parsecs'; the units are us, ms, s, min and h");
  EXPECT_EQ(errorIn(TimeUnit::kMilliseconds, "PATTERN A a WITHIN 30 seconds"),
            "line 1, column 23: unknown time unit 'seconds'; write s (the units are us, ms, s, "
            "min and h)");
  EXPECT_EQ(errorIn(TimeUnit::kMilliseconds, "PATTERN A a WITHIN 5 m"),
            "line 1, column 22: unknown time unit 'm'; write min (the units are us, ms, s, min "
            "and h)");
  EXPECT_EQ(errorIn(TimeUnit::kMilliseconds, "PATTERN A a WITHIN 5 MS"),
            "line 1, column 22: unknown time unit 'MS'; write ms (units are lower case: us, ms, "
            "s, min and h)");
  // An unknown unit is named before the missing declaration: it is wrong either way.
  EXPECT_EQ(errorOf("PATTERN A a WITHIN 30 parsecs"),
            "line 1, column 23: unknown time unit 'parsecs'; the units are us, ms, s, min and h");
}

TEST(ParserTest, DurationsMustBeWholeTsUnitsAndFit) {
  EXPECT_EQ(errorIn(TimeUnit::kSeconds, "PATTERN A a WITHIN 2500 ms"),
            "line 1, column 20: WITHIN 2500 ms is not a whole number of the input's ts units (s)");
  EXPECT_EQ(errorIn(TimeUnit::kMilliseconds, "PATTERN WITHIN(A ; B, 1500 us)"),
            "line 1, column 23: the time restriction 1500 us is not a whole number of the input's "
            "ts units (ms)");
  EXPECT_EQ(errorIn(TimeUnit::kMilliseconds, "PATTERN A a WITHIN 9999999999999 h"),
            "line 1, column 20: WITHIN 9999999999999 h is too long: it does not fit 64 bits of "
            "the input's ts units (ms)");
  // The largest that fits still parses.
  EXPECT_EQ(parsedIn(TimeUnit::kMilliseconds, "PATTERN A a WITHIN 2562047788015 h").within,
            int64_t{2'562'047'788'015} * 3'600'000);
}

TEST(ParserTest, DurationsWithUnitsMustBePositive) {
  EXPECT_EQ(errorIn(TimeUnit::kMilliseconds, "PATTERN A a WITHIN 0 s"),
            "line 1, column 20: WITHIN must be a positive integer, found 0");
  EXPECT_EQ(errorIn(TimeUnit::kMilliseconds, "PATTERN A a WITHIN -5 s"),
            "line 1, column 20: expected a positive integer, found '-'");
  EXPECT_EQ(errorIn(TimeUnit::kMilliseconds, "PATTERN WITHIN(A, 0 ms)"),
            "line 1, column 19: a time restriction must be a positive integer, found 0");
}

TEST(ParserTest, TsUnitNames) {
  EXPECT_EQ(tsUnitNamed("us"), TimeUnit::kMicroseconds);
  EXPECT_EQ(tsUnitNamed("ms"), TimeUnit::kMilliseconds);
  EXPECT_EQ(tsUnitNamed("s"), TimeUnit::kSeconds);
  // min and h are durations, not units a timestamp is counted in.
  EXPECT_EQ(tsUnitNamed("min"), std::nullopt);
  EXPECT_EQ(tsUnitNamed("h"), std::nullopt);
  EXPECT_EQ(tsUnitNamed("MS"), std::nullopt);
  EXPECT_EQ(tsUnitNamed(""), std::nullopt);
}

TEST(ParserTest, SemanticErrorsNameTheirPlace) {
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b)\nWHERE a.x = z.x"),
            "line 2, column 13: unknown variable 'z'");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B a)"),
            "line 1, column 18: duplicate variable 'a' (first bound at line 1, column 13)");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, NOT(C a), B b)"),
            "line 1, column 18: duplicate variable 'a' (first bound at line 1, column 13)");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b) WHERE a[i].x > 1"),
            "line 1, column 29: 'a' is not a Kleene variable; indexing it needs 'Type+ a[]' in "
            "the pattern");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B+ b[]) WHERE b.x > 1"),
            "line 1, column 32: 'b' is a Kleene variable: write b[i].x, b[1].x, b[last].x or an "
            "aggregate such as avg(b[].x)");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b) WHERE sum(a[].x) > 1"),
            "line 1, column 29: sum() needs a Kleene variable ('Type+ a[]'); 'a' is not one");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b) RETURN Out(q.x)"),
            "line 1, column 34: unknown variable 'q'");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, NOT(C c), B b) RETURN Out(c.x)"),
            "line 1, column 44: negated variable 'c' matches no event and cannot be returned");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B+ b[]) RETURN Out(b[i].x AS x)"),
            "line 1, column 37: b[i] and b[i-1] are iteration predicates and only allowed in "
            "WHERE");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B+ b[], C+ c[]) WHERE b[i].x > c[i].x"),
            "line 1, column 49: a predicate may index only one Kleene variable with i; found 'b' "
            "and 'c'");
}

TEST(ParserTest, NegationStandsBetweenPositiveElementsOrAtAnEdgeWithWithin) {
  // At an edge of the pattern's SEQ (leading or trailing negation) WITHIN bounds the absence.
  EXPECT_EQ(errorOf("PATTERN SEQ(NOT(C c), A a, B b) WITHIN 10"), "OK");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b, NOT(C c)) WHERE c.id = a.id WITHIN 10"), "OK");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, NOT(C c)) WITHIN 10"), "OK");
  EXPECT_EQ(errorOf("PATTERN SEQ(NOT(C c), A a, NOT(D d)) WITHIN 10"), "OK");
  EXPECT_EQ(errorOf("PATTERN SEQ(NOT(C c), A a, B b)"),
            "line 1, column 13: 'NOT(C c)' starts the pattern, so it needs WITHIN n: the absence "
            "is checked over the n time units before the last one");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b, NOT(C c))"),
            "line 1, column 23: 'NOT(C c)' ends the pattern, so it needs WITHIN n: the absence is "
            "checked over the n time units after the first positive event");
  EXPECT_EQ(errorOf("PATTERN SEQ(NOT(C c)) WITHIN 10"),
            "line 1, column 13: 'NOT(C c)' needs a positive element in its SEQ(...) to negate "
            "around");
  EXPECT_EQ(errorOf("PATTERN SEQ(SEQ(A a, NOT(C c)), B b) WITHIN 10"),
            "line 1, column 22: 'NOT(C c)' may start or end only the pattern's outermost "
            "SEQ(...)");
  EXPECT_EQ(errorOf("PATTERN AND(A a, NOT(C c), B b)"),
            "line 1, column 18: NOT(...) is only allowed inside SEQ(...); write 'A - B' for "
            "negation elsewhere");
  EXPECT_EQ(errorOf("PATTERN NOT(C c)"),
            "line 1, column 9: NOT(...) is only allowed inside SEQ(...); write 'A - B' for "
            "negation elsewhere");
  // Two negations in a row are still between the same two positives.
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, NOT(C c), NOT(D d), B b)"), "OK");
}

TEST(ParserTest, KleeneOnlyInsideSeqOrAgg) {
  EXPECT_EQ(errorOf("PATTERN B+ b[]"),
            "line 1, column 9: Kleene element 'B+ b[]' is only allowed inside SEQ(...) or as "
            "the operand of AGG(...)");
  EXPECT_EQ(errorOf("PATTERN A a ~ B* b[]"),
            "line 1, column 15: Kleene element 'B* b[]' is only allowed inside SEQ(...) or as "
            "the operand of AGG(...)");
  // `;` builds a SEQ, so a Kleene element may follow it.
  EXPECT_EQ(errorOf("PATTERN A a ; B* b[] ; C c"), "OK");
}

TEST(ParserTest, SelectionAndAggregationSeeOnlyTheirOperandsVariables) {
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, (B b)[a.x > 1])"),
            "line 1, column 24: variable 'a' is not bound inside the selected expression");
  EXPECT_EQ(errorOf("PATTERN SEQ(A+ a[], AGG(B+ b[], sum(a[].x) > 1))"),
            "line 1, column 33: variable 'a' is not bound inside the aggregated expression");
  EXPECT_EQ(errorOf("PATTERN (A a)[a.x > 1] ; B b"), "OK");
}

TEST(ParserTest, StaticTypeErrors) {
  EXPECT_EQ(errorOf("PATTERN A a WHERE a.x + 1"),
            "line 1, column 19: WHERE needs a boolean condition, found a number");
  EXPECT_EQ(errorOf("PATTERN A a WHERE a.x > 'IBM' + 1"),
            "line 1, column 25: arithmetic needs numbers, found a string");
  EXPECT_EQ(errorOf("PATTERN A a WHERE a.ts = 'noon'"),
            "line 1, column 19: cannot compare a number with a string");
  EXPECT_EQ(errorOf("PATTERN A a WHERE a.x AND 3"),
            "line 1, column 27: AND needs a boolean condition, found a number");
  EXPECT_EQ(errorOf("PATTERN A a WHERE NOT 'x'"),
            "line 1, column 23: NOT needs a boolean condition, found a string");
  EXPECT_EQ(errorOf("PATTERN A a WHERE -(a.x > 1) = 1"),
            "line 1, column 19: unary '-' needs a number, found a boolean");
  EXPECT_EQ(errorOf("PATTERN A a[a.x] ; B"), "OK");  // attribute types are known only at run time
  EXPECT_EQ(errorOf("PATTERN AGG(A* a[], count(a[]))"),
            "line 1, column 21: an aggregation needs a boolean condition, found a number");
}

TEST(ParserTest, DeepInputIsRejectedNotAStackOverflow) {
  const std::string parens = std::string(300, '(') + "a.x > 1" + std::string(300, ')');
  EXPECT_EQ(errorOf("PATTERN A a WHERE " + parens),
            "line 1, column 219: nesting deeper than 200 levels");
  std::string nots;
  for (int i = 0; i < 300; ++i) nots += "NOT ";
  EXPECT_EQ(errorOf("PATTERN A a WHERE " + nots + "a.x > 1").substr(0, 19), "line 1, column 815:");
  EXPECT_EQ(errorOf("PATTERN " + std::string(300, '(') + "A" + std::string(300, ')')),
            "line 1, column 209: nesting deeper than 200 levels");

  // Long chains do not recurse while parsing but build tall trees.
  std::string chain = "PATTERN A a WHERE a.x > 0";
  for (int i = 0; i < 1200; ++i) chain += " AND a.x > 0";
  EXPECT_EQ(errorOf(chain), "line 1, column 19: expression deeper than 1000 operators");
  EXPECT_EQ(errorOf("PATTERN A" + std::string(1200, '*')),
            "line 1, column 9: expression deeper than 1000 operators");
  std::string concat = "PATTERN A";
  for (int i = 0; i < 1200; ++i) concat += " ~ A";
  EXPECT_EQ(errorOf(concat), "line 1, column 9: expression deeper than 1000 operators");

  // Wide is fine: an n-ary chain stays one level.
  std::string wide = "PATTERN A";
  for (int i = 0; i < 1200; ++i) wide += " ; A";
  EXPECT_EQ(errorOf(wide), "OK");
  std::string many = "PATTERN A a WHERE a.x > 0";
  for (int i = 0; i < 500; ++i) many += " AND a.x > 0";
  EXPECT_EQ(errorOf(many), "OK");
}

TEST(ParserTest, FilterExpressions) {
  Result<ExprPtr> f = parseFilter("price > 10 AND symbol = 'IBM' OR type = 'Bond'");
  ASSERT_TRUE(f.isOk()) << f.status().toString();
  const Expr& e = **f;
  ASSERT_EQ(e.binary, BinaryOp::kOr);
  EXPECT_EQ(e.lhs->lhs->lhs->ref.var, "");
  EXPECT_EQ(e.lhs->lhs->lhs->ref.attr, "price");
  EXPECT_EQ(e.rhs->lhs->ref.builtin, Builtin::kType);

  auto err = [](std::string_view text) {
    Result<ExprPtr> r = parseFilter(text);
    return r.isOk() ? std::string("OK") : r.status().message();
  };
  EXPECT_EQ(err("a.price > 10"),
            "line 1, column 2: a filter names attributes of one event: write 'a' without a "
            "variable");
  EXPECT_EQ(err("count(x) > 1"),
            "line 1, column 6: a filter has no functions: 'count(' is not allowed");
  EXPECT_EQ(err("price > 10 )"),
            "line 1, column 12: expected an operator or end of input, found ')'");
  EXPECT_EQ(err("price + 1"),
            "line 1, column 1: a filter needs a boolean condition, found a number");
  EXPECT_EQ(err(""), "line 1, column 1: expected an expression, found end of input");
}

TEST(ParserTest, OutputControlClauses) {
  Query q = mustParse(
      "PATTERN SEQ(Temp a, Temp b) WHERE a.value > 80 WITHIN 60\n"
      "EMIT FIRST EVERY 60 PER a.sensor AFTER MATCH SKIP PAST LAST EVENT RETURN Hot(a.sensor)");
  ASSERT_TRUE(q.emit.has_value());
  EXPECT_EQ(q.emit->kind, EmitKind::kFirst);
  EXPECT_EQ(q.emit->every, 60);
  ASSERT_NE(q.emit->per, nullptr);
  EXPECT_EQ(q.emit->per->ref.var, "a");
  EXPECT_EQ(q.emit->per->ref.attr, "sensor");
  EXPECT_EQ(q.emit->pos.line, 2);
  EXPECT_EQ(q.emit->pos.column, 1);
  EXPECT_TRUE(q.skip_past_last_event);
  ASSERT_TRUE(q.returns.has_value());
  EXPECT_EQ(q.returns->type, "Hot");

  Query last = mustParse("PATTERN SEQ(A a, B b) emit last every 10");
  ASSERT_TRUE(last.emit.has_value());
  EXPECT_EQ(last.emit->kind, EmitKind::kLast);
  EXPECT_EQ(last.emit->per, nullptr);
  EXPECT_FALSE(last.skip_past_last_event);
  EXPECT_FALSE(mustParse("PATTERN SEQ(A a, B b)").emit.has_value());
}

TEST(ParserTest, OutputControlDurationsTakeUnits) {
  Result<Query> q = parseQuery("PATTERN SEQ(A a, B b) WITHIN 1 s EMIT FIRST EVERY 1 min",
                               ParseOptions{TimeUnit::kMilliseconds});
  ASSERT_TRUE(q.isOk()) << q.status().toString();
  EXPECT_EQ(q->within, 1000);
  EXPECT_EQ(q->emit->every, 60000);
}

TEST(ParserTest, OutputControlErrorsNameLineAndColumn) {
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b) EMIT FIRST EVERY 0"),
            "line 1, column 40: the EMIT interval (EVERY) must be a positive integer, found 0");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b) EMIT FIRST EVERY -5"),
            "line 1, column 40: expected a positive integer, found '-'");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b)\nEMIT FIRST EVERY 5 PER c.sensor"),
            "line 2, column 24: unknown variable 'c'");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, NOT(C c), B b) EMIT LAST EVERY 5 PER c.k"),
            "line 1, column 55: negated variable 'c' matches no event and cannot key EMIT PER");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b) EMIT FIRST EVERY 5 EMIT LAST EVERY 5"),
            "line 1, column 42: duplicate EMIT clause");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b) AFTER MATCH SKIP PAST LAST EVENT\n"
                    "AFTER MATCH SKIP PAST LAST EVENT"),
            "line 2, column 1: duplicate AFTER MATCH clause");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b) EMIT EVERY 5"),
            "line 1, column 28: expected FIRST or LAST after EMIT (EMIT FIRST EVERY d or EMIT LAST "
            "EVERY d), found identifier 'EVERY'");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b) AFTER MATCH SKIP TO NEXT ROW"),
            "line 1, column 40: expected PAST after AFTER MATCH SKIP, found identifier 'TO'");
}

}  // namespace
TEST(ParserTest, ProbabilityClauseAnywhereAfterPatternAtMostOnce) {
  EXPECT_EQ(*mustParse("PATTERN SEQ(A a, B b) PROBABILITY >= 0.5 WITHIN 3").min_probability, 0.5);
  EXPECT_EQ(*mustParse("PATTERN SEQ(A a) WITHIN 3 probability >= 1").min_probability, 1.0);
  EXPECT_EQ(*mustParse("PATTERN SEQ(A a) PROBABILITY >= 0").min_probability, 0.0);
  EXPECT_FALSE(mustParse("PATTERN SEQ(A a)").min_probability.has_value());
  EXPECT_EQ(errorOf("PATTERN SEQ(A a) PROBABILITY >= 1.5"),
            "line 1, column 33: PROBABILITY must be in [0, 1], found 1.5");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a) PROBABILITY >= -0.1"),
            "line 1, column 33: expected a probability in [0, 1], found '-'");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a) PROBABILITY > 0.5"),
            "line 1, column 30: expected '>=' after PROBABILITY (a match is kept when its "
            "probability is at least p), found '>'");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a) PROBABILITY >= 0.5 PROBABILITY >= 0.6"),
            "line 1, column 37: duplicate PROBABILITY clause");
}

TEST(ParserTest, MatchProbabilityOnlyInReturn) {
  const Query q = mustParse("PATTERN SEQ(A a, B b) RETURN P(prob(), prob() * 2 AS twice)");
  ASSERT_EQ(q.returns->items.size(), 2u);
  EXPECT_EQ(q.returns->items[0].expr->kind, ExprKind::kMatchProb);
  EXPECT_EQ(q.returns->items[0].name, "prob");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B b) WHERE prob() > 0.5"),
            "line 1, column 29: prob() is the probability of a whole match and is only allowed "
            "in RETURN; filter matches with PROBABILITY >= p");
}

}  // namespace cepbus::pattern
