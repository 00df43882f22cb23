#include "bus/app/flag_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cepbus::app {
namespace {

TEST(FlagReaderTest, ReadsBothSpellingsAndSwitches) {
  const std::vector<std::string> args = {"--events", "e.jsonl", "--key=id", "--count", "--empty="};
  FlagReader flags(args);
  ASSERT_TRUE(flags.next());
  EXPECT_EQ(flags.flag(), "--events");
  EXPECT_FALSE(flags.hasInlineValue());
  EXPECT_EQ(*flags.value(), "e.jsonl");
  ASSERT_TRUE(flags.next());
  EXPECT_EQ(flags.flag(), "--key");
  EXPECT_EQ(flags.argument(), "--key=id");
  EXPECT_TRUE(flags.hasInlineValue());
  EXPECT_EQ(*flags.value(), "id");
  ASSERT_TRUE(flags.next());
  EXPECT_EQ(flags.flag(), "--count");  // a switch: its value is never asked for
  ASSERT_TRUE(flags.next());
  EXPECT_EQ(flags.flag(), "--empty");
  EXPECT_EQ(*flags.value(), "");
  EXPECT_FALSE(flags.next());
}

TEST(FlagReaderTest, AMissingValueNamesTheFlag) {
  const std::vector<std::string> args = {"--query"};
  FlagReader flags(args);
  ASSERT_TRUE(flags.next());
  Result<std::string> value = flags.value();
  ASSERT_FALSE(value.isOk());
  EXPECT_EQ(value.status().message(), "--query needs a value");
  EXPECT_FALSE(flags.next());
}

TEST(FlagReaderTest, OnlyDoubleDashArgumentsSplitAtEquals) {
  const std::vector<std::string> args = {"--option", "slack=3", "a=b"};
  FlagReader flags(args);
  ASSERT_TRUE(flags.next());
  EXPECT_EQ(*flags.value(), "slack=3");
  ASSERT_TRUE(flags.next());
  EXPECT_EQ(flags.flag(), "a=b");
  EXPECT_FALSE(flags.hasInlineValue());
}

}  // namespace
}  // namespace cepbus::app
