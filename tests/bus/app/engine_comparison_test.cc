#include "bus/app/engine_comparison.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace cepbus::app {
namespace {

std::vector<RecordedMatch> sorted(std::vector<RecordedMatch> m) {
  std::sort(m.begin(), m.end(), streamOrder);
  return m;
}

TEST(EngineComparisonTest, OrdersMatchesByWhereTheyEndInTheStream) {
  const auto m = sorted({{0, {1, 9}}, {0, {4, 5}}, {1, {2, 5}}, {0, {2, 5}}});
  EXPECT_EQ(m, (std::vector<RecordedMatch>{{0, {2, 5}}, {1, {2, 5}}, {0, {4, 5}}, {0, {1, 9}}}));
}

TEST(EngineComparisonTest, TheSameMultisetInAnotherOrderHasNoDifference) {
  EXPECT_FALSE(firstDifference(sorted({{0, {1, 2}}, {0, {1, 2}}, {0, {3, 4}}}),
                               sorted({{0, {3, 4}}, {0, {1, 2}}, {0, {1, 2}}})));
  EXPECT_FALSE(firstDifference({}, {}));
}

TEST(EngineComparisonTest, NamesTheEarliestMatchCountedDifferently) {
  // Missing from the other side, reported twice, only on the other side:
  // the earliest end wins, whichever side has it.
  const auto ref = sorted({{0, {1, 3}}, {0, {2, 6}}, {0, {5, 8}}});
  auto d = firstDifference(ref, sorted({{0, {1, 3}}, {0, {5, 8}}}));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->match, (RecordedMatch{0, {2, 6}}));
  EXPECT_EQ(d->in_reference, 1u);
  EXPECT_EQ(d->in_other, 0u);
  d = firstDifference(ref, sorted({{0, {1, 3}}, {0, {1, 3}}, {0, {2, 6}}, {0, {5, 8}}}));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->match, (RecordedMatch{0, {1, 3}}));
  EXPECT_EQ(d->in_other, 2u);
  d = firstDifference(ref, sorted({{0, {1, 3}}, {0, {2, 6}}, {0, {5, 8}}, {1, {5, 8}}}));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->match, (RecordedMatch{1, {5, 8}}));
  EXPECT_EQ(d->in_reference, 0u);
}

}  // namespace
}  // namespace cepbus::app
