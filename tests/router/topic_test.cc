#include "router/topic.h"

#include <gtest/gtest.h>

namespace cepbus::router {
namespace {

struct MatchCase {
  const char* pattern;
  const char* address;
  bool matches;
};

// RabbitMQ topic-exchange semantics, edge cases included.
const MatchCase kCases[] = {
    {"stocks.ibm", "stocks.ibm", true},
    {"stocks.ibm", "stocks.ibmx", false},
    {"stocks.ibm", "stocks", false},
    {"stocks.ibm", "stocks.ibm.nyse", false},
    {"stocks.*", "stocks.ibm", true},
    {"stocks.*", "stocks", false},  // '*' is exactly one segment
    {"stocks.*", "stocks.ibm.nyse", false},
    {"*.ibm", "stocks.ibm", true},
    {"*", "stocks", true},
    {"*", "stocks.ibm", false},
    {"*.*", "a.b", true},
    {"*.*", "a", false},
    {"stocks.#", "stocks", true},  // '#' is zero or more segments
    {"stocks.#", "stocks.ibm", true},
    {"stocks.#", "stocks.ibm.nyse.open", true},
    {"stocks.#", "bonds.ibm", false},
    {"#", "a", true},  // '#' alone matches every address
    {"#", "a.b.c.d", true},
    {"#.ibm", "ibm", true},
    {"#.ibm", "stocks.nyse.ibm", true},
    {"#.ibm", "stocks.ibm.x", false},
    {"a.#.b", "a.b", true},  // '#' in the middle, as RabbitMQ allows
    {"a.#.b", "a.x.b", true},
    {"a.#.b", "a.x.y.b", true},
    {"a.#.b", "a.x.y", false},
    {"a.#.b", "b.a.b", false},
    {"a.#.b.#", "a.b", true},
    {"a.#.b.#", "a.x.b.y.z", true},
    {"#.a.#", "a", true},
    {"#.a.#", "x.y", false},
    {"#.#", "a", true},     // consecutive '#' == one '#'
    {"a.*.#", "a", false},  // '*' still needs its segment
    {"a.*.#", "a.b", true},
    {"a.#.*", "a", false},
    {"a.#.*", "a.b.c", true},
    {"*.#.*", "a", false},
    {"*.#.*", "a.b", true},
    {"#.*.#", "a", true},
};

class TopicMatchTest : public ::testing::TestWithParam<MatchCase> {};

TEST_P(TopicMatchTest, MatchesAsRabbitMqDoes) {
  const MatchCase& c = GetParam();
  ASSERT_TRUE(validatePattern(c.pattern).isOk()) << c.pattern;
  ASSERT_TRUE(validateAddress(c.address).isOk()) << c.address;
  EXPECT_EQ(topicMatches(c.pattern, c.address), c.matches)
      << "pattern '" << c.pattern << "' address '" << c.address << "'";
}

INSTANTIATE_TEST_SUITE_P(Table, TopicMatchTest, ::testing::ValuesIn(kCases));

TEST(TopicTest, AddressesAreValidated) {
  EXPECT_TRUE(validateAddress("a").isOk());
  EXPECT_TRUE(validateAddress("stocks.nyse.ibm").isOk());
  for (const char* bad : {"", ".", "a.", ".a", "a..b", "a.*", "#", "a.b#", "st*"}) {
    Status s = validateAddress(bad);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << "'" << bad << "'";
  }
  EXPECT_NE(validateAddress("a..b").message().find("segment 2 is empty"), std::string::npos);
  EXPECT_NE(validateAddress("a.*").message().find("contains a wildcard"), std::string::npos);
}

TEST(TopicTest, PatternsAreValidated) {
  for (const char* good : {"a", "*", "#", "a.*.#", "#.a.#.b"}) {
    EXPECT_TRUE(validatePattern(good).isOk()) << good;
  }
  for (const char* bad : {"", "a..b", "a.", "st*", "a.#b", "**"}) {
    EXPECT_EQ(validatePattern(bad).code(), Status::Code::kInvalidArgument) << "'" << bad << "'";
  }
  EXPECT_NE(validatePattern("stocks.ib*").message().find("whole segments"), std::string::npos);
}

TEST(TopicTest, WildcardDetectionAndNormalization) {
  EXPECT_FALSE(hasWildcard("a.b"));
  EXPECT_TRUE(hasWildcard("a.*"));
  EXPECT_TRUE(hasWildcard("#"));
  EXPECT_EQ(normalizedPattern("#.#.a.#.#.#"), (std::vector<std::string_view>{"#", "a", "#"}));
  EXPECT_EQ(splitTopic("a.b.c"), (std::vector<std::string_view>{"a", "b", "c"}));
  EXPECT_EQ(splitTopic("a..b"), (std::vector<std::string_view>{"a", "", "b"}));
}

}  // namespace
}  // namespace cepbus::router
