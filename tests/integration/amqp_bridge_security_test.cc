// The amqp-bridge service's security end to end: two real `cepbus`
// processes, B listening with TLS (a self-signed pair made by the openssl
// command line) and SASL PLAIN users only, A bridging out to B and in from it
// as a user whose password A reads from the environment variable its
// descriptor names. A wrong password and a user without the permit are
// reported (logged naming the peer, counted in A's admin API), retried, and
// never take A down.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <tuple>

#include "services/protocols/amqp/password_hash.h"
#include "tests/integration/child_process.h"
#include "tests/testing/amqp_test_client.h"
#include "tests/testing/bus_process.h"
#include "tests/testing/http_get.h"
#include "tests/testing/ports.h"
#include "tests/testing/self_signed_pair.h"
#include "tests/testing/wait.h"

namespace cepbus {
namespace {

namespace fs = std::filesystem;
using testing::AmqpClientOptions;
using testing::AmqpTestClient;
using testing::BusProcess;
using testing::canConnect;
using testing::ChildProcess;
using ::testing::HasSubstr;
using testing::httpGet;
using testing::reservedPort;
using testing::waitUntil;
using testing::writeSelfSignedPair;

// What A's bridges read their passwords from (set before any bus starts).
constexpr const char* kRightPasswordEnv = "CEPBUS_TEST_BRIDGE_PASSWORD";
constexpr const char* kWrongPasswordEnv = "CEPBUS_TEST_BRIDGE_WRONG_PASSWORD";

proton::message tick(const std::string& subject, int64_t ts) {
  proton::message m;
  m.subject(subject);
  m.properties().put("ts", ts);
  return m;
}

// A counter of a component's "stats" in the admin API's JSON; -1 if absent.
int64_t counter(const std::string& component, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(component, m, std::regex("\"" + key + "\"\\s*:\\s*([0-9]+)"))) {
    return -1;
  }
  return std::stoll(m[1].str());
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class AmqpBridgeSecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ::setenv(kRightPasswordEnv, "bridge-secret", 1);
    ::setenv(kWrongPasswordEnv, "not-the-secret", 1);
  }

