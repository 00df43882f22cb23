#include "flows/delivery_context.h"

#include <gtest/gtest.h>

#include "tests/flows/flow_test_util.h"

namespace cepbus::flows {
namespace {

using testing::FakeJournal;

TEST(DeliveryContextTest, ADeliveryNobodyJournaledRefusesToDefer) {
  WakeHold hold;
  DeliveryContext context(&hold);
  EXPECT_FALSE(context.journaled());
  EXPECT_FALSE(context.deferAcknowledgement());
  EXPECT_FALSE(context.deferred());  // the status deliver() returns acknowledges it
  EXPECT_EQ(context.wakeHold(), &hold);
  DeferredAck()(Status::ok());  // an empty acknowledgement does nothing
}

TEST(DeliveryContextTest, AJournaledDeliveryHandsItsAcknowledgementToTheTarget) {
  FakeJournal journal(/*previous=*/2);
  DeliveryContext context(nullptr, &journal);
  EXPECT_TRUE(context.journaled());
  EXPECT_EQ(context.wakeHold(), nullptr);
  EXPECT_FALSE(context.deferred());  // until the target takes it
  DeferredAck ack = context.deferAcknowledgement();
  ASSERT_TRUE(ack);
  EXPECT_TRUE(context.deferred());
  EXPECT_EQ(ack.previousDeliveries(), 2u);
  EXPECT_EQ(journal.deferred(), 1u);
  ack(Status::unavailable("the subscriber went away"));
  const auto given = journal.acknowledged();
  ASSERT_EQ(given.size(), 1u);
  EXPECT_EQ(given[0].second.code(), Status::Code::kUnavailable);
}

}  // namespace
}  // namespace cepbus::flows
