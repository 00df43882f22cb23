#include "bus/core/wire_names.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/event_json.h"
#include "tests/testing/held_names.h"

namespace cepbus {
namespace {

// Restores the process-wide budget when a test ends.
class WireNamesTest : public ::testing::Test {
 protected:
  ~WireNamesTest() override { setWireNameBudget(kDefaultWireNameBudget); }
  // Leaves room for exactly `n` more new names.
  void allowNewNames(uint32_t n) { setWireNameBudget(wireNameStats().held + n); }
};

TEST_F(WireNamesTest, KnownNamesAreFreeAndNewOnesCountUntilTheBudgetIsSpent) {
  const Symbol known = Symbol::intern("wire-test-known");
  allowNewNames(1);
  std::optional<NameHold> known_hold = holdWireName("wire-test-known");
  ASSERT_TRUE(known_hold);
  EXPECT_EQ(known_hold->symbol(), known);  // known: not counted
  const WireNameStats before = wireNameStats();
  std::optional<NameHold> fresh = holdWireName("wire-test-fresh");
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->symbol().name(), "wire-test-fresh");
  EXPECT_EQ(wireNameStats().held, before.held + 1);
  EXPECT_FALSE(holdWireName("wire-test-one-too-many"));
  EXPECT_EQ(wireNameStats().refused, before.refused + 1);
  EXPECT_TRUE(Symbol::find("wire-test-one-too-many").empty());      // not interned
  std::optional<NameHold> again = holdWireName("wire-test-fresh");  // held already: free
  ASSERT_TRUE(again);
  EXPECT_EQ(again->symbol(), fresh->symbol());
  // Names from queries and descriptors are never refused.
  EXPECT_EQ(Symbol::intern("wire-test-from-a-query").name(), "wire-test-from-a-query");
}

// A client sending ever new attribute names (or types) gets a clear
// refusal instead of filling the symbol table, which would make every
// intern() throw, also a deployment's.
TEST_F(WireNamesTest, DecodingRefusesNewNamesBeyondTheBudget) {
  const Result<EventPtr> first = decodeEvent(R"({"type":"WireA","ts":1,"attrs":{"wire_x":1}})");
  ASSERT_TRUE(first);
  allowNewNames(1);
  // Held while the event lives: the budget is spent meanwhile.
  const Result<EventPtr> holding =
      decodeEvent(R"({"type":"WireA","ts":2,"attrs":{"wire_x":2,"wire_y":3}})");
  EXPECT_TRUE(holding);

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
  auto greedy = std::make_shared<WireNameQuota>(2, "max-names", refused);
  auto other = std::make_shared<WireNameQuota>(2, "max-names", refused);
  const Symbol known = Symbol::intern("quota-test-known");
  std::optional<NameHold> a = holdWireName("quota-test-a", greedy.get());
  std::optional<NameHold> b = holdWireName("quota-test-b", greedy.get());
  ASSERT_TRUE(a && b);
  std::optional<NameHold> k = holdWireName("quota-test-known", greedy.get());
  ASSERT_TRUE(k);
  EXPECT_EQ(k->symbol(), known);  // known names are free
  std::optional<NameHold> a_again = holdWireName("quota-test-a", greedy.get());
  ASSERT_TRUE(a_again);
  EXPECT_EQ(a_again->symbol(), a->symbol());  // held names too
  EXPECT_EQ(greedy->held(), 2u);
  EXPECT_FALSE(holdWireName("quota-test-c", greedy.get()));
  EXPECT_EQ(refused->load(), 1u);
  EXPECT_EQ(wireNameRefusal("attribute name", "quota-test-c", greedy.get()),
            "attribute name 'quota-test-c' refused: names held per client (max-names): 2 reached");
  std::optional<NameHold> c = holdWireName("quota-test-c", other.get());
  ASSERT_TRUE(c);
  std::optional<NameHold> c_greedy = holdWireName("quota-test-c", greedy.get());  // held now
  ASSERT_TRUE(c_greedy);
  EXPECT_EQ(c_greedy->symbol(), c->symbol());
  EXPECT_EQ(greedy->held(), 2u);
}

// A user's quota bounds its connections together; the refusal names it.
TEST_F(WireNamesTest, AParentQuotaBoundsItsChildrenTogether) {
  auto refused = std::make_shared<std::atomic<uint64_t>>(0);
  auto user_refused = std::make_shared<std::atomic<uint64_t>>(0);
  auto user = std::make_shared<WireNameQuota>(3, "max-user-names", user_refused);
  auto first = std::make_shared<WireNameQuota>(2, "max-names", refused, user);
  auto second = std::make_shared<WireNameQuota>(2, "max-names", refused, user);
  std::optional<NameHold> a = holdWireName("parent-test-a", first.get());
  std::optional<NameHold> b = holdWireName("parent-test-b", first.get());
  std::optional<NameHold> c = holdWireName("parent-test-c", second.get());
  ASSERT_TRUE(a && b && c);
  EXPECT_EQ(user->held(), 3u);
  EXPECT_FALSE(holdWireName("parent-test-d", second.get()));  // second has room, its user none
  EXPECT_EQ(user_refused->load(), 1u);
  EXPECT_EQ(refused->load(), 0u);
  EXPECT_NE(
      wireNameRefusal("event type", "parent-test-d", second.get()).find("(max-user-names): 3"),
      std::string::npos);
}

// The process-wide budget stays a cap under the quotas, and a name it
// refuses is not charged to the quota.
TEST_F(WireNamesTest, TheBudgetStillCapsClientsWithRoomInTheirQuota) {
  auto refused = std::make_shared<std::atomic<uint64_t>>(0);
  auto quota = std::make_shared<WireNameQuota>(10, "max-names", refused);
  allowNewNames(1);
  std::optional<NameHold> a = holdWireName("budget-test-a", quota.get());
  EXPECT_TRUE(a);
  EXPECT_FALSE(holdWireName("budget-test-b", quota.get()));
  EXPECT_EQ(quota->held(), 1u);
  EXPECT_EQ(refused->load(), 0u);  // the budget's refusal, not the quota's
  EXPECT_NE(wireNameRefusal("event type", "budget-test-b", quota.get()).find("budget"),
            std::string::npos);
}

// The event holds the names only it carries; when it dies they are given
// back, and beyond the few kept idle for reuse they are freed: a flood of
// new names leaves the table as it found it.
// (The reference decoder: decodeEvent()'s fast path also keeps the last
// 4096 names it met held, a bounded cache that spares the lock per name.)
TEST_F(WireNamesTest, NamesOnlyEventsCarryAreGivenBackWhenTheEventsDie) {
  Result<EventPtr> event =
      decodeEventReference(R"({"type":"GiveBackT","ts":1,"attrs":{"give_back_a":1}})");
  ASSERT_TRUE(event);
  const Symbol type = (*event)->type();
  EXPECT_TRUE(type.held());
  EXPECT_EQ(type.name(), "GiveBackT");
  EXPECT_EQ((*event)->attributes()[0].name.name(), "give_back_a");
  EXPECT_TRUE(Symbol::find("give_back_a").empty());  // nobody could keep it alive
  const WireNameStats held = wireNameStats();
  event = Status::notFound("dropped");
  EXPECT_EQ(wireNameStats().idle, held.idle + 2);

  for (uint32_t i = 0; i < 4 * kIdleHeldNames; ++i) {
    const std::string line =
        R"({"type":"GiveBackT","ts":1,"attrs":{"flood_)" + std::to_string(i) + R"(":1}})";
    ASSERT_TRUE(decodeEventReference(line));
  }
  const WireNameStats after = wireNameStats();
  EXPECT_GE(after.given_back, held.given_back + 3 * kIdleHeldNames);
  EXPECT_EQ(after.held, held.held - 2);  // what the event held, given back
  EXPECT_LE(after.idle, kIdleHeldNames);
}

// Holds keep a name alive however many there are; the last one frees it.
TEST_F(WireNamesTest, TheLastHoldGivesTheNameBack) {
  std::optional<NameHold> first = holdWireName("last-hold-test");
  ASSERT_TRUE(first);
  const Symbol symbol = first->symbol();
  NameHold second = NameHold::of(symbol);
  EventPtr event = EventBuilder(NameHold::of(symbol)).at(1).set(symbol, Value(1)).build();
  const WireNameStats before = wireNameStats();
  first.reset();
  second = NameHold();
  EXPECT_EQ(wireNameStats().held, before.held);  // the event still holds it
  EXPECT_EQ(event->type().name(), "last-hold-test");
  EXPECT_EQ(event->find(symbol)->asInt(), 1);
  event.reset();
  EXPECT_EQ(wireNameStats().held, before.held - 1);
  // Held again while idle: the same id.
  std::optional<NameHold> again = holdWireName("last-hold-test");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->symbol(), symbol);
  EXPECT_EQ(wireNameStats().held, before.held);
}