  void SetUp() override {
    ASSERT_TRUE(writeSelfSignedPair(b_.dir()));
    fs::copy_file(b_.dir() / "cert.pem", a_.dir() / "b-cert.pem");
    port_a_ = reservedPort();
    port_b_ = reservedPort();
    // B: TLS only, no anonymous. "bridge" may publish what A sends and
    // subscribe to what A takes in; "reader" may only subscribe; "tester" is
    // the test's own client.
    std::string users;
    for (auto [user, password, permit] :
         {std::tuple{"bridge", "bridge-secret", R"(publish="from-a.#" subscribe="to-a.#")"},
          std::tuple{"reader", "bridge-secret", R"(subscribe="from-a.#")"},
          std::tuple{"tester", "tester-secret", R"(publish="#" subscribe="#")"}}) {
      auto hash = services::amqp::hashPassword(password, 1000);
      ASSERT_TRUE(hash.isOk());
      users += std::string("<user name=\"") + user + "\" password-hash=\"" + *hash + "\"><permit " +
               permit + "/></user>";
    }
    ASSERT_TRUE(b_.start(
        "<cepbus name=\"b\"><listeners><amqp host=\"127.0.0.1\" port=\"" + std::to_string(port_b_) +
            "\" allow-anonymous=\"false\"><tls cert=\"cert.pem\" key=\"key.pem\"/>" + users +
            "</amqp></listeners></cepbus>\n",
        {port_b_}));
  }
  void TearDown() override {
    EXPECT_TRUE(a_.stop(std::chrono::seconds(60)));
    EXPECT_TRUE(b_.stop(std::chrono::seconds(60)));
  }

  // One bridge unit of A: out (what A publishes under out.# goes to
  // from-a.events on B) or in (what B gets under to-a.# is published on A at
  // from-b.events).
  std::string bridge(const std::string& name, const std::string& direction, const std::string& user,
                     const std::string& password_env, const std::string& extra = "") {
    const bool out = direction == "out";
    return R"(
    <service-unit name=")" +
           name + R"(" type="amqp-bridge">
      <param name="url" value="amqps://127.0.0.1:)" +
           std::to_string(port_b_) + R"("/>
      <param name="remote-address" value=")" +
           (out ? "from-a.events" : "to-a.#") + R"("/>
      <param name="direction" value=")" +
           direction + R"("/>
      <param name="user" value=")" +
           user + R"("/>
      <param name="password-env" value=")" +
           password_env + R"("/>
      <param name="ca" value="b-cert.pem"/>
      <param name="peer-name" value="localhost"/>
      <param name="reconnect-delay-ms" value="50"/>)" +
           extra +
           (out ? R"(<subscribe address="out.#"/>)" : R"(<publish address="from-b.events"/>)") +
           "\n    </service-unit>";
  }
  // Starts A (anonymous on loopback, with the admin API) with `units`, and
  // finds its admin port in its log.
  void startA(const std::string& units, const std::string& policy = "") {
    const std::string descriptor = R"(<cepbus name="a">)" + policy + R"(
  <listeners>
    <amqp host="127.0.0.1" port=")" +
                                   std::to_string(port_a_) +
                                   R"(" allow-anonymous="true"/>
    <http host="127.0.0.1" port="0"/>
  </listeners>
  <service-assembly name="bridges">)" +
                                   units +
                                   R"(
  </service-assembly>
</cepbus>
)";
    ASSERT_TRUE(a_.start(descriptor, {port_a_}));
    http_port_a_ = a_.adminPort();
    ASSERT_NE(http_port_a_, 0) << a_.err();
  }
  std::string component(const std::string& name) {
    return httpGet(http_port_a_, "/api/components/" + name);
  }

  AmqpClientOptions anonymousOnA() const {
    AmqpClientOptions o;
    o.port = port_a_;
    return o;
  }
  AmqpClientOptions testerOnB() const {
    AmqpClientOptions o;
    o.port = port_b_;
    o.user = "tester";
    o.password = "tester-secret";
    o.ca = (b_.dir() / "cert.pem").string();
    return o;
  }

  int port_a_ = 0, port_b_ = 0, http_port_a_ = 0;
  BusProcess a_{CEPBUS_BINARY, "cepbus-amqp-bridge-sec-a"};
  BusProcess b_{CEPBUS_BINARY, "cepbus-amqp-bridge-sec-b"};
};

TEST_F(AmqpBridgeSecurityTest, WithTheRightPasswordOverTlsEventsCrossBothWays) {
  AmqpTestClient at_b(testerOnB());
  ASSERT_TRUE(at_b.waitOpen());
  ASSERT_FALSE(at_b.read<bool>([&] { return static_cast<bool>(at_b.error); }));
  at_b.subscribe("from-a.#");
  ASSERT_TRUE(at_b.waitFor([&] { return at_b.links_open["from-a.#"] == 1; }));
  startA(bridge("out", "out", "bridge", kRightPasswordEnv) +
         bridge("in", "in", "bridge", kRightPasswordEnv));

  // Out: published on A, received on B. Published before or after the bridge
  // connected, the events wait for it and all arrive.
  AmqpTestClient at_a(anonymousOnA());
  ASSERT_TRUE(at_a.waitOpen());
  at_a.publish("out.sensor", {tick("Tick", 1), tick("Tick", 2), tick("Tick", 3)});
  ASSERT_TRUE(at_a.waitFor([&] { return at_a.accepted == 3; }));
  ASSERT_TRUE(at_b.waitFor([&] { return at_b.received["from-a.#"].size() == 3; })) << a_.err();
  at_b.read<int>([&] {
    for (int i = 0; i < 3; ++i) {
      const proton::message& m = at_b.received["from-a.#"][i];
      EXPECT_EQ(m.subject(), "Tick");
      EXPECT_EQ(proton::get<int64_t>(m.properties().get("ts")), i + 1);
    }
    return 0;
  });
  EXPECT_TRUE(waitUntil([&] { return counter(component("bridges.out"), "accepted") == 3; }))
      << component("bridges.out");
  EXPECT_EQ(counter(component("bridges.out"), "errors"), 0) << a_.err();

  // In: published on B to to-a.*, received on A at from-b.events. The
  // bridge's receiving link may still be on its way: ping until one arrives.
  at_a.subscribe("from-b.#");
  ASSERT_TRUE(at_a.waitFor([&] { return at_a.links_open["from-b.#"] == 1; }));
  bool arrived = false;
  for (int64_t ping = 1; ping <= 200 && !arrived; ++ping) {
    at_b.send("to-a.ping", {tick("Ping", ping)});
    arrived = at_a.waitFor([&] { return !at_a.received["from-b.#"].empty(); },
                           std::chrono::milliseconds(500));
  }
  ASSERT_TRUE(arrived) << a_.err();
  at_b.send("to-a.data", {tick("Data", 100), tick("Data", 101)});
  ASSERT_TRUE(at_a.waitFor([&] {
    int data = 0;
    for (const proton::message& m : at_a.received["from-b.#"]) data += m.subject() == "Data";
    return data == 2;
  }));
  EXPECT_EQ(counter(component("bridges.in"), "errors"), 0) << a_.err();
  EXPECT_THAT(component("bridges.out"), HasSubstr("\"state\":\"started\""));
  EXPECT_THAT(a_.err(), HasSubstr("bridges.out: connected to amqps://127.0.0.1:" +
                                  std::to_string(port_b_) + " (out to from-a.events)"));
}

// On a reliable route nothing A accepted is lost to a wrong password: the
// journaled events wait for the bridge, stay journaled when A stops, and
// reach B once A runs again with the right password.
TEST_F(AmqpBridgeSecurityTest, JournaledEventsOutliveAWrongPasswordAndARestart) {
  const std::string policy = R"(
  <journal path="journal.db"/>
  <routes><route address="out.#" flow="reliable"/></routes>)";
  startA(bridge("out", "out", "bridge", kWrongPasswordEnv), policy);
  {
    AmqpTestClient at_a(anonymousOnA());
    ASSERT_TRUE(at_a.waitOpen());
    at_a.publish("out.sensor", {tick("Tick", 1), tick("Tick", 2), tick("Tick", 3)});
    ASSERT_TRUE(at_a.waitFor([&] { return at_a.accepted == 3; })) << a_.err();
  }
  // Accepted once journaled; the flow hands them to the bridge right after.
  EXPECT_TRUE(waitUntil([&] { return counter(component("bridges.out"), "waiting") == 3; }));
  ASSERT_TRUE(waitUntil([&] { return counter(component("bridges.out"), "errors") >= 2; }));
  ASSERT_TRUE(a_.stop(std::chrono::seconds(90)));
  EXPECT_THAT(a_.err(), ::testing::Not(HasSubstr("never delivered")));

  AmqpTestClient at_b(testerOnB());
  ASSERT_TRUE(at_b.waitOpen());
  at_b.subscribe("from-a.#");
  ASSERT_TRUE(at_b.waitFor([&] { return at_b.links_open["from-a.#"] == 1; }));
  startA(bridge("out", "out", "bridge", kRightPasswordEnv), policy);
  ASSERT_TRUE(at_b.waitFor([&] { return at_b.received["from-a.#"].size() >= 3; })) << a_.err();
  at_b.read<int>([&] {
    std::set<int64_t> ts;
    for (const proton::message& m : at_b.received["from-a.#"]) {
      ts.insert(proton::get<int64_t>(m.properties().get("ts")));
    }
    EXPECT_EQ(ts, (std::set<int64_t>{1, 2, 3}));
    return 0;
  });
  EXPECT_TRUE(waitUntil([&] { return counter(component("bridges.out"), "waiting") == 0; }));
}

// The password goes in clear over amqp://: only to a loopback host.
TEST_F(AmqpBridgeSecurityTest, APasswordIsNeverSentInClearToAnotherHost) {
  std::string unit = bridge("out", "out", "bridge", kRightPasswordEnv);
  const std::string tls_url = "amqps://127.0.0.1:" + std::to_string(port_b_);
  unit.replace(unit.find(tls_url), tls_url.size(), "amqp://192.0.2.1:5672");
  std::ofstream(a_.dir() / "a.xml") << "<cepbus name=\"a\"><service-assembly name=\"bridges\">" +
                                           unit + "</service-assembly></cepbus>\n";
  ChildProcess a({CEPBUS_BINARY, "run", "a.xml"}, a_.dir());
  ASSERT_TRUE(a.started());
  EXPECT_NE(a.wait(std::chrono::seconds(60)), 0);
  EXPECT_THAT(a.err(), HasSubstr("a user's password goes only over amqps:// (or to a loopback "
                                 "host), not to amqp://192.0.2.1:5672"));
}

// A wrong password: the bridge says so (naming the peer), counts each failed
// attempt and keeps trying. A stays up; what it accepted for the bridge waits
// in memory up to the bridge's `buffer` (3 here), what does not fit is
// released to the publisher, and at stop the waiting (not journaled) events
// are dropped, counted and logged.
TEST_F(AmqpBridgeSecurityTest, AWrongPasswordIsReportedRetriedAndDoesNotTakeABusDown) {
  startA(bridge("out", "out", "bridge", kWrongPasswordEnv, R"(<param name="buffer" value="3"/>)"));
  ASSERT_TRUE(waitUntil([&] { return counter(component("bridges.out"), "errors") >= 3; }))
      << component("bridges.out") << a_.err();
  const std::string entry = component("bridges.out");
  EXPECT_THAT(entry, HasSubstr("\"state\":\"failed\""));
  EXPECT_THAT(entry, HasSubstr("amqp:unauthorized-access"));
  EXPECT_EQ(counter(entry, "connects"), 0);
  EXPECT_THAT(a_.err(), HasSubstr("bridges.out: amqps://127.0.0.1:" + std::to_string(port_b_)));
  EXPECT_EQ(occurrences(a_.err(), "amqp:unauthorized-access"), 1u)
      << "logged once, not at every attempt: " << a_.err();

  AmqpTestClient at_a(anonymousOnA());
  ASSERT_TRUE(at_a.waitOpen());
  at_a.publish("out.sensor", {tick("Tick", 1), tick("Tick", 2), tick("Tick", 3), tick("Tick", 4),
                              tick("Tick", 5)});
  ASSERT_TRUE(at_a.waitFor([&] { return at_a.accepted + at_a.released == 5; }));
  EXPECT_EQ(at_a.read<size_t>([&] { return at_a.accepted; }), 3u);
  EXPECT_EQ(at_a.read<size_t>([&] { return at_a.released; }), 2u);
  EXPECT_EQ(counter(component("bridges.out"), "waiting"), 3);
  const int64_t errors = counter(component("bridges.out"), "errors");
  EXPECT_TRUE(waitUntil([&] { return counter(component("bridges.out"), "errors") > errors; }))
      << "the bridge keeps trying";

  ASSERT_TRUE(a_.stop(std::chrono::seconds(60)));
  EXPECT_THAT(a_.err(), HasSubstr("bridges.out: stopped with 3 events (not journaled) never "
                                  "delivered to amqps://127.0.0.1:" +
                                  std::to_string(port_b_)));
}

// A bridge whose user may not publish (out) or subscribe (in) to the remote
// address: the peer refuses the link as amqp:unauthorized-access; the bridge
// says so and attaches again after its delay (the peer's permits may change).
TEST_F(AmqpBridgeSecurityTest, ABridgeUserWithoutThePermitIsUnauthorized) {
  startA(bridge("out", "out", "reader", kRightPasswordEnv) +
         bridge("in", "in", "reader", kRightPasswordEnv));
  ASSERT_TRUE(waitUntil([&] {
    const std::string out = component("bridges.out");
    const std::string in = component("bridges.in");
    return counter(out, "connects") >= 2 && counter(out, "errors") >= 2 &&
           counter(in, "connects") >= 2 && counter(in, "errors") >= 2;
  })) << component("bridges.out")
      << component("bridges.in") << a_.err();
  const std::string entry = component("bridges.out");
  EXPECT_THAT(entry, HasSubstr("amqp:unauthorized-access"));
  EXPECT_THAT(a_.err(), HasSubstr("bridges.out: amqps://127.0.0.1:" + std::to_string(port_b_) +
                                  " (out to from-a.events): the peer closed the sending link "
                                  "to from-a.events: amqp:unauthorized-access"));
  EXPECT_EQ(occurrences(a_.err(), "sending link to from-a.events: amqp:unauthorized-access"), 1u)
      << "logged once, not at every attempt: " << a_.err();
  EXPECT_EQ(occurrences(a_.err(), "bridges.out: connected to"), 0u) << a_.err();
  EXPECT_EQ(counter(entry, "sent"), 0);
  // Bridging in, the user may not subscribe to the remote address.
  EXPECT_THAT(component("bridges.in"), HasSubstr("amqp:unauthorized-access"));
  EXPECT_THAT(a_.err(), HasSubstr("bridges.in: amqps://127.0.0.1:" + std::to_string(port_b_) +
                                  " (in from to-a.#): the peer closed the receiving link to "
                                  "to-a.#: amqp:unauthorized-access: user \"reader\" may not "
                                  "subscribe to \"to-a.#\""));
  EXPECT_TRUE(canConnect(port_a_));
}

}  // namespace
}  // namespace cepbus
