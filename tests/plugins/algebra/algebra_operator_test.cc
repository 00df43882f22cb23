// Each operator of P1's algebra against its definition on hand-made streams,
// the SASE-style forms, RETURN, and the errors, through the plugin ABI.

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "tests/plugins/algebra/algebra_test_support.h"

namespace cepbus::plugins::algebra::testing {
namespace {

using IV = std::vector<std::pair<Timestamp, Timestamp>>;

IV iv(const std::string& query, const std::string& stream) {
  return intervals(runAlgebra(query, letters(stream)));
}

std::string errorOf(const std::string& query, std::vector<std::string> options = {}) {
  auto r = run("algebra", query, letters("a1 b2"), std::move(options));
  EXPECT_FALSE(r.isOk()) << query;
  return r ? std::string() : r.status().message();
}

TEST(AlgebraOperators, SequenceNeedsEndBeforeStart) {
  const std::string s = "a1 b1 a2 b3";
  EXPECT_EQ(iv("PATTERN A ; B CONTEXT unrestricted", s), (IV{{1, 3}, {2, 3}}));
  // Recent: one instance per end, the latest start.
  auto r = runAlgebra("PATTERN A a ; B b", letters(s));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].binds, (std::vector<std::pair<uint32_t, EventId>>{{0, 3}, {1, 4}}));
}

TEST(AlgebraOperators, ConjunctionInEitherOrder) {
  EXPECT_EQ(iv("PATTERN A + B CONTEXT unrestricted", "a1 b2 a3"), (IV{{1, 2}, {2, 3}}));
  EXPECT_EQ(iv("PATTERN A + B CONTEXT unrestricted", "a1 a2 b3"), (IV{{1, 3}, {2, 3}}));
  EXPECT_EQ(iv("PATTERN A + B CONTEXT recent", "a1 a2 b3"), (IV{{2, 3}}));
  EXPECT_EQ(iv("PATTERN A + B CONTEXT unrestricted", "a1 b1"), (IV{{1, 1}}));
}

TEST(AlgebraOperators, DisjunctionIsTheUnion) {
  EXPECT_EQ(iv("PATTERN A | B CONTEXT unrestricted", "a1 c2 b3"), (IV{{1, 1}, {3, 3}}));
  EXPECT_EQ(iv("PATTERN (A ; B) | C CONTEXT unrestricted", "a1 c2 b3"), (IV{{2, 2}, {1, 3}}));
}

// The five cases of P1's concatenation, m = (A;B), n = (C;D), and the
// relations it excludes; a single pair per stream, so both semantics agree.
TEST(AlgebraOperators, ConcatenationFiveCases) {
  const std::string q = "PATTERN (A ; B) ~ (C ; D) CONTEXT ";
  for (const char* ctx : {"unrestricted", "recent"}) {
    SCOPED_TRACE(ctx);
    EXPECT_EQ(iv(q + ctx, "a1 b3 c3 d5"), (IV{{1, 5}}));  // end(m) = start(n)
    EXPECT_EQ(iv(q + ctx, "a1 c2 b3 d4"), (IV{{1, 4}}));  // overlap
    EXPECT_EQ(iv(q + ctx, "a1 c2 b4 d4"), (IV{{1, 4}}));  // same end, m starts first
    EXPECT_EQ(iv(q + ctx, "a1 c1 b2 d3"), (IV{{1, 3}}));  // same start, m ends first
    EXPECT_EQ(iv(q + ctx, "a1 c2 d3 b4"), (IV{{1, 4}}));  // m contains n
    EXPECT_EQ(iv(q + ctx, "a1 b2 c3 d4"), IV{});          // m before n
    EXPECT_EQ(iv(q + ctx, "c1 d2 a3 b4"), IV{});          // n before m
    EXPECT_EQ(iv(q + ctx, "c1 a2 b3 d4"), IV{});          // n contains m
    EXPECT_EQ(iv(q + ctx, "c1 a2 d3 b4"), IV{});          // n starts first
    EXPECT_EQ(iv(q + ctx, "a1 c1 b2 d2"), IV{});          // equal intervals: concurrency
  }
  // Meeting through a shared event: (a1,b3) ends where (b3,d5) starts.
  auto r =
      runAlgebra("PATTERN (A a ; B b) ~ (B c ; D d) CONTEXT unrestricted", letters("a1 b3 d5"));
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].binds,
            (std::vector<std::pair<uint32_t, EventId>>{{0, 1}, {1, 2}, {2, 2}, {3, 3}}));
}