// A query deployed while events carrying a held name are queued interns the
// name: it keeps its id, so the query finds it on those events, and it is
// the bus's from then on.
TEST_F(WireNamesTest, InterningAHeldNameMakesItPermanentInPlace) {
  Result<EventPtr> event = decodeEvent(R"({"type":"Late","ts":1,"attrs":{"late_query_attr":7}})");
  ASSERT_TRUE(event);
  const Symbol interned = Symbol::intern("late_query_attr");
  ASSERT_NE((*event)->find(interned), nullptr);
  EXPECT_EQ((*event)->find(interned)->asInt(), 7);
  event = Status::notFound("dropped");
  EXPECT_EQ(Symbol::find("late_query_attr"), interned);
  EXPECT_EQ(interned.name(), "late_query_attr");
  Result<EventPtr> later = decodeEvent(R"({"type":"Late","ts":2,"attrs":{"late_query_attr":8}})");
  ASSERT_TRUE(later);
  EXPECT_EQ((*later)->find(interned)->asInt(), 8);
}

// A quota counts the names its client holds: once they are given back the
// client may hold new ones, and the budget is not spent for good.
TEST_F(WireNamesTest, QuotaAndBudgetCountNamesHeldNotNamesEverCreated) {
  auto refused = std::make_shared<std::atomic<uint64_t>>(0);
  auto quota = std::make_shared<WireNameQuota>(2, "max-names", refused);
  std::optional<NameHold> a = holdWireName("held-quota-a", quota.get());
  std::optional<NameHold> b = holdWireName("held-quota-b", quota.get());
  ASSERT_TRUE(a && b);
  EXPECT_EQ(quota->held(), 2u);
  EXPECT_FALSE(holdWireName("held-quota-c", quota.get()));
  EXPECT_EQ(refused->load(), 1u);
  // Names someone holds are free to another client, as known names are.
  auto other = std::make_shared<WireNameQuota>(1, "max-names", refused);
  EXPECT_TRUE(holdWireName("held-quota-a", other.get()));
  EXPECT_EQ(other->held(), 0u);
  a.reset();
  EXPECT_EQ(quota->held(), 1u);
  EXPECT_TRUE(holdWireName("held-quota-c", quota.get()));

  setWireNameBudget(wireNameStats().held);  // no room until a name is given back
  EXPECT_FALSE(holdWireName("held-budget-new"));
  b.reset();  // gives one back: room for one new name
  std::optional<NameHold> fresh = holdWireName("held-budget-fresh");
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->symbol().name(), "held-budget-fresh");
  EXPECT_FALSE(holdWireName("held-budget-one-too-many"));
}

