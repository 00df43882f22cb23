#include "router/route_cache.h"

#include <gtest/gtest.h>

#include "tests/flows/flow_test_util.h"

namespace cepbus::router {
namespace {

using flows::testing::RecordingTarget;

std::unique_ptr<ResolvedRoute> routeTo(std::string_view address,
                                       std::shared_ptr<RecordingTarget> target) {
  auto route = std::make_unique<ResolvedRoute>();
  route->address = Symbol::intern(address);
  route->targets.push_back(target.get());
  route->keep_alive.push_back(std::move(target));
  return route;
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

}  // namespace
}  // namespace cepbus::router
