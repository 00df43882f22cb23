#include "services/amqp/listener/in_flight_bound.h"

#include <gtest/gtest.h>

namespace cepbus::services::amqp {
namespace {

TEST(InFlightBoundTest, SendsWhatTheCreditAllowsWhileBelowTheBound) {
  InFlightBound bound;
  EXPECT_EQ(bound.take(/*credit=*/10, /*in_flight=*/0, /*capacity=*/100), 10);
  EXPECT_FALSE(bound.capped());
  EXPECT_EQ(bound.take(10, 90, 100), 10);  // exactly up to the bound
  EXPECT_FALSE(bound.capped());
}

TEST(InFlightBoundTest, StopsAtTheBoundWhateverTheCredit) {
  InFlightBound bound;
  EXPECT_EQ(bound.take(1000, 0, 100), 100);
  EXPECT_TRUE(bound.capped());
  EXPECT_EQ(bound.take(1000, 95, 100), 5);
  EXPECT_TRUE(bound.capped());
}

TEST(InFlightBoundTest, SendsNothingAtOrBeyondTheBound) {
  InFlightBound bound;
  EXPECT_EQ(bound.take(10, 100, 100), 0);
  EXPECT_TRUE(bound.capped());
  // More in flight than the buffer (unsent deliveries counted by Proton).
  EXPECT_EQ(bound.take(10, 150, 100), 0);
  EXPECT_TRUE(bound.capped());
}

TEST(InFlightBoundTest, WithoutCreditNothingIsSentAndTheBoundIsNotTheReason) {
  InFlightBound bound;
  EXPECT_EQ(bound.take(1000, 100, 100), 0);
  ASSERT_TRUE(bound.capped());
  EXPECT_EQ(bound.take(0, 100, 100), 0);
  EXPECT_FALSE(bound.capped());  // the credit stopped it: a settlement need not drain
  EXPECT_EQ(bound.take(0, 0, 100), 0);
  EXPECT_FALSE(bound.capped());
}

}  // namespace
}  // namespace cepbus::services::amqp