// Many threads decoding and dropping events with shared and own new names:
// every event reads its own names (ThreadSanitizer checks the counting).
TEST_F(WireNamesTest, EventsOnManyThreadsHoldAndGiveBackTheirNames) {
  constexpr int kThreads = 4;
  constexpr int kEvents = 3000;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &wrong] {
      std::vector<EventPtr> kept;
      for (int i = 0; i < kEvents; ++i) {
        const std::string shared = "mt_shared_" + std::to_string(i % 50);
        const std::string own = "mt_own_" + std::to_string(t) + "_" + std::to_string(i);
        Result<EventPtr> e =
            decodeEvent(R"({"type":"MtType)" + std::to_string(i % 7) + R"(","ts":1,"attrs":{")" +
                        shared + R"(":1,")" + own + R"(":2}})");
        if (!e) {
          ++wrong;
          continue;
        }
        for (const Attribute& a : (*e)->attributes()) {
          const std::string_view n = a.name.name();
          if (n != shared && n != own) ++wrong;
        }
        if (i % 3 == 0) kept.push_back(std::move(*e));
        if (kept.size() > 64) kept.erase(kept.begin(), kept.begin() + 32);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

// These run last: the second leaves the idle names full, which tests above count.
// An address held by a link is held by every exchange copied from it
// (SharedName): given back, and its client's quota refunded, only when the
// link and the last copy are gone.
TEST_F(WireNamesTest, ASharedNameHoldsItsNameWhileAnyCopyLives) {
  auto quota =
      std::make_shared<WireNameQuota>(1, "max-names", std::make_shared<std::atomic<uint64_t>>(0));
  std::optional<NameHold> hold = holdWireName("shared-name-test.a", quota.get());
  ASSERT_TRUE(hold);
  auto link = std::make_optional<SharedName>(std::move(*hold));
  hold.reset();
  ASSERT_TRUE(link->held());
  std::vector<SharedName> queued(3, *link);  // exchanges addressed to it, queued
  SharedName journaled = queued.back();
  const WireNameStats before = wireNameStats();
  link.reset();
  queued.clear();
  EXPECT_EQ(wireNameStats().held, before.held);  // the journaled copy still holds it
  EXPECT_EQ(journaled.name(), "shared-name-test.a");
  EXPECT_EQ(quota->held(), 1u);
  journaled = SharedName();
  EXPECT_EQ(wireNameStats().held, before.held - 1);
  EXPECT_EQ(quota->held(), 0u);  // refunded: the client may name another address
  EXPECT_TRUE(holdWireName("shared-name-test.b", quota.get()));
}

// A held id is reused for another name once its name is freed, with a new
// incarnation: what a cache keyed by id compares to tell the two apart.
TEST_F(WireNamesTest, AReusedIdHasANewIncarnation) {
  EXPECT_EQ(heldNameIncarnation(Symbol::intern("incarnation-test-permanent")), 0u);
  std::optional<NameHold> first = holdWireName("incarnation-test-0");
  ASSERT_TRUE(first);
  const Symbol id = first->symbol();
  const uint64_t incarnation = heldNameIncarnation(id);
  EXPECT_NE(incarnation, 0u);
  first.reset();
  std::vector<NameHold> kept;
  const std::optional<NameHold> reused = testing::reuseHeldId(id, "incarnation-test-", kept);
  ASSERT_TRUE(reused);
  EXPECT_NE(reused->symbol().name(), "incarnation-test-0");
  EXPECT_GT(heldNameIncarnation(reused->symbol()), incarnation);
}

}  // namespace
}  // namespace cepbus
