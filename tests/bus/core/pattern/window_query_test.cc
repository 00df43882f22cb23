// The window half of the language: FROM ... WINDOW ... GROUP BY ... HAVING ...
// RETURN parsed, checked and printed on the pattern language's parser, and
// the refusal every pattern engine gives such a query (window_query.h).

#include "bus/core/pattern/window_query.h"

#include <gtest/gtest.h>

#include "bus/core/pattern/parser.h"
#include "bus/core/pattern/printer.h"

namespace cepbus::pattern {
namespace {

Query mustParse(std::string_view text, ParseOptions options = {}) {
  Result<Query> r = parseQuery(text, options);
  if (!r.isOk()) {
    ADD_FAILURE() << text << "\n-> " << r.status().toString();
    return *parseQuery("FROM ParseFailed t WINDOW TUMBLING 1 RETURN R(count(t))");
  }
  return *r;
}

std::string errorOf(std::string_view text, ParseOptions options = {}) {
  Result<Query> r = parseQuery(text, options);
  return r.isOk() ? "OK" : r.status().message();
}

TEST(WindowQueryTest, ParsesEveryClause) {
  const Query q = mustParse(R"(
    FROM Temp t WHERE t.value > 0
    WINDOW SLIDING 60 EVERY 10
    GROUP BY t.sensor, t.line
    HAVING avg(t.value) > 80 AND count(t) >= 3
    RETURN Hot(t.sensor, avg(t.value) AS mean, stddev(t.value), first(t.value), last(t.value),
               count(t.value), min(t.value), max(t.value), sum(t.value))
  )");
  ASSERT_TRUE(q.window.has_value());
  EXPECT_EQ(q.window->kind, WindowKind::kSliding);
  EXPECT_EQ(q.window->length, 60);
  EXPECT_EQ(q.window->every, 10);
  EXPECT_EQ(q.group_by, (std::vector<std::string>{"sensor", "line"}));
  ASSERT_NE(q.having, nullptr);
  ASSERT_NE(q.where, nullptr);
  ASSERT_EQ(q.pattern->kind, PatternKind::kEvent);
  EXPECT_EQ(q.pattern->type, "Temp");
  ASSERT_EQ(q.variables.size(), 1u);
  EXPECT_EQ(q.variables[0].name, "t");
  ASSERT_TRUE(q.returns.has_value());
  std::vector<std::string> names;
  for (const ReturnItem& item : q.returns->items) names.push_back(item.name);
  EXPECT_EQ(names, (std::vector<std::string>{"t_sensor", "mean", "stddev_t_value", "first_t_value",
                                             "last_t_value", "count_t_value", "min_t_value",
                                             "max_t_value", "sum_t_value"}));
  EXPECT_EQ(q.returns->items[1].expr->kind, ExprKind::kAggregate);
  EXPECT_EQ(q.returns->items[1].expr->ref.index, IndexKind::kNone);
}

TEST(WindowQueryTest, TumblingAndSessionWindows) {
  const Query tumbling = mustParse("FROM Login l WINDOW TUMBLING 300 RETURN Logins(count(l))");
  EXPECT_EQ(tumbling.window->kind, WindowKind::kTumbling);
  EXPECT_EQ(tumbling.window->length, 300);
  EXPECT_EQ(tumbling.window->every, 300);
  EXPECT_EQ(tumbling.returns->items[0].name, "count_l");
  const Query session =
      mustParse("from Trade x window session gap 2 group by x.symbol return Burst(x.symbol)");
  EXPECT_EQ(session.window->kind, WindowKind::kSession);
  EXPECT_EQ(session.window->length, 2);
  EXPECT_EQ(session.group_by, std::vector<std::string>{"symbol"});
}

TEST(WindowQueryTest, DurationsTakeUnitsAsWithinDoes) {
  const Query q = mustParse("FROM Temp t WINDOW SLIDING 1 min EVERY 10 s RETURN R(count(t))",
                            ParseOptions{TimeUnit::kMilliseconds});
  EXPECT_EQ(q.window->length, 60000);
  EXPECT_EQ(q.window->every, 10000);
  EXPECT_EQ(errorOf("FROM Temp t WINDOW TUMBLING 1 min RETURN R(count(t))").substr(0, 19),
            "line 1, column 31: ");
}

TEST(WindowQueryTest, WindowWordsStayFreeAsNames) {
  // WINDOW, SESSION, GROUP, ... are keywords only where a window query has them.
  const Query q = mustParse("PATTERN SEQ(Session window, Group having) WHERE window.gap = 1");
  EXPECT_FALSE(q.window.has_value());
  EXPECT_EQ(q.variables.size(), 2u);
  const Query w = mustParse(
      "FROM Session s WINDOW TUMBLING 5 GROUP BY s.group HAVING count(s) > 1 RETURN "
      "R(s.group)");
  EXPECT_EQ(w.group_by, std::vector<std::string>{"group"});
}

TEST(WindowQueryTest, PrintsCanonicallyAndReparses) {
  const char* texts[] = {
      "FROM Temp t WHERE t.value > 0 WINDOW SLIDING 60 EVERY 10 GROUP BY t.sensor HAVING "
      "avg(t.value) > 80 RETURN Hot(t.sensor, avg(t.value) AS mean, count(t))",
      "FROM Login l WINDOW TUMBLING 300 RETURN Logins(count(l))",
      "FROM Trade x WINDOW SESSION GAP 2 GROUP BY x.symbol, x.venue RETURN "
      "Burst(x.symbol, first(x.price), last(x.price))",
      "FROM Temp t WINDOW TUMBLING 60 RETURN Mean(avg(t.value) AS mean) EMIT EVERY 10",
  };
  for (const char* text : texts) {
    const std::string printed = toString(mustParse(text));
    EXPECT_EQ(printed.substr(0, 5), "FROM ");
    EXPECT_EQ(toString(mustParse(printed)), printed) << text;
  }
  EXPECT_EQ(toString(mustParse("FROM Login l WINDOW TUMBLING 300 RETURN Logins(count(l))")),
            "FROM Login l\nWINDOW TUMBLING 300\nRETURN Logins(count(l))");
}

TEST(WindowQueryTest, BadWindowsNameLineAndColumn) {
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 0 RETURN R(count(t))"),
            "line 1, column 26: the window length (TUMBLING) must be a positive integer, found 0");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING -5 RETURN R(count(t))"),
            "line 1, column 26: expected a positive integer, found '-'");
  EXPECT_EQ(errorOf("FROM T t WINDOW SLIDING 10 EVERY 0 RETURN R(count(t))"),
            "line 1, column 34: the slide (EVERY) must be a positive integer, found 0");
  EXPECT_EQ(errorOf("FROM T t\nWINDOW SLIDING 10 EVERY 20 RETURN R(count(t))"),
            "line 2, column 19: the slide (EVERY 20) is longer than the window (SLIDING 10): "
            "events between two windows would be in none; use a slide <= the length");
  EXPECT_EQ(errorOf("FROM T t WINDOW SESSION GAP 0 RETURN R(count(t))"),
            "line 1, column 29: the session gap (GAP) must be a positive integer, found 0");
  EXPECT_EQ(errorOf("FROM T t WINDOW SLIDING 10 RETURN R(count(t))"),
            "line 1, column 28: expected EVERY and the slide, as in 'SLIDING 60 EVERY 10', found "
            "keyword RETURN");
  EXPECT_EQ(errorOf("FROM T t WINDOW HOPPING 10 RETURN R(count(t))"),
            "line 1, column 17: expected TUMBLING, SLIDING or SESSION after WINDOW, found "
            "identifier 'HOPPING'");
  EXPECT_EQ(errorOf("FROM T WINDOW TUMBLING 1 RETURN R(count(t))"),
            "line 1, column 8: expected a variable after the event type, as in 'FROM T t', found "
            "identifier 'WINDOW'");
  EXPECT_EQ(errorOf("FROM T t RETURN R(count(t))"),
            "line 1, column 10: expected WHERE or WINDOW, found keyword RETURN");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 1"),
            "line 1, column 27: expected GROUP BY, HAVING or RETURN, found end of input");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 1 RETURN R"),
            "line 1, column 10: a window query returns its results: write RETURN Name(expr [AS "
            "alias], ...)");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 1 RETURN R(count(t)) WITHIN 5"),
            "line 1, column 47: expected EMIT EVERY or end of input, found keyword WITHIN");
}

