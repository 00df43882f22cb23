#include "bus/host/descriptor/address.h"

#include <gtest/gtest.h>

namespace cepbus::descriptor {
namespace {

TEST(AddressTest, AcceptsDotSeparatedSegments) {
  for (const char* a : {"stocks", "stocks.ticks", "plant-3.line_2.alarms", "A.b9.C_-"}) {
    EXPECT_EQ(addressError(a, AddressUse::kConcrete), std::nullopt) << a;
    EXPECT_EQ(addressError(a, AddressUse::kPattern), std::nullopt) << a;
  }
}

TEST(AddressTest, WildcardSegmentsOnlyInPatterns) {
  for (const char* a : {"#", "*", "stocks.#", "stocks.*.ticks", "*.#"}) {
    EXPECT_TRUE(isValidAddress(a, AddressUse::kPattern)) << a;
    EXPECT_FALSE(isValidAddress(a, AddressUse::kConcrete)) << a;
  }
  EXPECT_EQ(addressError("stocks.#", AddressUse::kConcrete),
            "segment 2 is the wildcard '#', allowed only in subscriptions and routes");
}

TEST(AddressTest, ExplainsWhatIsWrong) {
  EXPECT_EQ(addressError("", AddressUse::kPattern), "it is empty");
  EXPECT_EQ(addressError("stocks..ticks", AddressUse::kPattern), "segment 2 is empty");
  EXPECT_EQ(addressError(".stocks", AddressUse::kPattern), "segment 1 is empty");
  EXPECT_EQ(addressError("stocks.", AddressUse::kPattern), "segment 2 is empty");
  EXPECT_EQ(addressError("stocks.ti cks", AddressUse::kPattern),
            "segment 2 \"ti cks\" contains a space; segments are made of letters, digits, '_' "
            "and '-'");
  EXPECT_EQ(addressError("a/b", AddressUse::kConcrete),
            "segment 1 \"a/b\" contains '/'; segments are made of letters, digits, '_' and '-'");
  EXPECT_EQ(addressError("stocks.t*", AddressUse::kPattern),
            "segment 2 \"t*\" mixes the wildcard '*' with other characters; a wildcard is a "
            "whole segment");
  EXPECT_FALSE(isValidAddress("caf\xc3\xa9", AddressUse::kConcrete));
}

}  // namespace
}  // namespace cepbus::descriptor
