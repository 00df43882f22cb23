#include "services/amqp/listener/publisher_wake.h"

#include <gtest/gtest.h>

#include <proton/container.hpp>
#include <proton/work_queue.hpp>

namespace cepbus::services::amqp {
namespace {

TEST(PublisherWakeTest, PostsOnlyForAWaitingLinkAndOnceUntilItRan) {
  proton::container container;
  proton::work_queue queue(container);  // runs nothing: the container never runs
  int resumes = 0;
  PublisherWake wake(std::make_shared<Waker>(&queue), [&resumes] { ++resumes; });
  EXPECT_FALSE(wake.post());  // not waiting
  wake.setWaiting(true);
  EXPECT_TRUE(wake.waiting());
  EXPECT_TRUE(wake.post());
  EXPECT_FALSE(wake.post());  // one on its way
  wake.ran();
  EXPECT_TRUE(wake.post());
  wake.ran();
  wake.setWaiting(false);
  EXPECT_FALSE(wake.post());
}

TEST(PublisherWakeTest, AGoneConnectionLeavesNothingOnItsWay) {
  auto waker = std::make_shared<Waker>(nullptr);
  PublisherWake wake(waker, [] {});
  wake.setWaiting(true);
  EXPECT_FALSE(wake.post());
  EXPECT_FALSE(wake.post());  // still nothing: it did not count as posted
}

}  // namespace
}  // namespace cepbus::services::amqp