TEST(WindowQueryTest, EmitEveryTakesADurationAndReservesPartial) {
  const Query q = mustParse("FROM T t WINDOW TUMBLING 60 RETURN R(count(t)) EMIT EVERY 10");
  EXPECT_EQ(q.window->emit_every, 10);
  EXPECT_EQ(mustParse("FROM T t WINDOW TUMBLING 60 RETURN R(count(t))").window->emit_every, 0);
  EXPECT_EQ(mustParse("FROM T t WINDOW TUMBLING 1 min RETURN R(count(t)) EMIT EVERY 10 s",
                      ParseOptions{.ts_unit = TimeUnit::kMilliseconds})
                .window->emit_every,
            10000);
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 60 RETURN R(count(t)) EMIT 10"),
            "line 1, column 53: expected EVERY and how often partial results come out, as in "
            "'EMIT EVERY 10', found integer 10");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 60 RETURN R(count(t)) EMIT EVERY 0"),
            "line 1, column 59: the partial results' period (EMIT EVERY) must be a positive "
            "integer, found 0");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 60 RETURN R(count(t) AS partial) EMIT EVERY 5"),
            "line 1, column 59: EMIT EVERY marks each result with the attribute 'partial'; RETURN "
            "names one too: rename it with AS");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 60 RETURN R(count(t)) EMIT EVERY 5 GROUP BY t.a"),
            "line 1, column 61: expected EMIT EVERY or end of input, found identifier 'GROUP'");
}

