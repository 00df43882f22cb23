#include "services/amqp/listener/publisher_hold.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace cepbus::services::amqp {
namespace {

struct PublisherHoldTest : ::testing::Test {
  std::shared_ptr<ListenerCounters> counters = std::make_shared<ListenerCounters>();
  std::shared_ptr<LinkCounters> stats = std::make_shared<LinkCounters>();
  PublisherHold hold{counters, stats};
};

TEST_F(PublisherHoldTest, ANewLinkIsNotHeld) {
  EXPECT_FALSE(hold.held());
  EXPECT_FALSE(hold.paused());
  EXPECT_FALSE(hold.waiting());
  EXPECT_EQ(counters->paused_links.value(), 0);
}

TEST_F(PublisherHoldTest, APauseIsCountedOnceAndCollectsTheCongestedTargets) {
  hold.pause({"a"});
  hold.pause({"b", "c"});
  EXPECT_TRUE(hold.held());
  EXPECT_TRUE(hold.paused());
  EXPECT_EQ(hold.congested(), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(counters->credit_pauses.value(), 1u);
  EXPECT_EQ(counters->subscriber_waits.value(), 0u);
  EXPECT_EQ(counters->paused_links.value(), 1);
  EXPECT_EQ(stats->credit_withheld.load(), 1u);

  hold.unpause();
  EXPECT_FALSE(hold.held());
  EXPECT_TRUE(hold.congested().empty());
  EXPECT_EQ(counters->paused_links.value(), 0);
}

TEST_F(PublisherHoldTest, AWaitCountsAsASubscriberWait) {
  hold.wait();
  EXPECT_TRUE(hold.waiting());
  EXPECT_EQ(counters->credit_pauses.value(), 1u);
  EXPECT_EQ(counters->subscriber_waits.value(), 1u);
  EXPECT_EQ(counters->paused_links.value(), 1);
  EXPECT_EQ(stats->credit_withheld.load(), 1u);
  hold.stopWaiting();
  EXPECT_FALSE(hold.held());
  EXPECT_EQ(counters->paused_links.value(), 0);
}

TEST_F(PublisherHoldTest, ALinkHeldBothWaysIsOnePausedLinkUntilBothEnd) {
  hold.pause({});
  hold.wait();
  EXPECT_EQ(counters->credit_pauses.value(), 2u);  // each hold that starts
  EXPECT_EQ(counters->paused_links.value(), 1);    // one link
  hold.unpause();
  EXPECT_TRUE(hold.held());
  EXPECT_EQ(counters->paused_links.value(), 1);
  hold.stopWaiting();
  EXPECT_EQ(counters->paused_links.value(), 0);

  hold.wait();
  hold.pause({"t"});
  hold.stopWaiting();
  EXPECT_EQ(counters->paused_links.value(), 1);
  hold.unpause();
  EXPECT_EQ(counters->paused_links.value(), 0);
}

TEST_F(PublisherHoldTest, EndingAHoldThatDidNotStartChangesNothing) {
  hold.unpause();
  hold.stopWaiting();
  EXPECT_EQ(counters->paused_links.value(), 0);
}

TEST_F(PublisherHoldTest, PublishCreditFollowsTheLinksCredit) {
  hold.countCredit(100);
  EXPECT_EQ(counters->publish_credit.value(), 100);
  hold.countCredit(40);
  EXPECT_EQ(counters->publish_credit.value(), 40);
  PublisherHold other{counters, std::make_shared<LinkCounters>()};
  other.countCredit(10);
  EXPECT_EQ(counters->publish_credit.value(), 50);
}

TEST_F(PublisherHoldTest, ALinkThatGoesAwayTakesItsCountsWithIt) {
  hold.countCredit(30);
  hold.pause({"t"});
  hold.wait();
  hold.release();
  EXPECT_EQ(counters->paused_links.value(), 0);
  EXPECT_EQ(counters->publish_credit.value(), 0);
  EXPECT_FALSE(hold.held());
}

TEST_F(PublisherHoldTest, ARecheckIsScheduledOnce) {
  EXPECT_TRUE(hold.scheduleRecheck());
  EXPECT_FALSE(hold.scheduleRecheck());
  hold.recheckRan();
  EXPECT_TRUE(hold.scheduleRecheck());
}

}  // namespace
}  // namespace cepbus::services::amqp