TEST(AlgebraOperators, ConcurrencyNeedsSameStartAndEnd) {
  const std::string q = "PATTERN (A ; B) || (C ; D) CONTEXT unrestricted";
  EXPECT_EQ(iv(q, "a1 c1 b3 d3"), (IV{{1, 3}}));
  EXPECT_EQ(iv(q, "a1 c1 b3 d4"), IV{});
  EXPECT_EQ(iv(q, "a1 c2 b3 d3"), IV{});
  EXPECT_EQ(iv("PATTERN A || B CONTEXT unrestricted", "a1 b1 a2 b3"), (IV{{1, 1}}));
}

TEST(AlgebraOperators, NegationExcludesTheClosedInterval) {
  const std::string q = "PATTERN (A ; B) - C CONTEXT unrestricted";
  EXPECT_EQ(iv(q, "a1 b3"), (IV{{1, 3}}));
  EXPECT_EQ(iv(q, "a1 c1 b3"), IV{});  // at the start
  EXPECT_EQ(iv(q, "a1 c3 b3"), IV{});  // at the end
  EXPECT_EQ(iv(q, "a1 c2 b3"), IV{});  // inside
  EXPECT_EQ(iv(q, "c0 a1 b3 c4"), (IV{{1, 3}}));
  EXPECT_EQ(iv(q, "a1 c2 a3 b4"), (IV{{3, 4}}));
  // A composite negated operand must lie wholly inside.
  const std::string q2 = "PATTERN (A ; B) - (C ; D) CONTEXT unrestricted";
  EXPECT_EQ(iv(q2, "c0 a1 d2 b3"), (IV{{1, 3}}));
  EXPECT_EQ(iv(q2, "a1 c2 d3 b4"), IV{});
  EXPECT_EQ(iv(q2, "a1 c2 b3 d4"), (IV{{1, 3}}));
}

TEST(AlgebraOperators, IterationIsEveryUnion) {
  EXPECT_EQ(iv("PATTERN A* CONTEXT unrestricted", "a1 a2 a3"),
            (IV{{1, 1}, {1, 2}, {2, 2}, {1, 3}, {1, 3}, {2, 3}, {3, 3}}));
  EXPECT_EQ(iv("PATTERN A* CONTEXT recent", "a1 a2 a3"), (IV{{1, 1}, {2, 2}, {3, 3}}));
  // Unions of composite instances are set unions: (a1,b2) ∪ (a1,b3) binds a1 once.
  auto r = runAlgebra("PATTERN (A a ; B b)* CONTEXT unrestricted", letters("a1 b2 b3"));
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1].binds, (std::vector<std::pair<uint32_t, EventId>>{{0, 1}, {1, 2}, {1, 3}}));
  EXPECT_EQ(r[2].binds, (std::vector<std::pair<uint32_t, EventId>>{{0, 1}, {1, 3}}));
}

TEST(AlgebraOperators, SelectionFiltersInstances) {
  const std::string q = "PATTERN (A a ; B b)[a.x < b.x] CONTEXT ";
  EXPECT_EQ(iv(q + "unrestricted", "a1:5 a2:1 b3:3"), (IV{{2, 3}}));
  EXPECT_EQ(iv(q + "unrestricted", "a1:1 a2:5 b3:3"), (IV{{1, 3}}));
  // Recent applies the predicate to the recent instance (P1's f(v_x)):
  // (a2,b3) fails, and (a1,b3) was pruned below it. Theorem 1 does not hold
  // for a selection that the recent instance fails.
  EXPECT_EQ(iv(q + "recent", "a1:5 a2:1 b3:3"), (IV{{2, 3}}));
  EXPECT_EQ(iv(q + "recent", "a1:1 a2:5 b3:3"), IV{});
  // A WHERE conjunct is the same selection.
  EXPECT_EQ(iv("PATTERN SEQ(A a, B b) WHERE a.x < b.x", "a1:1 a2:5 b3:3"), IV{});
}

