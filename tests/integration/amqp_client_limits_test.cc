// Per-client limits of the AMQP listener with the real `cepbus`: names
// (event types, attribute names, addresses) are charged to the connection
// and user that created them while held (max-names, max-user-names), and an
// authenticated user's connections share its limits (max-user-links), so one
// client's abuse is refused to that client while another keeps publishing
// with new names and attaching to new addresses.

#include <gtest/gtest.h>

#include <proton/error_condition.hpp>
#include <proton/message.hpp>
#include <string>
#include <vector>

#include "services/protocols/amqp/message_mapping.h"
#include "services/protocols/amqp/password_hash.h"
#include "tests/testing/amqp_test_client.h"
#include "tests/testing/bus_process.h"
#include "tests/testing/ports.h"

namespace cepbus {
namespace {

using testing::AmqpClientOptions;
using testing::AmqpTestClient;
using testing::BusProcess;
using testing::reservedPort;

proton::message event(const std::string& type, int64_t ts, const std::string& property = "") {
  proton::message m;
  m.subject(type);
  m.properties().put("ts", ts);
  if (!property.empty()) m.properties().put(property, ts);
  return m;
}

// `count` messages of `type`, each with a property name of its own.
std::vector<proton::message> newNames(const std::string& type, const std::string& prefix,
                                      int count) {
  std::vector<proton::message> out;
  for (int i = 0; i < count; ++i) out.push_back(event(type, i + 1, prefix + std::to_string(i)));
  return out;
}

// One bus for the suite: 20 names held per connection, 30 per user, 3 links
// per user, and a process-wide budget of 100 names held, the cap the issue
// ran into ("--wire-name-budget 500", 600 names from one client); 3
// unsettled deliveries and 100,000 bytes in flight per connection, 4
// unsettled deliveries per user, with a reliable route whose journal
// commits wait 200 ms.
class AmqpClientLimitsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bus_ = new BusProcess(CEPBUS_BINARY, "cepbus-amqp-client-limits");
    auto alice = services::amqp::hashPassword("alice-secret", 1000);
    ASSERT_TRUE(alice.isOk());
    port_ = reservedPort();
    ASSERT_TRUE(bus_->start(
        "<cepbus name=\"limits\"><journal path=\"journal.db\" commit-delay-us=\"200000\"/>"
        "<listeners><amqp host=\"127.0.0.1\" port=\"" +
            std::to_string(port_) +
            "\" allow-anonymous=\"true\" max-names=\"20\" max-user-names=\"30\" "
            "max-user-links=\"3\" max-unsettled=\"3\" max-bytes-in-flight=\"100000\" "
            "max-user-unsettled=\"4\"><user "
            "name=\"alice\" password-hash=\"" +
            *alice +
            "\"><permit publish=\"#\" subscribe=\"#\"/></user></amqp></listeners><routes "
            "default-flow=\"st\"><route address=\"journaled.#\" "
            "flow=\"reliable\" qos=\"reliable\"/></routes></cepbus>\n",
        {port_}, {"--wire-name-budget", "100"}));
  }
  static void TearDownTestSuite() {
    EXPECT_TRUE(bus_->stop());
    delete bus_;
  }

  static AmqpClientOptions alice() {
    AmqpClientOptions o;
    o.port = port_;
    o.user = "alice";
    o.password = "alice-secret";
    return o;
  }

  static bool refusedFor(const proton::error_condition& e, const std::string& text) {
    return e.name() == services::amqp::kResourceLimitExceeded &&
           e.description().find(text) != std::string::npos;
  }

  // What a client was answered, for a failure's message.
  static std::string outcomes(AmqpTestClient& client) {
    return client.read<std::string>([&] {
      std::string out = "accepted " + std::to_string(client.accepted) + ", rejected " +
                        std::to_string(client.rejected) + "\n";
      for (const auto& [name, e] : client.link_errors) out += name + ": " + e.what() + "\n";
      return out;
    });
  }

  static inline BusProcess* bus_ = nullptr;
  static inline int port_ = 0;
};

