#include "bus/base/spelling.h"

#include <gtest/gtest.h>

namespace cepbus {
namespace {

TEST(SpellingTest, EditDistanceCountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(editDistance("price", "price"), 0u);
  EXPECT_EQ(editDistance("prize", "price"), 1u);
  EXPECT_EQ(editDistance("vlaue", "value"), 2u);
  EXPECT_EQ(editDistance("", "abc"), 3u);
  EXPECT_EQ(editDistance("sensr", "sensor"), 1u);
}

TEST(SpellingTest, ClosestPicksTheNearestCandidateWithinReach) {
  const std::vector<std::string_view> names = {"value", "price", "sensor"};
  EXPECT_EQ(closest("prize", names), "price");
  EXPECT_EQ(closest("sensr", names), "sensor");
  // Too far from every candidate, or too short to guess from.
  EXPECT_FALSE(closest("temperature", names).has_value());
  EXPECT_FALSE(closest("ab", {"xy"}).has_value());
}

}  // namespace
}  // namespace cepbus