TEST(AlgebraOperators, AggregationOverAnIteration) {
  const std::string s = "a1:4 a2:3 a3:5 a4:6";
  // Recent: per end, the latest-starting run whose sum reaches 10.
  EXPECT_EQ(iv("PATTERN AGG(A+ a[], sum(a[].x) >= 10) WITHIN 10", s), (IV{{1, 3}, {3, 4}}));
  EXPECT_EQ(iv("PATTERN AGG(A+ a[], count(a[]) >= 3) WITHIN 10", "a1 a2 a3 a4"),
            (IV{{1, 3}, {2, 4}}));
  // Unrestricted: every run whose sum reaches 10, two pairs (4+6, 5+6) and
  // all five runs of three or four events.
  IV all = iv("PATTERN AGG(A+ a[], sum(a[].x) >= 10) CONTEXT unrestricted", s);
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, (IV{{1, 3}, {1, 4}, {1, 4}, {1, 4}, {1, 4}, {2, 4}, {3, 4}}));
}

TEST(AlgebraOperators, TimeRestrictionBoundsTheSpan) {
  EXPECT_EQ(iv("PATTERN WITHIN(A ; B, 2) CONTEXT unrestricted", "a1 a2 b3 a4 b7"),
            (IV{{1, 3}, {2, 3}}));
  EXPECT_EQ(iv("PATTERN WITHIN(A ; B, 2)", "a1 a2 b3 a4 b7"), (IV{{2, 3}}));
}

TEST(AlgebraSase, FormsCompileToTheAlgebra) {
  const auto s = letters("a1:3 b2:4 a3:1 d4 b5:2 d6 a7 b8:9 d9");
  for (const char* ctx : {" CONTEXT unrestricted", " CONTEXT recent"}) {
    SCOPED_TRACE(ctx);
    EXPECT_EQ(runAlgebra(std::string("PATTERN SEQ(A a, B b, D d)") + ctx, s),
              runAlgebra(std::string("PATTERN (A a ; B b) ; D d") + ctx, s));
    EXPECT_EQ(runAlgebra(std::string("PATTERN AND(A a, B b)") + ctx, s),
              runAlgebra(std::string("PATTERN A a + B b") + ctx, s));
    EXPECT_EQ(runAlgebra(std::string("PATTERN OR(A a, D d)") + ctx, s),
              runAlgebra(std::string("PATTERN A a | D d") + ctx, s));
    EXPECT_EQ(runAlgebra(std::string("PATTERN SEQ(A a, B b) WITHIN 2") + ctx, s),
              runAlgebra(std::string("PATTERN WITHIN(A a ; B b, 2)") + ctx, s));
  }
  // A WHERE conjunct is a selection at the lowest subexpression binding it.
  const std::string u = " CONTEXT unrestricted";
  auto where = runAlgebra("PATTERN SEQ(A a, B b, D d) WHERE a.x < b.x" + u, s);
  EXPECT_EQ(where, runAlgebra("PATTERN ((A a ; B b)[a.x < b.x]) ; D d" + u, s));
  EXPECT_EQ(runAlgebra("PATTERN SEQ(A a, B b, D d) WHERE a.x < b.x", s),
            runAlgebra("PATTERN ((A a ; B b)[a.x < b.x]) ; D d", s));
  EXPECT_FALSE(where.empty());
  EXPECT_LT(where.size(), runAlgebra("PATTERN SEQ(A a, B b, D d)" + u, s).size());
}

// A conjunct naming one element is placed on that element's atom; it used to
// be ignored there (atoms were never checked), so `b.x != 1` let b.x = 1 pass.
TEST(AlgebraSase, ConjunctOnOneElementFiltersItsEvents) {
  const auto s = letters("a1:0 b2:1 b3:2");
  for (const char* ctx : {" CONTEXT unrestricted", " CONTEXT recent"}) {
    SCOPED_TRACE(ctx);
    auto r = runAlgebra(std::string("PATTERN SEQ(A a, B b) WHERE b.x != 1") + ctx, s);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].binds, (std::vector<std::pair<uint32_t, EventId>>{{0, 1}, {1, 3}}));
    EXPECT_TRUE(runAlgebra(std::string("PATTERN SEQ(A a, B b) WHERE a.x = 5") + ctx, s).empty());
  }
  // Under recent the filter applies to the recent instance: the latest B of a
  // tick that fails hides an earlier one of the same tick, as a selection does.
  EXPECT_TRUE(runAlgebra("PATTERN SEQ(A a, B b) WHERE b.x != 1", letters("a1 b2:2 b2:1")).empty());
}

