#include "bus/core/wire_names.h"

#include <gtest/gtest.h>

#include <string>

#include "bus/core/event_json.h"

namespace cepbus {
namespace {

// Restores the process-wide budget when a test ends.
class WireNamesTest : public ::testing::Test {
 protected:
  ~WireNamesTest() override { setWireNameBudget(kDefaultWireNameBudget); }
  // Leaves room for exactly `n` more new names.
  void allowNewNames(uint32_t n) { setWireNameBudget(wireNameStats().created + n); }
};

TEST_F(WireNamesTest, KnownNamesAreFreeAndNewOnesCountUntilTheBudgetIsSpent) {
  const Symbol known = Symbol::intern("wire-test-known");
  allowNewNames(1);
  EXPECT_EQ(internWireName("wire-test-known"), known);  // known: not counted
  const WireNameStats before = wireNameStats();
  const std::optional<Symbol> fresh = internWireName("wire-test-fresh");
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->name(), "wire-test-fresh");
  EXPECT_EQ(wireNameStats().created, before.created + 1);
  EXPECT_FALSE(internWireName("wire-test-one-too-many"));
  EXPECT_EQ(wireNameStats().refused, before.refused + 1);
  EXPECT_TRUE(Symbol::find("wire-test-one-too-many").empty());  // not interned
  EXPECT_EQ(internWireName("wire-test-fresh"), fresh);          // once created, free
  // Names from queries and descriptors are never refused.
  EXPECT_EQ(Symbol::intern("wire-test-from-a-query").name(), "wire-test-from-a-query");
}

// A client sending ever new attribute names (or types) gets a clear
// refusal instead of filling the symbol table, which would make every
// intern() throw, also a deployment's.
TEST_F(WireNamesTest, DecodingRefusesNewNamesBeyondTheBudget) {
  ASSERT_TRUE(decodeEvent(R"({"type":"WireA","ts":1,"attrs":{"wire_x":1}})"));
  allowNewNames(1);
  EXPECT_TRUE(decodeEvent(R"({"type":"WireA","ts":2,"attrs":{"wire_x":2,"wire_y":3}})"));

  auto attr = decodeEvent(R"({"type":"WireA","ts":3,"attrs":{"wire_z":4}})");
  ASSERT_FALSE(attr);
  EXPECT_EQ(attr.status().code(), Status::Code::kRejected);
  EXPECT_NE(attr.status().message().find("attribute name 'wire_z' refused"), std::string::npos)
      << attr.status().message();
  EXPECT_NE(attr.status().message().find("budget"), std::string::npos);

  auto type = decodeEvent(R"({"type":"WireNew","ts":3})");
  ASSERT_FALSE(type);
  EXPECT_NE(type.status().message().find("event type 'WireNew' refused"), std::string::npos)
      << type.status().message();
  // Events of known names still decode.
  EXPECT_TRUE(decodeEvent(R"({"type":"WireA","ts":4,"attrs":{"wire_x":5,"wire_y":6}})"));
}

TEST_F(WireNamesTest, TheRefusalDoesNotEchoAHugeName) {
  allowNewNames(0);
  const std::string huge(100'000, 'n');
  const std::string message = wireNameRefusal("attribute name", huge);
  EXPECT_LT(message.size(), 300u);
  EXPECT_NE(message.find("nnn...'"), std::string::npos);
}

}  // namespace
}  // namespace cepbus
