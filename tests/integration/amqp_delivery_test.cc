// End-to-end delivery guarantees of the AMQP listener with the real
// `cepbus`: at-least-once on a reliable route with a subscriber that goes
// away mid-stream and comes back (nothing lost; redeliveries marked), and a
// durable subscription that keeps collecting while its subscriber is away.

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tests/testing/amqp_test_client.h"
#include "tests/testing/bus_process.h"
#include "tests/testing/ports.h"

namespace cepbus {
namespace {

using testing::AmqpClientOptions;
using testing::AmqpReceived;
using testing::AmqpTestClient;
using testing::BusProcess;
using testing::reservedPort;

// Message `n` (its id too, so that a resend is recognised as a duplicate).
proton::message numbered(const std::string& subject, uint64_t n) {
  proton::message m;
  m.subject(subject);
  m.id(proton::message_id(n));
  m.properties().put("ts", static_cast<int64_t>(n));
  return m;
}

uint64_t numberOf(const AmqpReceived& r) {
  return static_cast<uint64_t>(proton::get<int64_t>(r.message.properties().get("ts")));
}

// One bus for the suite: anonymous clients, a journal, "orders.#" reliable.
class AmqpDeliveryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bus_ = new BusProcess(CEPBUS_BINARY, "cepbus-amqp-dlv");
    port_ = reservedPort();
    const std::string descriptor = R"(<cepbus name="delivery">
  <journal path="journal.db"/>
  <listeners><amqp host="127.0.0.1" port=")" +
                                   std::to_string(port_) +
                                   R"(" allow-anonymous="true"/></listeners>
  <routes default-flow="st">
    <route address="orders.#" flow="reliable" qos="reliable"/>
  </routes>
</cepbus>
)";
    ASSERT_TRUE(bus_->start(descriptor, {port_}));
  }
  static void TearDownTestSuite() {
    EXPECT_TRUE(bus_->stop());
    delete bus_;
  }
  static AmqpClientOptions client(const std::string& container_id = "") {
    AmqpClientOptions o;
    o.port = port_;
    o.container_id = container_id;
    return o;
  }

  static inline BusProcess* bus_ = nullptr;
  static inline int port_ = 0;
};

// The subscriber accepts 10 of 30 and disconnects with 20 unsettled; when it
// comes back (same container id and link name) it gets exactly those 20,
// each marked as a redelivery (delivery-count > 0, not first acquirer).
TEST_F(AmqpDeliveryTest, ASubscriberThatComesBackGetsWhatItHadNotAccepted) {
  constexpr uint64_t kTotal = 30;
  constexpr int kAcceptedFirst = 10;
  std::set<uint64_t> accepted;
  {
    AmqpTestClient subscriber(client("reader-1"));
    ASSERT_TRUE(subscriber.waitOpen());
    subscriber.subscribe("orders.#", "orders", false, 100, kAcceptedFirst);
    ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.links_open["orders"] == 1; }));
    AmqpTestClient publisher(client());
    ASSERT_TRUE(publisher.waitOpen());
    std::vector<proton::message> messages;
    for (uint64_t n = 1; n <= kTotal; ++n) messages.push_back(numbered("Order", n));
    publisher.publish("orders.eu", messages);
    // Accepted only once journaled: all of them, none released.
    ASSERT_TRUE(publisher.waitFor([&] { return publisher.accepted == kTotal; }));
    EXPECT_EQ(publisher.read<size_t>([&] { return publisher.released; }), 0u);
    ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.received["orders"].size() == kTotal; }));
    subscriber.read<int>([&] {
      const auto& got = subscriber.received["orders"];
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].delivery_count, 0u);
        EXPECT_TRUE(got[i].first_acquirer);
        if (i < static_cast<size_t>(kAcceptedFirst)) accepted.insert(numberOf(got[i]));
      }
      return 0;
    });
    subscriber.closeConnection();
    ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.transport_closed; }));
  }
  ASSERT_EQ(accepted.size(), static_cast<size_t>(kAcceptedFirst));

  AmqpTestClient again(client("reader-1"));
  ASSERT_TRUE(again.waitOpen());
  again.subscribe("orders.#", "orders");
  ASSERT_TRUE(again.waitFor([&] {
    return again.received["orders"].size() == kTotal - kAcceptedFirst;
  })) << again.read<size_t>([&] { return again.received["orders"].size(); });
  std::set<uint64_t> redelivered;
  again.read<int>([&] {
    for (const AmqpReceived& r : again.received["orders"]) {
      redelivered.insert(numberOf(r));
      EXPECT_GT(r.delivery_count, 0u) << numberOf(r);
      EXPECT_FALSE(r.first_acquirer) << numberOf(r);
    }
    return 0;
  });
  // Nothing lost, nothing accepted delivered again.
  std::set<uint64_t> all = accepted;
  all.insert(redelivered.begin(), redelivered.end());
  EXPECT_EQ(all.size(), kTotal);
  for (uint64_t n : accepted) EXPECT_EQ(redelivered.count(n), 0u) << n;
}

// A durable subscription (terminus durability, never expiring) keeps what is
// published while its subscriber is away and delivers it when it returns.
TEST_F(AmqpDeliveryTest, ADurableSubscriptionCollectsWhileItsSubscriberIsAway) {
  {
    AmqpTestClient subscriber(client("watcher-1"));
    ASSERT_TRUE(subscriber.waitOpen());
    subscriber.subscribe("alerts.#", "alerts-feed", /*durable=*/true);
    ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.links_open["alerts-feed"] == 1; }));
    AmqpTestClient publisher(client());
    ASSERT_TRUE(publisher.waitOpen());
    publisher.publish("alerts.fire", {numbered("Alert", 1)});
    ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.received["alerts-feed"].size() == 1; }));
    subscriber.closeConnection();  // detaches its links: the subscription stays
    ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.transport_closed; }));
  }
  {
    AmqpTestClient publisher(client());
    ASSERT_TRUE(publisher.waitOpen());
    std::vector<proton::message> away;
    for (uint64_t n = 2; n <= 6; ++n) away.push_back(numbered("Alert", n));
    publisher.publish("alerts.flood", away);
    ASSERT_TRUE(publisher.waitFor([&] { return publisher.accepted == 5; }));
  }
  AmqpTestClient back(client("watcher-1"));
  ASSERT_TRUE(back.waitOpen());
  back.subscribe("alerts.#", "alerts-feed", /*durable=*/true);
  ASSERT_TRUE(back.waitFor([&] { return back.received["alerts-feed"].size() == 5; }));
  back.read<int>([&] {
    const auto& got = back.received["alerts-feed"];
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(numberOf(got[i]), i + 2);    // in order
      EXPECT_EQ(got[i].delivery_count, 0u);  // never sent before
    }
    return 0;
  });
  // A non-durable link of another container sees only what comes after it.
  AmqpTestClient other(client("watcher-2"));
  ASSERT_TRUE(other.waitOpen());
  other.subscribe("alerts.#", "alerts-feed");
  ASSERT_TRUE(other.waitFor([&] { return other.links_open["alerts-feed"] == 1; }));
  EXPECT_TRUE(other.read<bool>([&] { return other.received["alerts-feed"].empty(); }));
}

}  // namespace
}  // namespace cepbus