// Under CONTEXT recent a Kleene element is one B, or with an iteration
// predicate the latest-starting run ending at the B that satisfies it (one
// match per end: ties between equal starts keep one).
TEST(AlgebraSase, KleenePlusIsIterationUnderRecent) {
  const auto one = runAlgebra("PATTERN SEQ(A a, B+ b[], C c)", letters("a1 b2 b3 c4"));
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].binds.size(), 3u);
  const auto rising = runAlgebra(
      "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > b[i-1].x AND count(b[]) >= 2 WITHIN 9",
      letters("a1 b2:5 b3:6 b4:4 b5:7 c6"));
  ASSERT_EQ(rising.size(), 1u);
  EXPECT_EQ(rising[0].binds.size(), 4u);  // a, a rising run of two B, c
  const auto falling = runAlgebra(
      "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > b[i-1].x AND count(b[]) >= 2 WITHIN 9",
      letters("a1 b2:5 b3:4 c6"));
  EXPECT_TRUE(falling.empty());
}

// docs/pattern-language.md's "big batches" example: AGG over a Kleene
// element inside SEQ, under the default CONTEXT recent (bounded by WITHIN).
TEST(AlgebraSase, RunsTheBigBatchesExampleUnderRecent) {
  const auto r = runAlgebra("PATTERN SEQ(S s, AGG(F+ f[], sum(f[].x) >= 100), E e) WITHIN 3600",
                            letters("s1 f2:60 f3:50 e4 s5 f6:30 e7"));
  // f2 f3 reach 100, f6 alone does not: each E closes the batch f2 f3 (recent
  // keeps, per end, the latest-starting instance).
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].binds,
            (std::vector<std::pair<uint32_t, EventId>>{{0, 1}, {1, 2}, {1, 3}, {2, 4}}));
  EXPECT_EQ(r[1].binds,
            (std::vector<std::pair<uint32_t, EventId>>{{0, 1}, {1, 2}, {1, 3}, {2, 7}}));
}

// Under CONTEXT unrestricted a Kleene element stands for every run of its
// events (one per timestamp) that its predicates accept: here every rising
// subsequence of 5 6 4 7, between a1 and c6.
TEST(AlgebraSase, KleenePlusIsEveryAcceptedRunUnderUnrestricted) {
  const auto runs =
      runAlgebra("PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > b[i-1].x CONTEXT unrestricted",
                 letters("a1 b2:5 b3:6 b4:4 b5:7 c6"));
  std::vector<std::vector<EventId>> ids;
  for (const Out& o : runs) {
    ids.emplace_back();
    for (const auto& [element, id] : o.binds) ids.back().push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::vector<EventId>>{{1, 2, 3, 5, 6},
                                                    {1, 2, 3, 6},
                                                    {1, 2, 5, 6},
                                                    {1, 2, 6},
                                                    {1, 3, 5, 6},
                                                    {1, 3, 6},
                                                    {1, 4, 5, 6},
                                                    {1, 4, 6},
                                                    {1, 5, 6}}));
  // A predicate over the whole run (b[1], count) is checked on each run the
  // step predicate accepted; one relating b[i] to a, on the whole match.
  EXPECT_EQ(iv("PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > b[i-1].x AND b[1].x = 5 AND "
               "count(b[]) >= 2 AND b[i].x > a.x CONTEXT unrestricted",
               "a1:4 b2:5 b3:6 b4:4 b5:7 c6"),
            (IV{{1, 6}, {1, 6}, {1, 6}}));
}

TEST(AlgebraSase, KleeneRefusalsThatRemain) {
  // The zero-or-more form keeps its own message.
  EXPECT_NE(errorOf("PATTERN SEQ(A a, B* b[], C c) CONTEXT unrestricted").find("zero-or-more"),
            std::string::npos);
  // P1's iteration operator is the specification's closure and still runs.
  EXPECT_EQ(runAlgebra("PATTERN WITHIN((B)*, 2) CONTEXT unrestricted", letters("b1 b2")).size(),
            3u);
}

