// The amqp-bridge service end to end: two real `cepbus` processes, one
// bridging events out to the other and in from it, started in the wrong
// order and with the peer restarted in between (the bridge reconnects).

#include <gtest/gtest.h>

#include <string>

#include "tests/testing/amqp_test_client.h"
#include "tests/testing/bus_process.h"
#include "tests/testing/ports.h"

namespace cepbus {
namespace {

using testing::AmqpClientOptions;
using testing::AmqpTestClient;
using testing::BusProcess;
using testing::reservedPort;

proton::message tick(const std::string& subject, int64_t ts) {
  proton::message m;
  m.subject(subject);
  m.properties().put("ts", ts);
  return m;
}

class AmqpBridgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_a_ = reservedPort();
    port_b_ = reservedPort();
    a_xml_ = "<cepbus name=\"a\"><listeners><amqp host=\"127.0.0.1\" port=\"" +
             std::to_string(port_a_) + "\" allow-anonymous=\"true\"/></listeners></cepbus>\n";
    const std::string url = "127.0.0.1:" + std::to_string(port_a_);
    b_xml_ = R"(<cepbus name="b">
  <listeners><amqp host="127.0.0.1" port=")" +
             std::to_string(port_b_) +
             R"(" allow-anonymous="true"/></listeners>
  <service-assembly name="bridges">
    <service-unit name="out" type="amqp-bridge">
      <param name="url" value=")" +
             url + R"("/>
      <param name="remote-address" value="from-b.ticks"/>
      <param name="direction" value="out"/>
      <param name="reconnect-delay-ms" value="20"/>
      <subscribe address="local.#"/>
    </service-unit>
    <service-unit name="in" type="amqp-bridge">
      <param name="url" value=")" +
             url + R"("/>
      <param name="remote-address" value="to-b.#"/>
      <param name="direction" value="in"/>
      <param name="reconnect-delay-ms" value="20"/>
      <publish address="from-a.events"/>
    </service-unit>
  </service-assembly>
</cepbus>
)";
  }
  void TearDown() override {
    EXPECT_TRUE(a_.stop());
    EXPECT_TRUE(b_.stop());
  }
  AmqpClientOptions on(int port) {
    AmqpClientOptions o;
    o.port = port;
    return o;
  }

  int port_a_ = 0, port_b_ = 0;
  std::string a_xml_, b_xml_;
  BusProcess a_{CEPBUS_BINARY, "cepbus-amqp-bridge-a"};
  BusProcess b_{CEPBUS_BINARY, "cepbus-amqp-bridge-b"};
};

TEST_F(AmqpBridgeTest, EventsCrossBetweenTwoBusesBothWaysAndSurviveAPeerRestart) {
  ASSERT_TRUE(b_.start(b_xml_, {port_b_}));  // its bridges find nobody at first and keep trying
  ASSERT_TRUE(a_.start(a_xml_, {port_a_}));

  // Out: published on b under local.#, received on a at from-b.ticks.
  {
    AmqpTestClient at_a(on(port_a_));
    ASSERT_TRUE(at_a.waitOpen());
    at_a.subscribe("from-b.#");
    ASSERT_TRUE(at_a.waitFor([&] { return at_a.links_open["from-b.#"] == 1; }));
    AmqpTestClient at_b(on(port_b_));
    ASSERT_TRUE(at_b.waitOpen());
    at_b.publish("local.sensor", {tick("Tick", 1), tick("Tick", 2), tick("Tick", 3)});
    ASSERT_TRUE(at_a.waitFor([&] { return at_a.received["from-b.#"].size() == 3; })) << b_.err();
    at_a.read<int>([&] {
      for (int i = 0; i < 3; ++i) {
        const proton::message& m = at_a.received["from-b.#"][i].message;
        EXPECT_EQ(m.subject(), "Tick");
        EXPECT_EQ(proton::get<int64_t>(m.properties().get("ts")), i + 1);
      }
      return 0;
    });
  }

  // In: published on a to to-b.*, received on b at from-a.events. The
  // bridge's link to a may still be on its way: ping until one arrives.
  {
    AmqpTestClient at_b(on(port_b_));
    ASSERT_TRUE(at_b.waitOpen());
    at_b.subscribe("from-a.#");
    ASSERT_TRUE(at_b.waitFor([&] { return at_b.links_open["from-a.#"] == 1; }));
    AmqpTestClient at_a(on(port_a_));
    ASSERT_TRUE(at_a.waitOpen());
    bool arrived = false;
    for (int64_t ping = 1; ping <= 500 && !arrived; ++ping) {
      at_a.publish("to-b.ping", {tick("Ping", ping)});
      arrived = at_b.waitFor([&] { return !at_b.received["from-a.#"].empty(); },
                             std::chrono::milliseconds(500));
    }
    ASSERT_TRUE(arrived);
    const size_t before = at_b.read<size_t>([&] { return at_b.received["from-a.#"].size(); });
    at_a.publish("to-b.data", {tick("Data", 100), tick("Data", 101)});
    ASSERT_TRUE(at_b.waitFor([&] {
      size_t data = 0;
      for (const auto& r : at_b.received["from-a.#"]) data += r.message.subject() == "Data";
      return data == 2;
    }));
    EXPECT_GE(at_b.read<size_t>([&] { return at_b.received["from-a.#"].size(); }), before + 2);
  }

  // The peer goes away and comes back on the same port: the out bridge
  // reconnects and what is published meanwhile still arrives.
  ASSERT_TRUE(a_.stop());
  {
    AmqpTestClient at_b(on(port_b_));
    ASSERT_TRUE(at_b.waitOpen());
    at_b.publish("local.sensor", {tick("Tick", 7)});
    ASSERT_TRUE(at_b.waitFor([&] { return at_b.accepted == 1; }));
    ASSERT_TRUE(a_.start(a_xml_, {port_a_}));
    AmqpTestClient at_a(on(port_a_));
    ASSERT_TRUE(at_a.waitOpen());
    at_a.subscribe("from-b.#");
    ASSERT_TRUE(at_a.waitFor([&] { return at_a.links_open["from-b.#"] == 1; }));
    // Tick 7 was buffered while a was down; it may have reached a before
    // this subscriber attached, so more ticks follow until one arrives.
    bool arrived = false;
    for (int64_t t = 8; t <= 500 && !arrived; ++t) {
      at_b.publish("local.sensor", {tick("Tick", t)});
      arrived = at_a.waitFor([&] { return !at_a.received["from-b.#"].empty(); },
                             std::chrono::milliseconds(500));
    }
    EXPECT_TRUE(arrived) << b_.err();
  }
}

}  // namespace
}  // namespace cepbus
