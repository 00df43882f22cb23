#include "bus/host/detection/composite_id.h"

#include <gtest/gtest.h>

#include <vector>

namespace cepbus::detection {
namespace {

TEST(CompositeIdTest, SameQueryAndConstituentsGiveTheSameId) {
  std::vector<EventId> ids{1, 2, 3};
  EXPECT_EQ(compositeId("equal-prices", ids), compositeId("equal-prices", ids));
}

TEST(CompositeIdTest, QueryOrderAndEventsAllMatter) {
  std::vector<EventId> abc{1, 2, 3};
  std::vector<EventId> acb{1, 3, 2};
  std::vector<EventId> ab{1, 2};
  EXPECT_NE(compositeId("q", abc), compositeId("q", acb));
  EXPECT_NE(compositeId("q", abc), compositeId("r", abc));
  EXPECT_NE(compositeId("q", abc), compositeId("q", ab));
  // The 0 byte after the name keeps "q1" + ids apart from "q" + other ids.
  std::vector<EventId> none;
  EXPECT_NE(compositeId("q", ab), compositeId("q\x01", none));
}

}  // namespace
}  // namespace cepbus::detection
