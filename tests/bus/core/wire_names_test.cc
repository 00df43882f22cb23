#include "bus/core/wire_names.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
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

// One client spending its quota leaves the others theirs: its new names
// are refused, naming its setting, while another client's still go in.
TEST_F(WireNamesTest, AQuotaRefusesItsClientOnlyAndCountsTheRefusal) {
  auto refused = std::make_shared<std::atomic<uint64_t>>(0);
  WireNameQuota greedy(2, "max-names", refused);
  WireNameQuota other(2, "max-names", refused);
  const Symbol known = Symbol::intern("quota-test-known");
  EXPECT_TRUE(internWireName("quota-test-a", &greedy));
  EXPECT_TRUE(internWireName("quota-test-b", &greedy));
  EXPECT_EQ(internWireName("quota-test-known", &greedy), known);  // known names are free
  EXPECT_EQ(internWireName("quota-test-a", &greedy), Symbol::find("quota-test-a"));
  EXPECT_EQ(greedy.created(), 2u);
  EXPECT_FALSE(internWireName("quota-test-c", &greedy));
  EXPECT_TRUE(Symbol::find("quota-test-c").empty());  // not interned
  EXPECT_EQ(refused->load(), 1u);
  EXPECT_EQ(wireNameRefusal("attribute name", "quota-test-c", &greedy),
            "attribute name 'quota-test-c' refused: new names per client (max-names): 2 reached");
  EXPECT_TRUE(internWireName("quota-test-c", &other));
  EXPECT_EQ(internWireName("quota-test-c", &greedy), Symbol::find("quota-test-c"));  // known now
}

// A user's quota bounds its connections together; the refusal names it.
TEST_F(WireNamesTest, AParentQuotaBoundsItsChildrenTogether) {
  auto refused = std::make_shared<std::atomic<uint64_t>>(0);
  auto user_refused = std::make_shared<std::atomic<uint64_t>>(0);
  auto user = std::make_shared<WireNameQuota>(3, "max-user-names", user_refused);
  WireNameQuota first(2, "max-names", refused, user);
  WireNameQuota second(2, "max-names", refused, user);
  EXPECT_TRUE(internWireName("parent-test-a", &first));
  EXPECT_TRUE(internWireName("parent-test-b", &first));
  EXPECT_TRUE(internWireName("parent-test-c", &second));
  EXPECT_EQ(user->created(), 3u);
  EXPECT_FALSE(internWireName("parent-test-d", &second));  // second has room, its user none
  EXPECT_EQ(user_refused->load(), 1u);
  EXPECT_EQ(refused->load(), 0u);
  EXPECT_NE(wireNameRefusal("event type", "parent-test-d", &second).find("(max-user-names): 3"),
            std::string::npos);
}

// The process-wide budget stays a cap under the quotas, and a name it
// refuses is not charged to the quota.
TEST_F(WireNamesTest, TheBudgetStillCapsClientsWithRoomInTheirQuota) {
  auto refused = std::make_shared<std::atomic<uint64_t>>(0);
  WireNameQuota quota(10, "max-names", refused);
  allowNewNames(1);
  EXPECT_TRUE(internWireName("budget-test-a", &quota));
  EXPECT_FALSE(internWireName("budget-test-b", &quota));
  EXPECT_EQ(quota.created(), 1u);
  EXPECT_EQ(refused->load(), 0u);  // the budget's refusal, not the quota's
  EXPECT_NE(wireNameRefusal("event type", "budget-test-b", &quota).find("budget"),
            std::string::npos);
}

}  // namespace
}  // namespace cepbus
