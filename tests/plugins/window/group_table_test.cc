// GroupTable: every group filed is found under its hash and key, and no
// longer once erased, across growth, shared hashes (long probe runs) and
// runs that wrap around the end of the slots.

#include "plugins/window/group_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <vector>

namespace cepbus::plugins::window {
namespace {

struct FakeGroup {
  int key;
};

// Few distinct hashes, so that many keys share a probe run and erasing one
// must shift the others back to keep them reachable.
uint64_t hashOf(int key) { return static_cast<uint64_t>(key % 7) * 0x9e3779b97f4a7c15ULL; }

FakeGroup* lookUp(const GroupTable<FakeGroup>& table, int key) {
  return table.find(hashOf(key), [&](const FakeGroup& g) { return g.key == key; });
}

TEST(GroupTableTest, FindsWhatIsFiledAndNothingErasedUnderCollidingHashes) {
  GroupTable<FakeGroup> table;
  std::map<int, std::unique_ptr<FakeGroup>> filed;  // the reference
  std::mt19937 rng(5);
  for (int step = 0; step < 20000; ++step) {
    const int key = static_cast<int>(rng() % 300);
    auto it = filed.find(key);
    if (it == filed.end()) {
      auto group = std::make_unique<FakeGroup>(FakeGroup{key});
      table.insert(hashOf(key), group.get());
      filed.emplace(key, std::move(group));
    } else {
      table.erase(hashOf(key), it->second.get());
      filed.erase(it);
    }
    ASSERT_EQ(table.size(), filed.size());
    if (step % 97 == 0) {
      for (int k = 0; k < 300; ++k) {
        auto f = filed.find(k);
        ASSERT_EQ(lookUp(table, k), f == filed.end() ? nullptr : f->second.get()) << "key " << k;
      }
    }
  }
}

TEST(GroupTableTest, AnEmptyTableFindsNothing) {
  const GroupTable<FakeGroup> table;
  EXPECT_EQ(lookUp(table, 1), nullptr);
  EXPECT_EQ(table.size(), 0u);
}

}  // namespace
}  // namespace cepbus::plugins::window
