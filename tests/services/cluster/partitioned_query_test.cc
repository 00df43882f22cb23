#include "services/cluster/partitioned_query.h"

#include <gtest/gtest.h>

#include "bus/core/pattern/parser.h"

namespace cepbus::services::cluster {
namespace {

Status check(const std::string& text, std::vector<std::string> key, std::string engine = "nfa") {
  auto q = pattern::parseQuery(text);
  EXPECT_TRUE(q.isOk()) << q.status().message();
  return checkPartitionedQuery(*q, "q", engine, key);
}

const char kEqualPrices[] =
    "PATTERN SEQ(Stock a, Stock b, Stock c) "
    "WHERE a.price = b.price AND b.price = c.price AND a.symbol != b.symbol "
    "AND b.symbol != c.symbol AND a.symbol != c.symbol WITHIN 1000";

TEST(PartitionedQueryTest, TheEqualPricesQueryPartitionsByPriceNotBySymbol) {
  EXPECT_TRUE(check(kEqualPrices, {"price"}).isOk());
  Status by_symbol = check(kEqualPrices, {"symbol"});
  ASSERT_FALSE(by_symbol.isOk());
  EXPECT_NE(by_symbol.message().find("cluster key \"symbol\" does not tie variable a to b"),
            std::string::npos)
      << by_symbol.message();
}

TEST(PartitionedQueryTest, PartitionByImpliesTheKey) {
  EXPECT_TRUE(check("PATTERN SEQ(A a, B b) WITHIN 10 PARTITION BY id", {"id"}).isOk());
  EXPECT_FALSE(check("PATTERN SEQ(A a, B b) WITHIN 10 PARTITION BY id", {"other"}).isOk());
}

TEST(PartitionedQueryTest, WithinIsRequired) {
  Status s = check("PATTERN SEQ(A a, B b) WHERE a.id = b.id", {"id"});
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("no WITHIN"), std::string::npos);
}

TEST(PartitionedQueryTest, NegatedAndKleeneVariablesMustBeTiedToo) {
  EXPECT_FALSE(check("PATTERN SEQ(A a, NOT(C c), B b) WHERE a.id = b.id WITHIN 10", {"id"}).isOk());
  EXPECT_TRUE(
      check("PATTERN SEQ(A a, NOT(C c), B b) WHERE a.id = b.id AND c.id = a.id WITHIN 10", {"id"})
          .isOk());
  EXPECT_TRUE(check("PATTERN SEQ(A a, B+ b[]) WHERE b[i].id = a.id WITHIN 10", {"id"}).isOk());
  EXPECT_FALSE(
      check("PATTERN SEQ(A a, B+ b[]) WHERE b[i].id = b[i-1].id WITHIN 10", {"id"}).isOk());
}

// An unnamed element matches an event of any partition: a node seeing one
// partition would miss the matches whose middle event is in another.
TEST(PartitionedQueryTest, AnElementWithoutAVariableCannotBeTied) {
  Status s = check("PATTERN SEQ(A a, B, C c) WHERE a.id = c.id WITHIN 10", {"id"});
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("does not tie a to the unnamed B element (add PARTITION BY id, or "
                             "name the element and tie it"),
            std::string::npos)
      << s.message();
  EXPECT_TRUE(check("PATTERN SEQ(A a, B, C c) WITHIN 10 PARTITION BY id", {"id"}).isOk());
}

TEST(PartitionedQueryTest, ALiteralTiesTheVariablesItIsComparedWith) {
  EXPECT_TRUE(
      check("PATTERN SEQ(A a, B b) WHERE a.id = 'x' AND 'x' = b.id WITHIN 10", {"id"}).isOk());
  EXPECT_FALSE(
      check("PATTERN SEQ(A a, B b) WHERE a.id = 'x' AND b.id = 'y' WITHIN 10", {"id"}).isOk());
}

TEST(PartitionedQueryTest, OrderSensitiveSemanticsNeedPartitionBy) {
  const char strict[] =
      "PATTERN SEQ(A a, B b) WHERE a.id = b.id WITHIN 10 STRATEGY strict_contiguity";
  Status s = check(strict, {"id"});
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("strict contiguity"), std::string::npos);
  EXPECT_TRUE(check(std::string(strict) + " PARTITION BY id", {"id"}).isOk());
  // The algebra engine's default context is recent.
  EXPECT_FALSE(
      check("PATTERN SEQ(A a, B b) WHERE a.id = b.id WITHIN 10", {"id"}, "algebra").isOk());
  EXPECT_TRUE(check("PATTERN SEQ(A a, B b) WHERE a.id = b.id WITHIN 10 CONTEXT unrestricted",
                    {"id"}, "algebra")
                  .isOk());
}

TEST(PartitionedQueryTest, EveryKeyAttributeMustBeImplied) {
  EXPECT_TRUE(
      check("PATTERN SEQ(A a, B b) WHERE a.x = b.x AND a.y = b.y WITHIN 10", {"x", "y"}).isOk());
  EXPECT_FALSE(check("PATTERN SEQ(A a, B b) WHERE a.x = b.x WITHIN 10", {"x", "y"}).isOk());
}

// A window query gives per group what the whole stream gives when each
// group lies in one partition.
TEST(PartitionedQueryTest, AWindowQueryGroupsByTheKey) {
  EXPECT_TRUE(check("FROM Stock s WINDOW TUMBLING 100 GROUP BY s.symbol "
                    "RETURN V(s.symbol, count(s) AS n)",
                    {"symbol"})
                  .isOk());
  EXPECT_TRUE(check("FROM Stock s WINDOW SLIDING 100 EVERY 10 GROUP BY s.line, s.symbol "
                    "RETURN V(s.symbol, count(s) AS n)",
                    {"symbol"})
                  .isOk());
  const Status ungrouped =
      check("FROM Stock s WINDOW TUMBLING 100 GROUP BY s.line RETURN V(count(s) AS n)", {"symbol"});
  ASSERT_FALSE(ungrouped.isOk());
  EXPECT_NE(ungrouped.message().find("does not group by the cluster key \"symbol\""),
            std::string::npos)
      << ungrouped.message();
  EXPECT_NE(ungrouped.message().find("add s.symbol to GROUP BY"), std::string::npos);
  const Status session = check(
      "FROM Stock s WINDOW SESSION GAP 10 GROUP BY s.symbol RETURN V(count(s) AS n)", {"symbol"});
  ASSERT_FALSE(session.isOk());
  EXPECT_NE(session.message().find("session window, which has no bounded length"),
            std::string::npos)
      << session.message();
}

}  // namespace
}  // namespace cepbus::services::cluster
