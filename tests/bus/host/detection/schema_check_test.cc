#include "bus/host/detection/schema_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cepbus::detection {
namespace {

std::vector<descriptor::EventSchema> stockSchema() {
  return {{"Stock", {"symbol", "price"}, {"bus.xml", 3}}, {"Trade", {"qty"}, {"bus.xml", 7}}};
}

descriptor::QuerySpec query(std::string text) {
  descriptor::QuerySpec q;
  q.name = "rise";
  q.text = std::move(text);
  q.where = {"bus.xml", 12};
  return q;
}

TEST(SchemaCheckTest, AQueryNamingOnlyDeclaredNamesPasses) {
  EXPECT_TRUE(undeclaredNames(stockSchema(),
                              query("PATTERN SEQ(Stock a, Trade t) WHERE a.price > 1 "
                                    "AND t.qty > 2 PARTITION BY symbol RETURN R(a.symbol, t.ts)"))
                  .empty());
}

TEST(SchemaCheckTest, EachUndeclaredNameIsAnErrorAtTheQueryWithASuggestion) {
  EXPECT_EQ(undeclaredNames(stockSchema(), query("PATTERN SEQ(Stok a, Stock b)\n"
                                                 "WHERE b.prize > 1")),
            (std::vector<std::string>{
                "bus.xml:12: <query name=\"rise\">: line 1, column 13: event type 'Stok' is not "
                "declared in <schemas>; did you mean 'Stock'?",
                "bus.xml:12: <query name=\"rise\">: line 2, column 7: attribute 'prize' is not "
                "declared on a Stock event in <schemas>; did you mean 'price'?"}));
}

TEST(SchemaCheckTest, AnUndeclaredPartitionKeyIsAnError) {
  const std::vector<std::string> errors =
      undeclaredNames(stockSchema(), query("PATTERN SEQ(Stock a, Stock b) PARTITION BY sector"));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("PARTITION BY key 'sector' is not declared on a Stock event"),
            std::string::npos)
      << errors[0];
}

TEST(SchemaCheckTest, AQueryThatDoesNotParseIsLeftToItsService) {
  EXPECT_TRUE(undeclaredNames(stockSchema(), query("PATTERN SEQ(Stok a")).empty());
}

}  // namespace
}  // namespace cepbus::detection
