// SASE negation inside SEQ on the algebra engine: SEQ(x, NOT(C c), y) is
// P1's negation over the gap between x and y, strictly inside it, as the nfa
// and petri engines and the reference matcher define it.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/plugins/algebra/algebra_test_support.h"

namespace cepbus::plugins::algebra::testing {
namespace {

using IV = std::vector<std::pair<Timestamp, Timestamp>>;

IV iv(const std::string& query, const std::string& stream) {
  return intervals(runAlgebra(query + " CONTEXT unrestricted", letters(stream)));
}

TEST(AlgebraSeqNegation, RejectsACandidateWithTheNegatedTypeInBetween) {
  EXPECT_EQ(iv("PATTERN SEQ(A a, NOT(C c), B b)", "a1 c2 b3 a4 b5"), (IV{{4, 5}}));
}

// The gap excludes its edges, where P1's negation over the sequence's
// interval includes them: the rewrite is not `(A ; B) - C`.
TEST(AlgebraSeqNegation, TheGapExcludesItsEdges) {
  EXPECT_EQ(iv("PATTERN SEQ(A a, NOT(C c), B b)", "a1 c1 b3 c3"), (IV{{1, 3}}));
  EXPECT_EQ(iv("PATTERN (A ; B) - C", "a1 c1 b3 c3"), IV{});
  // The element's own event is not inside its gap.
  EXPECT_EQ(iv("PATTERN SEQ(A a, NOT(A n), B b)", "a1 a2 b3"), (IV{{2, 3}}));
}

TEST(AlgebraSeqNegation, EachNegationSeesOnlyTheGapOfItsNeighbours) {
  EXPECT_EQ(iv("PATTERN SEQ(A a, B b, NOT(C c), D d)", "a1 c2 b3 d4"), (IV{{1, 4}}));
  EXPECT_EQ(iv("PATTERN SEQ(A a, B b, NOT(C c), D d)", "a1 b2 c3 d4"), IV{});
  // e3 lies between b2 and d5 only: a1 b4 d5 is the one match.
  const auto two = runAlgebra("PATTERN SEQ(A a, NOT(C c), B b, NOT(E e), D d) CONTEXT unrestricted",
                              letters("a1 b2 e3 b4 d5"));
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].binds, (std::vector<std::pair<uint32_t, EventId>>{{0, 1}, {1, 4}, {2, 5}}));
  // Two negations in one gap.
  EXPECT_EQ(iv("PATTERN SEQ(A a, NOT(C c), NOT(E e), B b)", "a1 e2 b3 a4 c5 b6 a7 b8"),
            (IV{{7, 8}}));
}

// After a Kleene element the gap starts at the run's last event (under
// CONTEXT recent: the engine refuses a Kleene element under unrestricted).
TEST(AlgebraSeqNegation, AfterAKleeneElementTheGapStartsAtItsLastEvent) {
  const auto r =
      runAlgebra("PATTERN SEQ(A a, B+ b[], NOT(C c), D d) WHERE count(b[]) >= 2 WITHIN 10",
                 letters("a1 b2 c3 b4 d5"));
  ASSERT_EQ(r.size(), 1u);  // the run b2 b4, although c3 follows b2
  EXPECT_EQ(r[0].binds,
            (std::vector<std::pair<uint32_t, EventId>>{{0, 1}, {1, 2}, {1, 4}, {2, 5}}));
}

TEST(AlgebraSeqNegation, APredicateOnTheNegatedVariableAloneFiltersIt) {
  EXPECT_EQ(iv("PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x > 5", "a1 c2:3 b3 a4 c5:9 b6"),
            (IV{{1, 3}}));
}

// "No cancellation of *this* order": only a negated event that passes the
// predicates relating it to the candidate rejects it.
TEST(AlgebraSeqNegation, APredicateRelatingTheNegatedVariableRejectsOnlyItsCandidates) {
  const std::string q = "PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x = a.x";
  // c2:1 cancels a1:1 only; a3:2 has no C of its own in its gap.
  EXPECT_EQ(iv(q, "a1:1 c2:1 a3:2 b4"), (IV{{3, 4}}));
  EXPECT_EQ(iv(q, "a1:1 c2:2 b4"), (IV{{1, 4}}));
  // A C at the gap's edge is outside it.
  EXPECT_EQ(iv(q, "a1:1 c1:1 b4 c4:1"), (IV{{1, 4}}));
  // Relating it to the element after the gap, and to both.
  EXPECT_EQ(iv("PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x = b.x", "a1 c2:5 b3:5 a4 b6:7"),
            (IV{{1, 6}, {4, 6}}));
  EXPECT_EQ(iv("PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x > a.x AND c.x < b.x",
               "a1:1 c2:9 b3:5 a4:1 c5:3 b6:5"),
            (IV{{1, 3}}));
  // P1's negation operator with a parameter: over the whole interval.
  EXPECT_EQ(iv("PATTERN (A a ; B b) - C c WHERE c.x = a.x", "a1:1 c1:2 b3 a4:1 c4:1 b6"),
            (IV{{1, 3}}));
}

// Under CONTEXT recent, every negated event of a tick is kept: which one
// rejects the candidate depends on the candidate.
TEST(AlgebraSeqNegation, UnderRecentEveryNegatedEventOfATickCounts) {
  const auto r = runAlgebra("PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x = a.x CONTEXT recent",
                            letters("a1:1 c2:1 c2:2 b3"));
  EXPECT_TRUE(r.empty());
}

TEST(AlgebraSeqNegation, RefusesWhatItCannotCheck) {
  auto error = [](const std::string& query) {
    auto r = run("algebra", query, letters("a1 b2"));
    EXPECT_FALSE(r.isOk()) << query;
    return r ? std::string() : r.status().message();
  };
  const std::string before_kleene = error("PATTERN SEQ(A a, NOT(C c), B+ b[]) CONTEXT recent");
  EXPECT_NE(before_kleene.find("not before a Kleene element"), std::string::npos) << before_kleene;
  EXPECT_NE(before_kleene.find("the nfa engine runs it"), std::string::npos) << before_kleene;
  const std::string relates =
      error("PATTERN SEQ(A a, NOT(C c), B b, D d) WHERE c.x = d.x CONTEXT unrestricted");
  EXPECT_NE(relates.find("relates a negated operand"), std::string::npos) << relates;
  EXPECT_NE(relates.find("after the gap"), std::string::npos) << relates;
  EXPECT_NE(relates.find("the nfa engine runs it"), std::string::npos) << relates;
}

}  // namespace
}  // namespace cepbus::plugins::algebra::testing
