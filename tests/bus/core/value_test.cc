#include "bus/core/value.h"

#include <gtest/gtest.h>

namespace cepbus {
namespace {

TEST(ValueTest, NumbersCompareAcrossIntAndDouble) {
  EXPECT_EQ(Value(10), Value(10.0));
  EXPECT_TRUE(*Value(10.5).compare(Value(10)) > 0);
  EXPECT_TRUE(*Value(int64_t{-3}).compare(Value(2.5)) < 0);
}

TEST(ValueTest, LargeIntegersCompareExactly) {
  // Both round to the same double; the int path must not lose the difference.
  Value a(int64_t{9007199254740993});
  Value b(int64_t{9007199254740992});
  EXPECT_TRUE(*a.compare(b) > 0);
  EXPECT_FALSE(a == b);
}

TEST(ValueTest, IncomparableKindsGiveNoOrdering) {
  EXPECT_FALSE(Value("10").compare(Value(10)).has_value());
  EXPECT_FALSE(Value().compare(Value(0)).has_value());
  EXPECT_FALSE(Value("10") == Value(10));
  EXPECT_TRUE(Value() == Value());
}

TEST(ValueTest, StringsCompareLexicographically) {
  EXPECT_TRUE(*Value("IBM").compare(Value("MSFT")) < 0);
  EXPECT_EQ(Value(std::string("IBM")), Value("IBM"));
}

TEST(ValueTest, Truthiness) {
  EXPECT_FALSE(Value().truthy());
  EXPECT_FALSE(Value(0).truthy());
  EXPECT_FALSE(Value("").truthy());
  EXPECT_TRUE(Value(0.5).truthy());
  EXPECT_TRUE(Value(true).truthy());
}

TEST(ValueTest, RendersAsJson) {
  EXPECT_EQ(Value(10).toString(), "10");
  EXPECT_EQ(Value(10.5).toString(), "10.5");
  EXPECT_EQ(Value("a\"b").toString(), "\"a\\\"b\"");
  EXPECT_EQ(Value().toString(), "null");
}

}  // namespace
}  // namespace cepbus
