#include "router/topic_trie.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "router/topic.h"

namespace cepbus::router {
namespace {

std::vector<SubscriptionId> match(const TopicTrie& trie, std::string_view address) {
  std::vector<SubscriptionId> out;
  trie.match(splitTopic(address), out);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(TopicTrieTest, EachMatchingPatternComesOutOnce) {
  TopicTrie trie;
  // Patterns with several '#' reach the same node along many paths.
  trie.insert(normalizedPattern("#.a.#"), 1);
  trie.insert(normalizedPattern("#.a.#.a.#"), 2);
  trie.insert(normalizedPattern("a.#.b"), 3);
  EXPECT_EQ(match(trie, "a.a.a.a"), (std::vector<SubscriptionId>{1, 2}));
  EXPECT_EQ(match(trie, "a.x.b"), (std::vector<SubscriptionId>{1, 3}));
  EXPECT_EQ(match(trie, "x.y"), std::vector<SubscriptionId>{});
  EXPECT_EQ(trie.size(), 3u);
}

TEST(TopicTrieTest, LongAddressesAgainstManyHashesStayCheap) {
  TopicTrie trie;
  trie.insert(normalizedPattern("#.x.#.x.#.x.#.x.#"), 1);
  std::string address = "x";
  for (int i = 0; i < 200; ++i) address += ".x";
  // Without memoizing '#' starts this would explode combinatorially.
  EXPECT_EQ(match(trie, address), std::vector<SubscriptionId>{1});
}

TEST(TopicTrieTest, EraseRemovesOnlyThatIdAndPrunesEmptyNodes) {
  TopicTrie trie;
  const auto p = normalizedPattern("a.*.#.c");
  trie.insert(p, 1);
  trie.insert(p, 2);
  trie.insert(normalizedPattern("a.b"), 3);
  const size_t nodes = trie.nodeCount();
  EXPECT_FALSE(trie.erase(p, 99));
  EXPECT_FALSE(trie.erase(normalizedPattern("a.*.c"), 1));
  EXPECT_TRUE(trie.erase(p, 1));
  EXPECT_EQ(trie.nodeCount(), nodes);  // id 2 still lives there
  EXPECT_EQ(match(trie, "a.b.c"), std::vector<SubscriptionId>{2});
  EXPECT_TRUE(trie.erase(p, 2));
  EXPECT_EQ(trie.nodeCount(), 3u);  // root, a, a.b
  EXPECT_TRUE(trie.erase(normalizedPattern("a.b"), 3));
  EXPECT_EQ(trie.nodeCount(), 1u);
  EXPECT_EQ(trie.size(), 0u);
}

}  // namespace
}  // namespace cepbus::router
