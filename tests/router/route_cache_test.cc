#include "router/route_cache.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "bus/core/wire_names.h"
#include "tests/flows/flow_test_util.h"
#include "tests/testing/held_names.h"

namespace cepbus::router {
namespace {

using flows::testing::RecordingTarget;

std::unique_ptr<ResolvedRoute> routeTo(Symbol address, std::shared_ptr<RecordingTarget> target) {
  auto route = std::make_unique<ResolvedRoute>();
  route->address = address;
  route->incarnation = heldNameIncarnation(address);  // as the broker builds it
  route->targets.push_back(target.get());
  route->keep_alive.push_back(std::move(target));
  return route;
}

std::unique_ptr<ResolvedRoute> routeTo(std::string_view address,
                                       std::shared_ptr<RecordingTarget> target) {
  return routeTo(Symbol::intern(address), std::move(target));
}

TEST(RouteCacheTest, FindsWhatWasInstalled) {
  EpochReclaimer reclaimer;
  RouteCache cache(reclaimer);
  const Symbol address = Symbol::intern("cache.a");
  EXPECT_EQ(cache.find(address), nullptr);
  auto target = std::make_shared<RecordingTarget>("t");
  const ResolvedRoute* route = cache.install(routeTo("cache.a", target));
  EXPECT_EQ(cache.find(address), route);
  EXPECT_EQ(cache.find(Symbol::intern("cache.b")), nullptr);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(RouteCacheTest, ClearRetiresRoutesAndReleasesTheirTargets) {
  EpochReclaimer reclaimer;
  RouteCache cache(reclaimer);
  auto target = std::make_shared<RecordingTarget>("t");
  cache.install(routeTo("cache.a", target));
  cache.install(routeTo("cache.b", target));
  EXPECT_EQ(target.use_count(), 3);
  {
    EpochReclaimer::Guard guard = reclaimer.enter();
    const ResolvedRoute* held = cache.find(Symbol::intern("cache.a"));
    cache.clear();
    reclaimer.reclaim();
    EXPECT_EQ(cache.find(Symbol::intern("cache.a")), nullptr);
    // Still usable by the reader that loaded it.
    EXPECT_EQ(held->targets[0], target.get());
    EXPECT_EQ(target.use_count(), 3);
  }
  reclaimer.reclaim();
  EXPECT_EQ(target.use_count(), 1);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(RouteCacheTest, ReinstallingRetiresTheOldRoute) {
  EpochReclaimer reclaimer;
  RouteCache cache(reclaimer);
  auto first = std::make_shared<RecordingTarget>("first");
  auto second = std::make_shared<RecordingTarget>("second");
  cache.install(routeTo("cache.a", first));
  const ResolvedRoute* now = cache.install(routeTo("cache.a", second));
  EXPECT_EQ(cache.find(Symbol::intern("cache.a")), now);
  reclaimer.reclaim();
  EXPECT_EQ(first.use_count(), 1);
  EXPECT_EQ(cache.size(), 1u);
}

// A client's address is a held name: once given back, its id goes to
// another name. The route built for the first must never be found for the
// second, or its events would go to the first one's subscribers.
TEST(RouteCacheTest, ARouteIsNotFoundForAnotherNameOnTheSameId) {
  EpochReclaimer reclaimer;
  RouteCache cache(reclaimer);
  std::optional<NameHold> first = holdWireName("cache.held.first");
  ASSERT_TRUE(first);
  const Symbol id = first->symbol();
  ASSERT_TRUE(id.held());
  auto old_target = std::make_shared<RecordingTarget>("old");
  const ResolvedRoute* old_route = cache.install(routeTo(id, old_target));
  EXPECT_EQ(cache.find(id), old_route);
  first.reset();  // the link and its exchanges are gone

  std::vector<NameHold> kept;
  const std::optional<NameHold> second = testing::reuseHeldId(id, "cache.held.next.", kept);
  ASSERT_TRUE(second);
  EXPECT_EQ(cache.find(second->symbol()), nullptr);  // same id, another name: a miss
  auto new_target = std::make_shared<RecordingTarget>("new");
  const ResolvedRoute* new_route = cache.install(routeTo(second->symbol(), new_target));
  EXPECT_EQ(cache.find(second->symbol()), new_route);
  EXPECT_EQ(cache.size(), 1u);
  reclaimer.reclaim();
  EXPECT_EQ(old_target.use_count(), 1);  // the stale route is retired, not kept
}

// Routes of held addresses are bounded: a flood of new addresses does not
// keep a route per address, and the routes of the bus's own addresses stay.
TEST(RouteCacheTest, HeldRoutesAreBounded) {
  EpochReclaimer reclaimer;
  RouteCache cache(reclaimer);
  auto target = std::make_shared<RecordingTarget>("t");
  const ResolvedRoute* known = cache.install(routeTo("cache.known", target));
  std::vector<NameHold> holds;
  for (size_t i = 0; i <= RouteCache::kMaxHeldRoutes; ++i) {
    std::optional<NameHold> address = holdWireName("cache.flood." + std::to_string(i));
    ASSERT_TRUE(address);
    cache.install(routeTo(address->symbol(), target));
    holds.push_back(std::move(*address));
  }
  EXPECT_LE(cache.heldSize(), RouteCache::kMaxHeldRoutes);
  EXPECT_NE(cache.find(holds.back().symbol()), nullptr);  // the newest is there
  EXPECT_EQ(cache.find(Symbol::intern("cache.known")), known);
  cache.clear();
  reclaimer.reclaim();
  EXPECT_EQ(target.use_count(), 1);
}

}  // namespace
}  // namespace cepbus::router