// The denial of service the issue quotes: one client sending 600 new names
// used to spend the process's budget (100 here) for good, after which no
// other client could even attach a sender to a new address. Now the names
// only its events carried are given back as the events go, so its flood is
// accepted within its share of 20 names held, it still attaches to a new
// address afterwards, and another client is served throughout.
TEST_F(AmqpClientLimitsTest, AFloodOfNewNamesIsGivenBackAndStopsNobody) {
  AmqpTestClient greedy(port_, "greedy");
  ASSERT_TRUE(greedy.waitOpen());
  greedy.send("flood", newNames("Flood", "flood_", 600));
  ASSERT_TRUE(greedy.waitFor([&] { return greedy.accepted + greedy.rejected == 600; }))
      << outcomes(greedy);
  EXPECT_EQ(greedy.read<size_t>([&] { return greedy.accepted; }), 600u) << outcomes(greedy);
  greedy.send("flood.more", {event("Flood", 601, "flood_more")});  // a new address, a new name
  ASSERT_TRUE(greedy.waitFor([&] { return greedy.accepted + greedy.rejected == 601; }))
      << outcomes(greedy);
  EXPECT_EQ(greedy.read<size_t>([&] { return greedy.accepted; }), 601u) << outcomes(greedy);
  EXPECT_TRUE(greedy.read<bool>([&] { return greedy.link_errors.empty(); })) << outcomes(greedy);

  // Another client attaches to a new address and publishes new names.
  AmqpTestClient other(port_, "other");
  ASSERT_TRUE(other.waitOpen());
  other.subscribe("h.plant");
  ASSERT_TRUE(other.waitFor([&] { return other.links_open.count("h.plant") > 0; }));
  other.send("h.plant", {event("PlantReading", 1, "temperature"), event("PlantReading", 2)});
  ASSERT_TRUE(other.waitFor([&] { return other.accepted + other.rejected == 2; }));
  EXPECT_EQ(other.read<size_t>([&] { return other.rejected; }), 0u);
  EXPECT_TRUE(other.waitFor([&] { return other.received["h.plant"].size() == 2; }));
}

// alice's connections together hold at most 30 names and 3 links; an
// anonymous client beside her is not affected.
TEST_F(AmqpClientLimitsTest, AUsersConnectionsShareItsLimits) {
  AmqpTestClient first(alice());
  AmqpTestClient second(alice());
  ASSERT_TRUE(first.waitOpen());
  ASSERT_TRUE(second.waitOpen());
  ASSERT_FALSE(second.read<bool>([&] { return static_cast<bool>(second.error); }));
  // Names only their events carry are given back as the events go: bursts
  // of new names from both connections are accepted, within 20 held each.
  first.send("alice.names1", newNames("AliceOne", "alice_one_", 25));
  ASSERT_TRUE(first.waitFor([&] { return first.accepted + first.rejected == 25; }))
      << outcomes(first);
  EXPECT_EQ(first.read<size_t>([&] { return first.accepted; }), 25u) << outcomes(first);
  second.send("alice.names2", newNames("AliceTwo", "alice_two_", 15));
  ASSERT_TRUE(second.waitFor([&] { return second.accepted + second.rejected == 15; }))
      << outcomes(second);
  EXPECT_EQ(second.read<size_t>([&] { return second.accepted; }), 15u) << outcomes(second);

  // Links: the two sending links and one more make alice's 3.
  first.subscribe("alice.a");
  ASSERT_TRUE(first.waitFor([&] { return first.links_open.count("alice.a") > 0; }))
      << outcomes(first);
  second.subscribe("alice.b");
  ASSERT_TRUE(second.waitFor([&] { return second.link_errors.count("alice.b") > 0; }));
  second.read<int>([&] {
    const proton::error_condition& e = second.link_errors["alice.b"];
    EXPECT_TRUE(refusedFor(e,
                           "too many links for this user (over its connections): "
                           "max-user-links=3"))
        << e.what();
    return 0;
  });

  AmqpTestClient anonymous(port_, "beside-alice");
  ASSERT_TRUE(anonymous.waitOpen());
  for (const char* pattern : {"anon.a", "anon.b", "anon.c", "anon.d"}) anonymous.subscribe(pattern);
  EXPECT_TRUE(anonymous.waitFor([&] { return anonymous.links_open.size() == 4; }));
  anonymous.send("anon.names", {event("AnonType", 1, "anon_name")});
  ASSERT_TRUE(anonymous.waitFor([&] { return anonymous.accepted + anonymous.rejected == 1; }));
  EXPECT_EQ(anonymous.read<size_t>([&] { return anonymous.accepted; }), 1u);
}

