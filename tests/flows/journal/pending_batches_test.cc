#include "flows/journal/pending_batches.h"

#include <gtest/gtest.h>

#include <vector>

namespace cepbus::flows {
namespace {

TEST(PendingBatchesTest, APartlyAcknowledgedRowKeepsABitmapOfItsRecords) {
  PendingBatches index;
  const std::vector<uint64_t> row{10, 11, 12, 20};
  index.add(1, row);
  const std::vector<uint64_t> acked{11, 20, 99};
  PendingBatches::Plan plan = index.plan(acked);
  ASSERT_EQ(plan.rows.size(), 1u);
  EXPECT_EQ(plan.rows[0].row, 1);
  EXPECT_EQ(plan.rows[0].acknowledged, 2u);
  EXPECT_FALSE(plan.rows[0].emptied);
  EXPECT_FALSE(plan.rows[0].had_bitmap);
  EXPECT_FALSE(PendingBatches::isAcked(plan.rows[0].acked, 0));
  EXPECT_TRUE(PendingBatches::isAcked(plan.rows[0].acked, 1));
  EXPECT_TRUE(PendingBatches::isAcked(plan.rows[0].acked, 3));
  EXPECT_EQ(plan.held, (std::vector<uint64_t>{11, 20}));
  EXPECT_EQ(plan.unknown, (std::vector<uint64_t>{99}));
  // Nothing changes until the plan is applied.
  EXPECT_TRUE(index.holds(11));
  index.apply(plan);
  EXPECT_FALSE(index.holds(11));
  EXPECT_TRUE(index.holds(10));

  const std::vector<uint64_t> rest{10, 12};
  PendingBatches::Plan last = index.plan(rest);
  ASSERT_EQ(last.rows.size(), 1u);
  EXPECT_TRUE(last.rows[0].emptied);
  EXPECT_TRUE(last.rows[0].had_bitmap);
  index.apply(last);
  EXPECT_FALSE(index.holds(10));
  EXPECT_EQ(index.seqsOf(1), nullptr);
}

TEST(PendingBatchesTest, AcknowledgementsAcrossRowsAndARowReadWithItsBitmap) {
  PendingBatches index;
  const std::vector<uint64_t> first{1, 3, 2};  // a row stores them as they came
  const std::vector<uint64_t> second{4, 5};
  index.add(7, first);
  index.add(8, second, std::string(1, '\x01'));  // 4 acknowledged before a restart
  EXPECT_FALSE(index.holds(4));
  const std::vector<uint64_t> acked{2, 5};
  PendingBatches::Plan plan = index.plan(acked);
  ASSERT_EQ(plan.rows.size(), 2u);
  EXPECT_EQ(plan.rows[0].row, 7);
  EXPECT_TRUE(PendingBatches::isAcked(plan.rows[0].acked, 2));
  EXPECT_FALSE(plan.rows[0].emptied);
  EXPECT_EQ(plan.rows[1].row, 8);
  EXPECT_TRUE(plan.rows[1].emptied);
  index.apply(plan);
  ASSERT_NE(index.seqsOf(7), nullptr);
  EXPECT_EQ(*index.seqsOf(7), first);
  index.remove(7);
  EXPECT_FALSE(index.holds(1));
  EXPECT_FALSE(index.holds(3));
}

}  // namespace
}  // namespace cepbus::flows
