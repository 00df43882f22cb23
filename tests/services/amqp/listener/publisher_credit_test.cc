#include "services/amqp/listener/publisher_credit.h"

#include <gtest/gtest.h>

namespace cepbus::services::amqp {
namespace {

TEST(PublisherCreditTest, WithoutSubscribersALinkMayHoldTheWindow) {
  const PublisherCredit credit(100);
  EXPECT_EQ(credit.room(), 100);
  EXPECT_FALSE(credit.aboveLowWater());
  const CreditGrant grant = credit.grant(0);
  EXPECT_FALSE(grant.wait);
  EXPECT_EQ(grant.add, 100);
}

TEST(PublisherCreditTest, TopsUpOnlyOnceHalfTheRoomIsUsed) {
  const PublisherCredit credit(100);
  EXPECT_EQ(credit.grant(50).add, 50);
  EXPECT_EQ(credit.grant(51).add, 0);
  EXPECT_FALSE(credit.grant(51).wait);
  EXPECT_EQ(credit.grant(100).add, 0);
}

TEST(PublisherCreditTest, ABufferWithLessRoomThanTheWindowBoundsTheCredit) {
  PublisherCredit credit(100);
  credit.feeds(/*capacity=*/10, /*load=*/4, /*publishers=*/1, /*stalled=*/false);
  EXPECT_EQ(credit.room(), 6);
  EXPECT_EQ(credit.grant(0).add, 6);
  EXPECT_EQ(credit.grant(3).add, 3);
  EXPECT_EQ(credit.grant(4).add, 0);
}

TEST(PublisherCreditTest, TheTightestBufferWins) {
  PublisherCredit credit(100);
  credit.feeds(1000, 0, 1, false);
  credit.feeds(10, 8, 1, false);
  credit.feeds(50, 0, 1, false);
  EXPECT_EQ(credit.room(), 2);
}

TEST(PublisherCreditTest, PublishersFeedingOneBufferShareItsRoomEqually) {
  PublisherCredit shared(100);
  shared.feeds(10, 0, 3, false);
  EXPECT_EQ(shared.room(), 3);  // rounded down: together they never overflow it

  PublisherCredit alone(100);
  alone.feeds(10, 0, 0, false);  // not counted as a feeder yet: counts as one
  EXPECT_EQ(alone.room(), 10);
}

TEST(PublisherCreditTest, AFullBufferMakesTheLinkWait) {
  PublisherCredit full(100);
  full.feeds(10, 10, 1, false);
  EXPECT_TRUE(full.grant(0).wait);
  EXPECT_EQ(full.grant(0).add, 0);

  PublisherCredit overfull(100);  // a load counted above the capacity
  overfull.feeds(10, 12, 1, false);
  EXPECT_LT(overfull.room(), 0);
  EXPECT_TRUE(overfull.grant(5).wait);

  PublisherCredit crowded(100);  // room, but less than one message each
  crowded.feeds(10, 8, 3, false);
  EXPECT_TRUE(crowded.grant(0).wait);
}

TEST(PublisherCreditTest, AStalledBufferHoldsNobodyBack) {
  PublisherCredit credit(100);
  credit.feeds(10, 10, 1, /*stalled=*/true);
  EXPECT_EQ(credit.room(), 100);
  EXPECT_FALSE(credit.aboveLowWater());
  EXPECT_FALSE(credit.grant(0).wait);
}

TEST(PublisherCreditTest, AboveLowWaterWhileABufferHoldsMoreThanHalfItsCapacity) {
  PublisherCredit at(100);
  at.feeds(10, 5, 1, false);
  EXPECT_FALSE(at.aboveLowWater());

  PublisherCredit above(100);
  above.feeds(10, 5, 1, false);
  above.feeds(10, 6, 1, false);
  EXPECT_TRUE(above.aboveLowWater());

  EXPECT_EQ(PublisherCredit::lowWater(1001), 500);
  EXPECT_EQ(PublisherCredit::lowWater(1), 0);
}

}  // namespace
}  // namespace cepbus::services::amqp