// A client whose unsettled messages wait for their journal commits holds
// at most max-unsettled of them (3) and max-bytes-in-flight of their bytes
// (100,000) on its connection. Its links never hold more credit than
// max-unsettled leaves, so a burst sent on credit waits for it and is
// accepted whole; a message that would pass max-bytes-in-flight is rejected
// with the named condition. Another connection publishing to the same
// reliable route has its own budget.
TEST_F(AmqpClientLimitsTest, UnsettledDeliveriesAndBytesAreBoundedPerConnection) {
  AmqpTestClient subscriber(port_, "journaled-subscriber");
  ASSERT_TRUE(subscriber.waitOpen());
  subscriber.subscribe("journaled.#");
  ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.links_open.count("journaled.#") > 0; }));

  AmqpTestClient hog(port_, "unsettled-hog");
  ASSERT_TRUE(hog.waitOpen());
  std::vector<proton::message> burst;
  for (int i = 0; i < 20; ++i) burst.push_back(event("Journaled", i + 1));
  hog.send("journaled.a", burst);
  ASSERT_TRUE(hog.waitFor([&] { return hog.accepted + hog.rejected == 20; }));
  // The commits wait 200 ms: at most 3 can be held meanwhile, and the link
  // holds no more credit than that.
  EXPECT_EQ(hog.read<size_t>([&] { return hog.accepted; }), 20u) << outcomes(hog);
  EXPECT_EQ(hog.read<int>([&] { return hog.max_credit["journaled.a"]; }), 3);

  AmqpTestClient other(port_, "journaled-other");
  ASSERT_TRUE(other.waitOpen());
  other.send("journaled.b", {event("Journaled", 1), event("Journaled", 2)});
  ASSERT_TRUE(other.waitFor([&] { return other.accepted + other.rejected == 2; }));
  EXPECT_EQ(other.read<size_t>([&] { return other.accepted; }), 2u);

  // A message of 60,000 bytes fits in 100,000; one of 120,000 never does,
  // whatever the connection holds at the time.
  AmqpTestClient heavy(port_, "bytes-hog");
  ASSERT_TRUE(heavy.waitOpen());
  auto large = [](int64_t ts, size_t bytes) {
    proton::message m = event("Journaled", ts);
    m.properties().put("blob", std::string(bytes, 'x'));
    return m;
  };
  heavy.send("journaled.c", {large(1, 60000)});
  ASSERT_TRUE(heavy.waitFor([&] { return heavy.accepted + heavy.rejected == 1; }));
  heavy.send("journaled.c", {large(2, 120000)});
  ASSERT_TRUE(heavy.waitFor([&] { return heavy.accepted + heavy.rejected == 2; }));
  EXPECT_EQ(heavy.read<size_t>([&] { return heavy.accepted; }), 1u);
  ASSERT_EQ(heavy.read<size_t>([&] { return heavy.rejected; }), 1u);
  heavy.read<int>([&] {
    const proton::error_condition& e = heavy.rejections.at(0);
    EXPECT_TRUE(refusedFor(e, "bytes in flight per connection (max-bytes-in-flight)")) << e.what();
    EXPECT_TRUE(refusedFor(e, "a message of 120")) << e.what();
    EXPECT_TRUE(refusedFor(e, "bytes would pass 100000")) << e.what();
    return 0;
  });
}

// alice's two connections may hold 3 unsettled deliveries each, but 4
// together. Its subscriber takes the deliveries and acknowledges none, so
// each waits 200 ms for its journal commit: of two bursts sent at once, the
// one that comes second finds alice's budget spent and has what goes beyond
// refused naming the user's limit, while an anonymous client publishing to
// the same route meanwhile has its own budget and is served.
TEST_F(AmqpClientLimitsTest, UnsettledDeliveriesAreBoundedPerUserOverItsConnections) {
  AmqpTestClient subscriber(port_, "journaled-user-subscriber");
  ASSERT_TRUE(subscriber.waitOpen());
  subscriber.subscribe("journaled.#", "", false, 100, /*accept_limit=*/0);
  ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.links_open.count("journaled.#") > 0; }));
  AmqpTestClient first(alice());
  AmqpTestClient second(alice());
  AmqpTestClient anonymous(port_, "unsettled-beside-alice");
  ASSERT_TRUE(first.waitOpen());
  ASSERT_TRUE(second.waitOpen());
  ASSERT_TRUE(anonymous.waitOpen());
  std::vector<proton::message> burst;
  for (int i = 0; i < 10; ++i) burst.push_back(event("Journaled", i + 1));
  first.send("journaled.user1", burst);
  second.send("journaled.user2", burst);
  anonymous.send("journaled.anon", {event("Journaled", 1), event("Journaled", 2)});
  ASSERT_TRUE(first.waitFor([&] { return first.accepted + first.rejected == 10; }))
      << outcomes(first);
  ASSERT_TRUE(second.waitFor([&] { return second.accepted + second.rejected == 10; }))
      << outcomes(second);
  ASSERT_TRUE(anonymous.waitFor([&] { return anonymous.accepted + anonymous.rejected == 2; }));
  EXPECT_EQ(anonymous.read<size_t>([&] { return anonymous.accepted; }), 2u) << outcomes(anonymous);

  size_t user_refusals = 0;
  for (AmqpTestClient* client : {&first, &second}) {
    EXPECT_GE(client->read<size_t>([&] { return client->accepted; }), 1u) << outcomes(*client);
    client->read<int>([&] {
      for (const proton::error_condition& e : client->rejections) {
        const bool user =
            refusedFor(e, "unsettled deliveries per user (max-user-unsettled): 4 reached");
        user_refusals += user ? 1 : 0;
        EXPECT_TRUE(user || refusedFor(e, "per connection (max-unsettled): 3 reached")) << e.what();
      }
      return 0;
    });
  }
  EXPECT_GT(user_refusals, 0u) << outcomes(first) << outcomes(second);
}

}  // namespace
}  // namespace cepbus
