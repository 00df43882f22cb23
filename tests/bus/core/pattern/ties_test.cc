#include "bus/core/pattern/ties.h"

#include <gtest/gtest.h>

#include "bus/core/pattern/parser.h"

namespace cepbus::pattern {
namespace {

Query parsed(const char* text) {
  auto q = parseQuery(text);
  EXPECT_TRUE(q.isOk()) << text << ": " << q.status().message();
  return *q;
}

TEST(TiesTest, EqualityChainsTieEveryVariableTransitively) {
  const Query q = parsed("PATTERN SEQ(A a, B b, C c) WHERE a.x = b.x AND c.x = b.x WITHIN 5");
  EXPECT_EQ(firstUntiedVariable(q, "x"), std::nullopt);
  EXPECT_EQ(firstUntiedVariable(q, "y"), "b");
}

TEST(TiesTest, TheFirstVariableNotTiedIsNamed) {
  const Query q = parsed("PATTERN SEQ(A a, B b, C c) WHERE a.x = b.x AND b.y = c.y WITHIN 5");
  EXPECT_EQ(firstUntiedVariable(q, "x"), "c");
}

TEST(TiesTest, TwoVariablesTiedToOneLiteralAreTied) {
  const Query one = parsed("PATTERN SEQ(A a, B b) WHERE a.x = 3 AND b.x = 3 WITHIN 5");
  EXPECT_EQ(firstUntiedVariable(one, "x"), std::nullopt);
  const Query two = parsed("PATTERN SEQ(A a, B b) WHERE a.x = 3 AND b.x = 4 WITHIN 5");
  EXPECT_EQ(firstUntiedVariable(two, "x"), "b");
}

TEST(TiesTest, KleeneVariablesTieThroughTheirCurrentElementAndNegatedOnesCount) {
  EXPECT_EQ(
      firstUntiedVariable(
          parsed("PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x = a.x AND c.x = a.x WITHIN 5"), "x"),
      std::nullopt);
  // b[1] ties one element of b, not every one.
  EXPECT_EQ(
      firstUntiedVariable(
          parsed("PATTERN SEQ(A a, B+ b[], C c) WHERE b[1].x = a.x AND c.x = a.x WITHIN 5"), "x"),
      "b");
  // A negated event of another x must still veto: it must be tied too.
  EXPECT_EQ(
      firstUntiedVariable(parsed("PATTERN SEQ(A a, NOT(N n), C c) WHERE c.x = a.x WITHIN 5"), "x"),
      "n");
  // Ties through a negated variable are the negation's condition: a and c
  // may differ (the NOT vetoes only an N equal to both), so nothing ties them.
  EXPECT_EQ(
      firstUntiedVariable(
          parsed("PATTERN SEQ(A a, NOT(N n), C c) WHERE a.x = n.x AND c.x = n.x WITHIN 5"), "x"),
      "c");
  EXPECT_EQ(
      firstUntiedVariable(
          parsed("PATTERN SEQ(A a, NOT(N n), C c) WHERE c.x = a.x AND n.x = a.x WITHIN 5"), "x"),
      std::nullopt);
}

TEST(TiesTest, AnElementWithoutAVariableIsNeverTied) {
  EXPECT_EQ(firstUntiedVariable(parsed("PATTERN SEQ(B a, B, A c) WHERE a.x = c.x WITHIN 5"), "x"),
            "the unnamed B element");
}

TEST(TiesTest, OnlyTopLevelEqualitiesOfTheAttributeItselfTie) {
  for (const char* text : {
           "PATTERN SEQ(A a, B b) WHERE a.x = b.x OR a.y = 1 WITHIN 5",  // under OR
           "PATTERN SEQ(A a, B b) WHERE a.x = b.y WITHIN 5",             // another attribute
           "PATTERN SEQ(A a, B b) WHERE a.x != b.x WITHIN 5",            // not an equality
           "PATTERN SEQ(A a, B b) WHERE a.x + 1 = b.x WITHIN 5",         // not the attribute
       }) {
    EXPECT_EQ(firstUntiedVariable(parsed(text), "x"), "b") << text;
  }
}

TEST(TiesTest, ComparedAttributesAreThoseAnEqualityReadsOnTwoVariables) {
  const Query q = parsed(
      "PATTERN SEQ(A a, B+ b[], C c) WHERE a.p = 3 AND b[i].s = a.s AND a.x = c.x AND c.s = a.s "
      "AND a.y = c.z WITHIN 5");
  EXPECT_EQ(comparedAttributes(q), (std::vector<std::string>{"s", "x"}));
}

}  // namespace
}  // namespace cepbus::pattern
