#include "flows/flat_set.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>

namespace cepbus::flows {
namespace {

// Every key in one of eight home slots: long probe chains that wrap around
// the end of the table, which is where erase's backward shift can go wrong.
struct CollidingHash {
  size_t operator()(uint64_t k) const noexcept { return (k % 8) * 2 + 9; }
};

TEST(FlatSetTest, InsertContainsErase) {
  FlatSet<uint64_t, std::hash<uint64_t>> set;
  EXPECT_TRUE(set.insert(7));
  EXPECT_FALSE(set.insert(7));
  EXPECT_TRUE(set.contains(7));
  EXPECT_FALSE(set.contains(8));
  EXPECT_EQ(set.size(), 1u);
  EXPECT_TRUE(set.erase(7));
  EXPECT_FALSE(set.erase(7));
  EXPECT_FALSE(set.contains(7));
  EXPECT_TRUE(set.empty());
}

TEST(FlatSetTest, GrowsAndKeepsEveryKey) {
  FlatSet<uint64_t, std::hash<uint64_t>> set;
  for (uint64_t k = 0; k < 10'000; ++k) ASSERT_TRUE(set.insert(k * 7919));
  EXPECT_EQ(set.size(), 10'000u);
  for (uint64_t k = 0; k < 10'000; ++k) ASSERT_TRUE(set.contains(k * 7919)) << k;
  EXPECT_FALSE(set.contains(1));
}

// Random inserts and erases against std::set, with a hash that makes almost
// every key collide: after every step both hold the same keys.
TEST(FlatSetTest, AgreesWithStdSetUnderCollisions) {
  FlatSet<uint64_t, CollidingHash> set;
  std::set<uint64_t> reference;
  std::mt19937_64 random(42);
  for (int step = 0; step < 20'000; ++step) {
    const uint64_t key = random() % 64;
    if (random() % 3 == 0) {
      ASSERT_EQ(set.erase(key), reference.erase(key) == 1) << "step " << step;
    } else {
      ASSERT_EQ(set.insert(key), reference.insert(key).second) << "step " << step;
    }
    ASSERT_EQ(set.size(), reference.size());
    for (uint64_t k = 0; k < 64; ++k) {
      ASSERT_EQ(set.contains(k), reference.contains(k)) << "step " << step << " key " << k;
    }
  }
}

// std::hash<uint64_t> is the identity; this one also counts its calls, which
// are the set's probes and shifts.
struct CountingIdentityHash {
  static inline uint64_t calls = 0;
  size_t operator()(uint64_t k) const noexcept {
    ++calls;
    return k;
  }
};

// Dense keys under an identity hash (slot numbers, as ReliableFlow keeps):
// the set spreads them itself. Without that they form one run, and erasing
// them oldest first shifts along the whole rest of it each time.
TEST(FlatSetTest, DenseKeysUnderAnIdentityHashStaySpread) {
  FlatSet<uint64_t, CountingIdentityHash> set;
  constexpr uint64_t kKeys = 20'000;
  for (uint64_t k = 0; k < kKeys; ++k) set.insert(k);
  CountingIdentityHash::calls = 0;
  for (uint64_t k = 0; k < kKeys; ++k) ASSERT_TRUE(set.erase(k)) << k;
  EXPECT_TRUE(set.empty());
  // A few hash calls per erase (one run: ~kKeys / 2 each).
  EXPECT_LT(CountingIdentityHash::calls, 8 * kKeys);
}

TEST(FlatSetTest, ForEachVisitsEachKeyOnceAndClearEmpties) {
  FlatSet<uint64_t, CollidingHash> set;
  for (uint64_t k = 1; k <= 40; ++k) set.insert(k);
  set.erase(3);
  std::set<uint64_t> seen;
  set.forEach([&](uint64_t k) { EXPECT_TRUE(seen.insert(k).second); });
  EXPECT_EQ(seen.size(), 39u);
  EXPECT_FALSE(seen.contains(3));
  set.clear();
  EXPECT_TRUE(set.empty());
  EXPECT_FALSE(set.contains(1));
  EXPECT_TRUE(set.insert(1));
}

}  // namespace
}  // namespace cepbus::flows
