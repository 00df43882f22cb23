#include "flows/dedupe_window.h"

#include <gtest/gtest.h>

#include <optional>

#include "bus/core/wire_names.h"

namespace cepbus::flows {
namespace {

TEST(DedupeWindowTest, RemembersPerTargetAndEvent) {
  DedupeWindow w(10);
  const Symbol a = Symbol::intern("dedupe.a"), b = Symbol::intern("dedupe.b");
  w.insert({a, 1});
  EXPECT_TRUE(w.contains({a, 1}));
  EXPECT_FALSE(w.contains({b, 1}));  // per target
  EXPECT_FALSE(w.contains({a, 2}));
  w.insert({a, 1});  // no effect when known
  EXPECT_EQ(w.size(), 1u);
}

TEST(DedupeWindowTest, ForgetsTheOldestWhenFull) {
  DedupeWindow w(3);
  const Symbol a = Symbol::intern("dedupe.a");
  for (EventId id = 1; id <= 5; ++id) w.insert({a, id});
  EXPECT_EQ(w.size(), 3u);
  EXPECT_FALSE(w.contains({a, 1}));
  EXPECT_FALSE(w.contains({a, 2}));
  for (EventId id = 3; id <= 5; ++id) EXPECT_TRUE(w.contains({a, id}));
  w.clear();
  EXPECT_EQ(w.size(), 0u);
  EXPECT_FALSE(w.contains({a, 5}));
}

// A client's target name stays held while a key of it is remembered, so
// its id cannot stand for another target meanwhile; it is given back with
// the last such key.
TEST(DedupeWindowTest, HoldsAClientsTargetNameWhileItRemembersAKeyOfIt) {
  DedupeWindow w(2);
  const Symbol permanent = Symbol::intern("dedupe.a");
  const uint32_t held_before = wireNameStats().held;
  {
    std::optional<NameHold> hold = holdWireName("dedupe.client-link-1");
    ASSERT_TRUE(hold.has_value());
    w.insert({hold->symbol(), 1});
    w.insert({hold->symbol(), 2});
  }  // the link went away
  EXPECT_EQ(wireNameStats().held, held_before + 1);
  w.insert({permanent, 3});
  EXPECT_EQ(wireNameStats().held, held_before + 1);  // key 2 still names it
  w.insert({permanent, 4});
  EXPECT_EQ(wireNameStats().held, held_before);
}

// Long after it first filled up, the window still holds exactly the last
// `capacity` keys (the ring wraps many times).
TEST(DedupeWindowTest, KeepsTheLastCapacityKeysAcrossManyWraps) {
  DedupeWindow w(100);
  const Symbol a = Symbol::intern("dedupe.a");
  for (EventId id = 1; id <= 1'050; ++id) w.insert({a, id});
  EXPECT_EQ(w.size(), 100u);
  for (EventId id = 1; id <= 1'050; ++id) EXPECT_EQ(w.contains({a, id}), id > 950) << id;
  w.insert({a, 1'000});  // known: nothing is forgotten
  EXPECT_TRUE(w.contains({a, 951}));
  w.clear();
  for (EventId id = 1; id <= 150; ++id) w.insert({a, id});
  EXPECT_FALSE(w.contains({a, 50}));
  EXPECT_TRUE(w.contains({a, 51}));
}

TEST(DedupeWindowTest, ZeroCapacityRemembersNothing) {
  DedupeWindow w(0);
  w.insert({Symbol::intern("dedupe.a"), 1});
  EXPECT_FALSE(w.contains({Symbol::intern("dedupe.a"), 1}));
}

}  // namespace
}  // namespace cepbus::flows
