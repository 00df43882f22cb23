#include "router/subscription_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "router/topic.h"
#include "tests/flows/flow_test_util.h"

namespace cepbus::router {
namespace {

using flows::testing::RecordingTarget;

std::set<SubscriptionId> matchIds(const SubscriptionTable& table, std::string_view address) {
  std::vector<const Subscription*> out;
  table.match(address, out);
  std::set<SubscriptionId> ids;
  for (const Subscription* s : out) {
    EXPECT_TRUE(ids.insert(s->id).second) << "subscription " << s->id << " matched twice";
  }
  return ids;
}

TEST(SubscriptionTableTest, ExactAndWildcardSubscriptionsMatch) {
  SubscriptionTable table;
  auto t = std::make_shared<RecordingTarget>("t");
  SubscriptionId exact = *table.add("stocks.ibm", t);
  SubscriptionId star = *table.add("stocks.*", t);
  SubscriptionId hash = *table.add("#", t);
  SubscriptionId other = *table.add("bonds.#", t);
  EXPECT_EQ(table.size(), 4u);
  EXPECT_EQ(table.wildcardCount(), 3u);
  EXPECT_EQ(matchIds(table, "stocks.ibm"), (std::set<SubscriptionId>{exact, star, hash}));
  EXPECT_EQ(matchIds(table, "bonds"), (std::set<SubscriptionId>{hash, other}));
  EXPECT_EQ(table.find(star)->pattern, "stocks.*");
  EXPECT_EQ(table.find(999), nullptr);
}

TEST(SubscriptionTableTest, RemovalIsExact) {
  SubscriptionTable table;
  auto a = std::make_shared<RecordingTarget>("a");
  auto b = std::make_shared<RecordingTarget>("b");
  SubscriptionId a1 = *table.add("x.*", a);
  SubscriptionId a2 = *table.add("x.y", a);
  SubscriptionId b1 = *table.add("x.*", b);  // same pattern, another target
  EXPECT_TRUE(table.remove(a1));
  EXPECT_FALSE(table.remove(a1));
  EXPECT_EQ(matchIds(table, "x.y"), (std::set<SubscriptionId>{a2, b1}));
  EXPECT_EQ(table.removeTarget(a.get()), 1u);
  EXPECT_EQ(matchIds(table, "x.y"), (std::set<SubscriptionId>{b1}));
  EXPECT_TRUE(table.remove(b1));
  EXPECT_TRUE(matchIds(table, "x.y").empty());
  EXPECT_EQ(table.size(), 0u);
}

TEST(SubscriptionTableTest, RefusesBadPatternsAndNullTargets) {
  SubscriptionTable table;
  auto t = std::make_shared<RecordingTarget>("t");
  EXPECT_EQ(table.add("a..b", t).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(table.add("a.b", nullptr).status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(table.size(), 0u);
}

// Random patterns and topics over a tiny alphabet, so that wildcards collide a
// lot; the table must agree with the reference matcher on every topic.
TEST(SubscriptionTableTest, AgreesWithBruteForceOnRandomTopics) {
  std::mt19937 rng(12345);
  const std::vector<std::string> words{"a", "b", "c"};
  auto randomTopic = [&](bool pattern) {
    std::uniform_int_distribution<int> length(1, 5);
    std::uniform_int_distribution<int> pick(0, pattern ? 5 : 2);
    std::string topic;
    const int n = length(rng);
    for (int i = 0; i < n; ++i) {
      if (i > 0) topic += '.';
      const int p = pick(rng);
      topic += p < 3 ? words[p] : (p == 3 ? "*" : "#");
    }
    return topic;
  };

  SubscriptionTable table;
  auto t = std::make_shared<RecordingTarget>("t");
  std::vector<std::pair<SubscriptionId, std::string>> live;
  for (int i = 0; i < 400; ++i) {
    std::string pattern = randomTopic(true);
    live.emplace_back(*table.add(pattern, t), pattern);
  }
  // Remove a third, so pruned trie paths are exercised too.
  std::shuffle(live.begin(), live.end(), rng);
  for (size_t i = 0; i < live.size() / 3; ++i) ASSERT_TRUE(table.remove(live[i].first));
  live.erase(live.begin(), live.begin() + static_cast<ptrdiff_t>(live.size() / 3));

  for (int i = 0; i < 2000; ++i) {
    std::string topic = randomTopic(false);
    std::set<SubscriptionId> expected;
    for (const auto& [id, pattern] : live) {
      if (topicMatches(pattern, topic)) expected.insert(id);
    }
    ASSERT_EQ(matchIds(table, topic), expected) << "topic " << topic;
  }
}

TEST(SubscriptionTableTest, TenThousandWildcardsResolveToTheRightFew) {
  SubscriptionTable table;
  auto t = std::make_shared<RecordingTarget>("t");
  std::map<std::string, SubscriptionId> by_pattern;
  for (int i = 0; i < 5000; ++i) {
    const std::string sym = "s" + std::to_string(i);
    by_pattern["stocks." + sym + ".*"] = *table.add("stocks." + sym + ".*", t);
    by_pattern["#." + sym] = *table.add("#." + sym, t);
  }
  EXPECT_EQ(table.wildcardCount(), 10000u);
  EXPECT_EQ(matchIds(table, "stocks.s42.trade"),
            (std::set<SubscriptionId>{by_pattern["stocks.s42.*"]}));
  EXPECT_EQ(matchIds(table, "bonds.x.s4999"), (std::set<SubscriptionId>{by_pattern["#.s4999"]}));
  EXPECT_TRUE(matchIds(table, "stocks.unknown.trade").empty());
}

}  // namespace
}  // namespace cepbus::router
