#include "bus/core/pattern/printer.h"

#include <gtest/gtest.h>

#include "bus/core/pattern/parser.h"

namespace cepbus::pattern {
namespace {

std::string canonical(std::string_view text) {
  Result<Query> r = parseQuery(text);
  if (!r.isOk()) {
    ADD_FAILURE() << text << "\n-> " << r.status().toString();
    return "";
  }
  return toString(*r);
}

TEST(PrinterTest, CanonicalQuery) {
  EXPECT_EQ(canonical("pattern seq(Stock a, Stock b) where a.price=b.price within 1000 "
                      "return Eq(a.symbol, a.price*2 as twice) context recent "
                      "partition by symbol,region strategy skip-till-next-match"),
            "PATTERN SEQ(Stock a, Stock b)\n"
            "WHERE a.price = b.price\n"
            "WITHIN 1000\n"
            "PARTITION BY symbol, region\n"
            "STRATEGY skip_till_next_match\n"
            "CONTEXT recent\n"
            "RETURN Eq(a.symbol, a.price * 2 AS twice)");
}

TEST(PrinterTest, StrategyIsAlwaysPrintedReturnNamesOnlyWhenNotDefault) {
  EXPECT_EQ(canonical("PATTERN A a RETURN R(a.x AS a_x, a.y AS why)"),
            "PATTERN A a\nSTRATEGY skip_till_any_match\nRETURN R(a.x, a.y AS why)");
}

TEST(PrinterTest, ExpressionsUseTheFewestParentheses) {
  auto where = [](std::string_view w) {
    Result<Query> r = parseQuery("PATTERN SEQ(A a, B+ b[]) WHERE " + std::string(w));
    EXPECT_TRUE(r.isOk()) << w << ": " << r.status().toString();
    return r.isOk() ? toString(*r->where) : "";
  };
  EXPECT_EQ(where("((a.x + (b[i].y * 2)) > 3)"), "a.x + b[i].y * 2 > 3");
  EXPECT_EQ(where("(a.x + b[1].y) * 2 > 3"), "(a.x + b[1].y) * 2 > 3");
  EXPECT_EQ(where("a.x - (a.y - a.z) = 0"), "a.x - (a.y - a.z) = 0");
  EXPECT_EQ(where("(a.x - a.y) - a.z = 0"), "a.x - a.y - a.z = 0");
  EXPECT_EQ(where("a.p OR a.q AND a.r"), "a.p OR a.q AND a.r");
  EXPECT_EQ(where("(a.p OR a.q) AND a.r"), "(a.p OR a.q) AND a.r");
  EXPECT_EQ(where("a.p AND (a.q AND a.r)"), "a.p AND (a.q AND a.r)");
  EXPECT_EQ(where("NOT (a.x = 1)"), "NOT a.x = 1");
  EXPECT_EQ(where("NOT (a.p AND a.q)"), "NOT (a.p AND a.q)");
  EXPECT_EQ(where("(a.x < a.y) = true"), "(a.x < a.y) = true");
  EXPECT_EQ(where("-(a.x + 1) < 0"), "-(a.x + 1) < 0");
  EXPECT_EQ(where("-(-a.x) < 0"), "-(-a.x) < 0");  // "--" would start a comment
  EXPECT_EQ(where("a.x - -3 > a.y * -1.5"), "a.x - -3 > a.y * -1.5");
  EXPECT_EQ(where("b[i].x > b[i-1].x AND b[last].x < b[2].x"),
            "b[i].x > b[i-1].x AND b[last].x < b[2].x");
  EXPECT_EQ(where("count(b[]) > 1 AND SUM(b[].q) > 2.0"), "count(b[]) > 1 AND sum(b[].q) > 2.0");
  EXPECT_EQ(where("a.s = \"it's\\\\\" AND a.t = 'tab\\t'"),
            "a.s = 'it\\'s\\\\' AND a.t = 'tab\\t'");
  EXPECT_EQ(where("a.b = TRUE OR a.c = false"), "a.b = true OR a.c = false");
}

TEST(PrinterTest, PatternsPrintInFunctionFormOrFullyParenthesized) {
  auto pattern = [](std::string_view p) {
    Result<Query> r = parseQuery("PATTERN " + std::string(p));
    EXPECT_TRUE(r.isOk()) << p << ": " << r.status().toString();
    return r.isOk() ? toString(*r->pattern) : "";
  };
  EXPECT_EQ(pattern("A ; B | C + D"), "OR(SEQ(A, B), AND(C, D))");
  EXPECT_EQ(pattern("SEQ(A a, NOT(C), B+ b[], D* d[], E e)"),
            "SEQ(A a, NOT(C), B+ b[], D* d[], E e)");
  EXPECT_EQ(pattern("A a* ~ B"), "((A a)* ~ B)");
  EXPECT_EQ(pattern("A a[a.x > 1]"), "(A a)[a.x > 1]");
  EXPECT_EQ(pattern("WITHIN(A || B, 7) - C"), "(WITHIN((A || B), 7) - C)");
  EXPECT_EQ(pattern("AGG(A* a[], avg(a[].v) < 3)"), "AGG(A* a[], avg(a[].v) < 3)");
}

// print(parse(text)) is a fixed point: parsing the printed text gives a tree
// that prints the same again.
TEST(PrinterTest, RoundTrip) {
  const char* queries[] = {
      "PATTERN SEQ(Stock a, Stock b, Stock c)\n"
      "WHERE a.price = b.price AND b.price = c.price AND a.symbol != b.symbol\n"
      "WITHIN 1000 STRATEGY skip_till_any_match\n"
      "RETURN EqualPrices(a.symbol, b.symbol, c.symbol, a.price)",
      "PATTERN SEQ(A a, NOT(C c), B+ b[], D d) WHERE b[i].price > b[i-1].price AND b[i].qty < 10 "
      "AND c.x = a.x AND count(b[]) >= 2 AND avg(b[].price) <= d.price - 1.25 "
      "PARTITION BY symbol STRATEGY strict-contiguity CONTEXT unrestricted "
      "RETURN Rise(a.symbol, b[1].price, b[last].price, max(b[].price) AS top, d.ts)",
      "PATTERN A | B + C || D - E ; F ~ G* | (H ; I)[true]",
      "PATTERN WITHIN(AGG(X* x[], sum(x[].qty) > 100 OR min(x[].qty) < -5), 60) ; Y y",
      "PATTERN (A a ; B b)[a.x % 2 = 1 AND NOT (b.s = 'q' OR b.s < \"r\")] WITHIN 5",
      "PATTERN SEQ(A a, B b) WHERE a.x / 2 * 3 - -a.y >= (b.z - 1) * -(2 + a.w) OR a.flag",
      "PATTERN SEQ(A a, B b) WHERE a.d = 1e-7 AND a.e = 12345678.875 AND a.f = -0.5",
      "PATTERN SEQ(T a, T b) WITHIN 60 EMIT FIRST EVERY 60 PER a.sensor RETURN Hot(a.sensor)",
      "PATTERN SEQ(T a, T b) AFTER MATCH SKIP PAST LAST EVENT EMIT LAST EVERY 10",
  };
  for (const char* q : queries) {
    const std::string once = canonical(q);
    ASSERT_FALSE(once.empty()) << q;
    EXPECT_EQ(canonical(once), once) << q;
  }
}

}  // namespace
TEST(PrinterTest, ProbabilityClauseAndMatchProbabilityRoundTrip) {
  for (const char* text : {"PATTERN SEQ(A a, B b) PROBABILITY >= 0.25 RETURN P(prob())",
                           "PATTERN SEQ(A a) WITHIN 4 PROBABILITY >= 1 RETURN P(prob() * 2 AS x)",
                           "PATTERN SEQ(A a) PROBABILITY >= 0.1"}) {
    auto q = parseQuery(text);
    ASSERT_TRUE(q.isOk()) << text << ": " << q.status().message();
    const std::string printed = toString(*q);
    EXPECT_NE(printed.find("PROBABILITY >= "), std::string::npos) << printed;
    auto again = parseQuery(printed);
    ASSERT_TRUE(again.isOk()) << printed;
    EXPECT_EQ(again->min_probability, q->min_probability) << printed;
    EXPECT_EQ(toString(*again), printed);
  }
}

}  // namespace cepbus::pattern
