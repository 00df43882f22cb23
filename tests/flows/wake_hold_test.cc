#include "flows/wake_hold.h"

#include <gtest/gtest.h>

#include <memory>

namespace cepbus::flows {
namespace {

// A writer's work queue, as a hold sees it: counts the wakes it held.
struct CountingTarget final : WakeHold::Target {
  void wakeHeld() override { ++held_wakes; }
  int held_wakes = 0;
};

TEST(WakeHoldTest, TheFirstWakeOfATargetInABurstGoesAtOnceTheRestAtItsEnd) {
  WakeHold hold;
  auto target = std::make_shared<CountingTarget>();
  EXPECT_FALSE(hold.holds(target));  // the caller wakes it now
  EXPECT_FALSE(hold.holding());
  EXPECT_TRUE(hold.holds(target));
  EXPECT_TRUE(hold.holding());
  EXPECT_EQ(target->held_wakes, 0);
  hold.flush();
  EXPECT_EQ(target->held_wakes, 1);
  EXPECT_FALSE(hold.holding());
  // A new burst: at once again.
  EXPECT_FALSE(hold.holds(target));
  hold.flush();
  EXPECT_EQ(target->held_wakes, 1);
}

TEST(WakeHoldTest, EachTargetHasItsOwnFirstWake) {
  WakeHold hold;
  auto a = std::make_shared<CountingTarget>();
  auto b = std::make_shared<CountingTarget>();
  EXPECT_FALSE(hold.holds(a));
  EXPECT_FALSE(hold.holds(b));
  EXPECT_TRUE(hold.holds(b));
  hold.flush();
  EXPECT_EQ(a->held_wakes, 0);
  EXPECT_EQ(b->held_wakes, 1);
}

TEST(WakeHoldTest, AHeldTargetLivesUntilTheFlush) {
  WakeHold hold;
  auto target = std::make_shared<CountingTarget>();
  std::weak_ptr<CountingTarget> watch = target;
  EXPECT_FALSE(hold.holds(target));
  EXPECT_TRUE(hold.holds(target));
  target.reset();
  ASSERT_FALSE(watch.expired());
  hold.flush();
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace cepbus::flows
