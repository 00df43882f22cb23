#include "services/amqp/listener/unsettled_budget.h"

#include <gtest/gtest.h>

#include <optional>

namespace cepbus::services::amqp {
namespace {

TEST(UnsettledBudgetTest, RefusesDeliveriesBeyondTheLimitUntilOneIsSettled) {
  UnsettledBudget budget(/*max_deliveries=*/2, /*max_bytes=*/1000);
  EXPECT_FALSE(budget.hold(10));
  EXPECT_FALSE(budget.full());
  EXPECT_FALSE(budget.hold(10));
  EXPECT_TRUE(budget.full());
  const std::optional<UnsettledBudget::Refusal> refused = budget.hold(10);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->limit, UnsettledBudget::Limit::kDeliveries);
  EXPECT_EQ(refused->description, "unsettled deliveries per connection (max-unsettled): 2 reached");
  EXPECT_EQ(budget.deliveries(), 2u);  // a refusal holds nothing
  budget.settled(10);
  EXPECT_FALSE(budget.full());
  EXPECT_FALSE(budget.hold(10));
}

TEST(UnsettledBudgetTest, RefusesAMessageThatWouldPassTheBytesInFlight) {
  UnsettledBudget budget(100, /*max_bytes=*/1000);
  EXPECT_FALSE(budget.hold(600));
  const std::optional<UnsettledBudget::Refusal> refused = budget.hold(401);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->limit, UnsettledBudget::Limit::kBytes);
  EXPECT_EQ(refused->description,
            "bytes in flight per connection (max-bytes-in-flight): 600 held, a message of 401 "
            "bytes would pass 1000");
  EXPECT_FALSE(budget.hold(400));  // exactly the limit fits
  EXPECT_TRUE(budget.full());
  EXPECT_EQ(budget.bytes(), 1000u);
  budget.settled(600);
  EXPECT_EQ(budget.bytes(), 400u);
  EXPECT_EQ(budget.deliveries(), 1u);
}

TEST(UnsettledBudgetTest, SettlingMoreThanWasHeldStaysAtZero) {
  UnsettledBudget budget(1, 10);
  budget.settled(5);
  EXPECT_EQ(budget.deliveries(), 0u);
  EXPECT_EQ(budget.bytes(), 0u);
  EXPECT_FALSE(budget.hold(10));
}

}  // namespace
}  // namespace cepbus::services::amqp
