#include "services/cluster/partitioner.h"

#include <gtest/gtest.h>

#include <vector>

namespace cepbus::services::cluster {
namespace {

std::string keyText(EventPtr e, std::vector<std::string> names) {
  std::vector<Symbol> key;
  for (const auto& n : names) key.push_back(Symbol::intern(n));
  auto text = partitionKeyText(*e, key);
  EXPECT_TRUE(text.isOk()) << text.status().message();
  return text.isOk() ? *text : "";
}

TEST(PartitionerTest, EqualNumbersShareAPartitionWhateverTheirKind) {
  auto as_int = EventBuilder("Stock").at(1).set("price", Value(int64_t{10})).build();
  auto as_double = EventBuilder("Stock").at(2).set("price", Value(10.0)).build();
  EXPECT_EQ(keyText(as_int, {"price"}), "10");
  EXPECT_EQ(keyText(as_double, {"price"}), "10");
  auto fraction = EventBuilder("Stock").at(3).set("price", Value(10.5)).build();
  EXPECT_EQ(keyText(fraction, {"price"}), "10.5");
}

TEST(PartitionerTest, SeveralKeyAttributesJoinInKeyOrder) {
  auto e =
      EventBuilder("R").at(1).set("plate", Value("AB-1")).set("site", Value(int64_t{7})).build();
  EXPECT_EQ(keyText(e, {"plate", "site"}),
            "AB-1\x1f"
            "7");
  EXPECT_EQ(keyText(e, {"site", "plate"}),
            "7\x1f"
            "AB-1");
}

TEST(PartitionerTest, AMissingKeyAttributeIsNamed) {
  auto e = EventBuilder("Stock").at(5).set("symbol", Value("IBM")).build();
  std::vector<Symbol> key{Symbol::intern("price")};
  auto text = partitionKeyText(*e, key);
  ASSERT_FALSE(text.isOk());
  EXPECT_NE(text.status().message().find("\"price\""), std::string::npos);
  EXPECT_NE(text.status().message().find("ts 5"), std::string::npos);
}

TEST(PartitionerTest, TheHashIsFnv1a64) {
  // Published vectors of FNV-1a 64: any client can reproduce partitions.
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ULL);
  EXPECT_EQ(partitionOfKey("foobar", 12), 0x85944171f73967e8ULL % 12);
}

TEST(PartitionerTest, KeysSpreadOverEveryPartition) {
  std::vector<int> hits(12, 0);
  for (int i = 0; i < 1200; ++i) ++hits[partitionOfKey("sym" + std::to_string(i), 12)];
  for (int h : hits) {
    EXPECT_GT(h, 50);
    EXPECT_LT(h, 150);
  }
}

}  // namespace
}  // namespace cepbus::services::cluster
