// Per-client limits of the AMQP listener with the real `cepbus`: new names
// (event types, attribute names, addresses) are charged to the connection
// and user that created them (max-names, max-user-names), and an
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

// One bus for the suite: 20 new names per connection, 30 per user, 3 links
// per user, and a process-wide budget of 100 new names, the cap the issue
// ran into ("--wire-name-budget 500", 600 names from one client).
class AmqpClientLimitsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bus_ = new BusProcess(CEPBUS_BINARY, "cepbus-amqp-client-limits");
    auto alice = services::amqp::hashPassword("alice-secret", 1000);
    ASSERT_TRUE(alice.isOk());
    port_ = reservedPort();
    ASSERT_TRUE(bus_->start(
        "<cepbus name=\"limits\"><listeners><amqp host=\"127.0.0.1\" port=\"" +
            std::to_string(port_) +
            "\" allow-anonymous=\"true\" max-names=\"20\" max-user-names=\"30\" "
            "max-user-links=\"3\"><user name=\"alice\" password-hash=\"" +
            *alice +
            "\"><permit publish=\"#\" subscribe=\"#\"/></user></amqp></listeners></cepbus>\n",
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
// used to spend the process's budget, after which no other client could even
// attach a sender to a new address. Now the flood stops at that client's
// share, and the other client is served.
TEST_F(AmqpClientLimitsTest, AClientSpendingItsNameShareDoesNotStopAnother) {
  AmqpTestClient greedy(port_, "greedy");
  ASSERT_TRUE(greedy.waitOpen());
  greedy.send("flood", newNames("Flood", "flood_", 600));
  ASSERT_TRUE(greedy.waitFor([&] { return greedy.accepted + greedy.rejected == 600; }));
  // The address, the type and 18 property names make its 20.
  EXPECT_EQ(greedy.read<size_t>([&] { return greedy.accepted; }), 18u);
  greedy.read<int>([&] {
    for (const proton::error_condition& e : greedy.rejections) {
      EXPECT_TRUE(refusedFor(e, "new names per client (max-names): 20 reached")) << e.what();
    }
    return 0;
  });
  // A new address is a new name: refused to it too; its connection goes on.
  greedy.send("flood.more", {event("Flood", 1)});
  ASSERT_TRUE(greedy.waitFor([&] { return greedy.link_errors.size() == 1; }));
  greedy.read<int>([&] {
    const proton::error_condition& e = greedy.link_errors.begin()->second;
    EXPECT_TRUE(refusedFor(e, "target address 'flood.more' refused")) << e.what();
    EXPECT_TRUE(refusedFor(e, "(max-names): 20 reached")) << e.what();
    return 0;
  });
  greedy.send("flood", {event("Flood", 601, "flood_0")});  // known names only
  EXPECT_TRUE(greedy.waitFor([&] { return greedy.accepted == 19; }));

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

// alice's connections together create at most 30 names and hold at most 3
// links; an anonymous client beside her is not affected.
TEST_F(AmqpClientLimitsTest, AUsersConnectionsShareItsLimits) {
  AmqpTestClient first(alice());
  AmqpTestClient second(alice());
  ASSERT_TRUE(first.waitOpen());
  ASSERT_TRUE(second.waitOpen());
  ASSERT_FALSE(second.read<bool>([&] { return static_cast<bool>(second.error); }));
  // The first connection spends its 20 names, the second gets alice's last
  // 10 (the address, the type and 8 property names).
  first.send("alice.names1", newNames("AliceOne", "alice_one_", 25));
  ASSERT_TRUE(first.waitFor([&] { return first.accepted + first.rejected == 25; }))
      << outcomes(first);
  EXPECT_EQ(first.read<size_t>([&] { return first.accepted; }), 18u);
  second.send("alice.names2", newNames("AliceTwo", "alice_two_", 15));
  ASSERT_TRUE(second.waitFor([&] { return second.accepted + second.rejected == 15; }))
      << outcomes(second);
  EXPECT_EQ(second.read<size_t>([&] { return second.accepted; }), 8u);
  second.read<int>([&] {
    EXPECT_TRUE(
        refusedFor(second.rejections.at(0), "new names per client (max-user-names): 30 reached"))
        << second.rejections.at(0).what();
    return 0;
  });

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

}  // namespace
}  // namespace cepbus