TEST(AlgebraReturn, ComposesTheReturnClause) {
  auto r = runAlgebra("PATTERN A a ; B b RETURN Pair(a.x AS ax, b.x AS bx)", letters("a1:5 b2:7"),
                      /*compose=*/true);
  ASSERT_EQ(r.size(), 1u);
  const EventPtr& c = r[0].composite;
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->type(), Symbol::intern("Pair"));
  EXPECT_EQ(c->start(), 1);
  EXPECT_EQ(c->end(), 2);
  EXPECT_EQ(c->constituents().size(), 2u);
  ASSERT_NE(c->find(Symbol::intern("ax")), nullptr);
  EXPECT_EQ(c->find(Symbol::intern("ax"))->asInt(), 5);
  EXPECT_EQ(c->find(Symbol::intern("bx"))->asInt(), 7);
  auto k = runAlgebra(
      "PATTERN SEQ(A a, B+ b[]) WHERE count(b[]) >= 2 WITHIN 5 RETURN R(count(b[]) AS n)",
      letters("a1 b2 b3 b4"), true);
  std::multiset<int64_t> counts;
  for (const Out& o : k) counts.insert(o.composite->find(Symbol::intern("n"))->asInt());
  // The latest-starting runs of at least two B: b2 b3, then b3 b4.
  EXPECT_EQ(counts, (std::multiset<int64_t>{2, 2}));
}

TEST(AlgebraContext, RecentIsTheDefaultAndKeepsOnePerEnd) {
  std::string s;
  for (int t = 1; t <= 60; ++t) s += std::string(1, "abc"[(t * 7) % 3]) + std::to_string(t) + " ";
  auto r = runAlgebra("PATTERN (A ; B) + C", letters(s));
  auto u = runAlgebra("PATTERN (A ; B) + C CONTEXT unrestricted", letters(s));
  ASSERT_FALSE(r.empty());
  EXPECT_GT(u.size(), r.size());
  std::set<Timestamp> ends;
  for (const Out& o : r) EXPECT_TRUE(ends.insert(o.end).second) << o;
}

TEST(AlgebraErrors, ClearMessages) {
  EXPECT_NE(errorOf("PATTERN (A ; B").find("line 1"), std::string::npos);
  EXPECT_NE(errorOf("PATTERN SEQ(A a, B* b[], C c)").find("zero-or-more"), std::string::npos);
  EXPECT_NE(errorOf("PATTERN A ; B", {"construction=batched"}).find("construction"),
            std::string::npos);
  EXPECT_NE(errorOf("PATTERN AGG(A+ a[], count(a[]) > 2)").find("time bound"), std::string::npos);
  EXPECT_NE(errorOf("PATTERN ((A a ; B b) - C c) ; D d WHERE c.x = d.x").find("negated"),
            std::string::npos);
}

// PARTITION BY runs one detector per partition: the matches of the WHERE
// equality form, each reported when the stream (not only its partition)
// moves past its tick, as unpartitioned.
TEST(AlgebraPartitions, MatchesOfTheEqualityFormReportedWhenTheStreamMovesOn) {
  const auto events = letters("a1:1 a2:2 b3:1 b3:2 c4:3 b5:2 a6:1 b8:1");
  EXPECT_EQ(runAlgebra("PATTERN A a ; B b PARTITION BY x CONTEXT unrestricted", events),
            runAlgebra("PATTERN A a ; B b WHERE a.x = b.x CONTEXT unrestricted", events));
  auto q = pattern::parseQuery("PATTERN A a ; B b PARTITION BY x CONTEXT unrestricted");
  ASSERT_TRUE(q.isOk());
  MatchRecorder sink;
  auto d = loadPlugin("algebra")->createDetector("algebra", *q, plugin::DetectorOptions(), sink);
  ASSERT_TRUE(d.isOk()) << d.status().message();
  for (size_t i = 0; i < 5; ++i) ASSERT_TRUE((*d)->onEvent(events[i]).isOk());
  // c4 (partition 3) closed tick 3 of partitions 1 and 2.
  EXPECT_EQ(intervals(outs(sink)), (std::vector<std::pair<Timestamp, Timestamp>>{{1, 3}, {2, 3}}));
}

}  // namespace
}  // namespace cepbus::plugins::algebra::testing
