#include "services/amqp/listener/unsettled_budget.h"

#include <gtest/gtest.h>

#include <memory>
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

// Two connections of one user, each under its own limit, together at the
// user's: the connection that goes beyond is refused naming the user's
// limit, holds nothing for the refused delivery, and is served again once
// the other connection's delivery settles.
TEST(UnsettledBudgetTest, AUsersConnectionsTogetherAreHeldToTheUsersLimits) {
  auto user = std::make_shared<UserUnsettledBudget>(/*max_deliveries=*/3, /*max_bytes=*/1000);
  UnsettledBudget a(/*max_deliveries=*/2, /*max_bytes=*/1000);
  UnsettledBudget b(2, 1000);
  a.shareWith(user);
  b.shareWith(user);
  EXPECT_FALSE(a.hold(100));
  EXPECT_FALSE(a.hold(100));
  EXPECT_FALSE(b.hold(100));
  const std::optional<UnsettledBudget::Refusal> refused = b.hold(100);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->limit, UnsettledLimit::kUserDeliveries);
  EXPECT_EQ(refused->description, "unsettled deliveries per user (max-user-unsettled): 3 reached");
  EXPECT_EQ(b.deliveries(), 1u);
  EXPECT_EQ(user->deliveries(), 3u);
  EXPECT_FALSE(b.full());  // its own budget has room: its links keep their credit
  a.settled(100);
  EXPECT_EQ(user->deliveries(), 2u);
  EXPECT_FALSE(b.hold(100));
  // The connection's own limit is told first.
  const std::optional<UnsettledBudget::Refusal> own = b.hold(100);
  ASSERT_TRUE(own);
  EXPECT_EQ(own->limit, UnsettledLimit::kDeliveries);
}

TEST(UnsettledBudgetTest, AUsersBytesInFlightAreBoundedOverItsConnections) {
  auto user = std::make_shared<UserUnsettledBudget>(100, /*max_bytes=*/1000);
  UnsettledBudget a(100, 800);
  UnsettledBudget b(100, 800);
  a.shareWith(user);
  b.shareWith(user);
  EXPECT_FALSE(a.hold(700));
  const std::optional<UnsettledBudget::Refusal> refused = b.hold(400);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->limit, UnsettledLimit::kUserBytes);
  EXPECT_EQ(refused->description,
            "bytes in flight per user (max-user-bytes-in-flight): 700 held, a message of 400 "
            "bytes would pass 1000");
  EXPECT_FALSE(b.hold(300));  // exactly the user's limit fits
  EXPECT_EQ(user->bytes(), 1000u);
  b.settled(300);
  a.settled(700);
  EXPECT_EQ(user->bytes(), 0u);
  EXPECT_EQ(user->deliveries(), 0u);
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
