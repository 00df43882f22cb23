#include "bus/core/pattern/filter.h"

#include <gtest/gtest.h>

namespace cepbus::pattern {
namespace {

EventPtr stock(std::string_view symbol, Value price) {
  return EventBuilder("Stock").at(5).set("symbol", Value(symbol)).set("price", price).build();
}

EventFilterPtr mustCompile(std::string_view text) {
  Result<EventFilterPtr> f = compileFilter(text);
  if (!f.isOk()) {
    ADD_FAILURE() << text << ": " << f.status().toString();
    return *compileFilter("false");
  }
  return *f;
}

TEST(FilterTest, AttributeConditions) {
  EventFilterPtr f = mustCompile("price > 10 AND symbol = 'IBM'");
  EXPECT_TRUE(f->matches(*stock("IBM", Value(10.5))));
  EXPECT_FALSE(f->matches(*stock("IBM", Value(10))));
  EXPECT_FALSE(f->matches(*stock("MSFT", Value(11))));
  EXPECT_EQ(f->text(), "price > 10 AND symbol = 'IBM'");
}

TEST(FilterTest, TypeAndOtherBuiltins) {
  EventFilterPtr f = mustCompile("type = 'Stock' AND ts >= 5 AND prob = 1");
  EXPECT_TRUE(f->matches(*stock("IBM", Value(1))));
  EXPECT_FALSE(f->matches(*EventBuilder("Bond").at(5).build()));
  EXPECT_FALSE(f->matches(*EventBuilder("Stock").at(4).build()));
}

TEST(FilterTest, MissingAttributesAndMismatchesDoNotMatch) {
  EventFilterPtr f = mustCompile("price > 10");
  EXPECT_FALSE(f->matches(*EventBuilder("Stock").at(1).build()));
  EXPECT_FALSE(f->matches(*stock("IBM", Value("expensive"))));
  EXPECT_TRUE(mustCompile("NOT price > 10")->matches(*EventBuilder("Stock").at(1).build()));
}

TEST(FilterTest, ArithmeticOrAndParentheses) {
  EventFilterPtr f = mustCompile("(symbol = 'IBM' OR symbol = \"MSFT\") AND price * 2 - 1 >= 19");
  EXPECT_TRUE(f->matches(*stock("MSFT", Value(10))));
  EXPECT_FALSE(f->matches(*stock("MSFT", Value(9.9))));
  EXPECT_FALSE(f->matches(*stock("ORCL", Value(50))));
}

TEST(FilterTest, ErrorsNameLineAndColumn) {
  Result<EventFilterPtr> f = compileFilter("price >\n AND symbol = 'IBM'");
  ASSERT_FALSE(f.isOk());
  EXPECT_EQ(f.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(f.status().message(), "line 2, column 2: expected an expression, found keyword AND");
  EXPECT_EQ(compileFilter("a.price > 1").status().message(),
            "line 1, column 2: a filter names attributes of one event: write 'a' without a "
            "variable");
  EXPECT_EQ(compileFilter("symbol").isOk(), true);  // unknown type: decided at run time
  EXPECT_EQ(compileFilter("price = 'x' + 1").status().message(),
            "line 1, column 9: arithmetic needs numbers, found a string");
}

}  // namespace
}  // namespace cepbus::pattern