TEST(WindowQueryTest, GroupKeysAndAggregatesAreChecked) {
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 1 HAVING t.x > 1 RETURN R(count(t))"),
            "line 1, column 35: HAVING names t.x, which is neither grouped nor aggregated: add "
            "GROUP BY t.x or aggregate it, as in last(t.x)");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 1 GROUP BY t.a RETURN R(t.b)"),
            "line 1, column 50: RETURN names t.b, which is neither grouped nor aggregated: add "
            "GROUP BY t.b or aggregate it, as in last(t.b)");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 1 RETURN R(t.ts)"),
            "line 1, column 37: RETURN names t.ts, which is neither grouped nor aggregated: add "
            "GROUP BY t.ts or aggregate it, as in last(t.ts)");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 1 RETURN R(avg(t.type))"),
            "line 1, column 37: avg(t.type) aggregates numbers, and 'type' is a string");
  EXPECT_EQ(errorOf("FROM T t WHERE avg(t.x) > 1 WINDOW TUMBLING 1 RETURN R(count(t))"),
            "line 1, column 16: avg() in WHERE: WHERE keeps or drops single events; a condition "
            "over a window's aggregates goes in HAVING");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 1 RETURN R(sum(t[].x))"),
            "line 1, column 37: 't' is the FROM variable of a window query, not a Kleene "
            "variable: write avg(t.x)");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 1 RETURN R(count(u))"),
            "line 1, column 37: unknown variable 'u'");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 1 GROUP BY u.a RETURN R(count(t))"),
            "line 1, column 37: GROUP BY names attributes of the FROM variable: write 't.attr', "
            "found 'u'");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 1 GROUP BY t.a, t.a RETURN R(count(t))"),
            "line 1, column 44: duplicate GROUP BY attribute 't.a'");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 1 GROUP BY t.ts RETURN R(count(t))"),
            "line 1, column 39: GROUP BY t.ts: the built-in 'ts' cannot be a group key");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 1 HAVING count(t) RETURN R(count(t))"),
            "line 1, column 35: HAVING needs a boolean condition, found a number");
  EXPECT_EQ(errorOf("FROM T t WINDOW TUMBLING 1 HAVING count(t) > 'x' RETURN R(count(t))"),
            "line 1, column 35: cannot compare a number with a string");
}

TEST(WindowQueryTest, PatternsKeepTheirAggregates) {
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B+ b[]) WHERE sum(b.x) > 1"),
            "line 1, column 32: sum() over the Kleene variable 'b' names it with '[]': write "
            "sum(b[].x)");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B+ b[]) WHERE avg(a.x) > 1"),
            "line 1, column 32: avg() needs a Kleene variable ('Type+ a[]'); 'a' is not one "
            "(aggregates over windows: FROM ... WINDOW)");
  EXPECT_EQ(errorOf("PATTERN SEQ(A a, B+ b[]) RETURN R(stddev(b[].x), first(b[].x))"), "OK");
}

TEST(WindowQueryTest, PatternEnginesRefuseWindowQueries) {
  EXPECT_TRUE(requirePatternQuery(mustParse("PATTERN SEQ(A a, B b)"), "nfa").isOk());
  const Status s =
      requirePatternQuery(mustParse("FROM T t WINDOW SESSION GAP 3 RETURN R(count(t))"), "nfa");
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "the nfa engine runs patterns, not window queries (FROM ... WINDOW session): run it "
            "with engine window (or auto)");
}

}  // namespace
}  // namespace cepbus::pattern
