// End-to-end security of the AMQP listener with the real `cepbus`: TLS with a
// self-signed pair made by the openssl command line, SASL PLAIN against
// salted hashes in the descriptor, anonymous clients refused, per-user
// permissions on attach — with the project's own Proton client and with
// Debian's python3-qpid-proton.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "services/protocols/amqp/password_hash.h"
#include "tests/integration/child_process.h"
#include "tests/testing/amqp_test_client.h"
#include "tests/testing/bus_process.h"
#include "tests/testing/ports.h"
#include "tests/testing/self_signed_pair.h"

namespace cepbus {
namespace {

namespace fs = std::filesystem;
using testing::AmqpClientOptions;
using testing::AmqpTestClient;
using testing::BusProcess;
using testing::ChildProcess;
using ::testing::HasSubstr;
using testing::reservedPort;
using testing::writeSelfSignedPair;

proton::message tick(const std::string& subject, int64_t ts) {
  proton::message m;
  m.subject(subject);
  m.properties().put("ts", ts);
  return m;
}

// One bus for the suite: TLS on, anonymous off, two users.
class AmqpSecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bus_ = new BusProcess(CEPBUS_BINARY, "cepbus-amqp-sec");
    plain_bus_ = new BusProcess(CEPBUS_BINARY, "cepbus-amqp-sec-loopback");
    ASSERT_TRUE(writeSelfSignedPair(bus_->dir()));
    auto alice = services::amqp::hashPassword("alice-secret", 1000);
    auto bob = services::amqp::hashPassword("bob-secret", 1000);
    ASSERT_TRUE(alice.isOk() && bob.isOk());
    port_ = reservedPort();
    plain_port_ = reservedPort();
    std::string users = R"(
      <user name="alice" password-hash=")" +
                        *alice + R"(">
        <permit publish="orders.#" subscribe="orders.#"/>
      </user>
      <user name="bob" password-hash=")" +
                        *bob + R"(">
        <permit subscribe="alerts.*"/>
      </user>)";
    ASSERT_TRUE(
        bus_->start("<cepbus name=\"secure\"><listeners><amqp host=\"127.0.0.1\" port=\"" +
                        std::to_string(port_) +
                        "\" allow-anonymous=\"false\"><tls cert=\"cert.pem\" key=\"key.pem\"/>" +
                        users + "</amqp></listeners></cepbus>\n",
                    {port_}));
    ASSERT_TRUE(plain_bus_->start(
        "<cepbus name=\"loopback\"><listeners><amqp host=\"127.0.0.1\" port=\"" +
            std::to_string(plain_port_) + "\">" + users + "</amqp></listeners></cepbus>\n",
        {plain_port_}));
  }
  static void TearDownTestSuite() {
    EXPECT_TRUE(bus_->stop());
    EXPECT_TRUE(plain_bus_->stop());
    delete bus_;
    delete plain_bus_;
  }

  static AmqpClientOptions as(const std::string& user, const std::string& password,
                              bool tls = true) {
    AmqpClientOptions o;
    o.port = port_;
    o.user = user;
    o.password = password;
    if (tls) o.ca = (bus_->dir() / "cert.pem").string();
    return o;
  }
  // The same users on a listener bound to 127.0.0.1 without TLS (PLAIN is
  // offered there because the address is loopback).
  static AmqpClientOptions onLoopback(const std::string& user, const std::string& password) {
    AmqpClientOptions o = as(user, password, /*tls=*/false);
    o.port = plain_port_;
    return o;
  }

  static inline BusProcess* bus_ = nullptr;
  static inline BusProcess* plain_bus_ = nullptr;
  static inline int port_ = 0;
  static inline int plain_port_ = 0;
};

TEST_F(AmqpSecurityTest, AUserPublishesAndSubscribesOverTlsWithPlain) {
  AmqpTestClient alice(as("alice", "alice-secret"));
  ASSERT_TRUE(alice.waitOpen());
  ASSERT_FALSE(alice.read<bool>([&] { return static_cast<bool>(alice.error); }))
      << alice.read<std::string>([&] { return alice.error.what(); });
  alice.subscribe("orders.#");
  ASSERT_TRUE(alice.waitFor([&] { return alice.links_open["orders.#"] == 1; }));
  alice.publish("orders.eu", {tick("Order", 1), tick("Order", 2), tick("Order", 3)});
  ASSERT_TRUE(
      alice.waitFor([&] { return alice.accepted == 3 && alice.received["orders.#"].size() == 3; }));
  alice.read<int>([&] {
    const auto& got = alice.received["orders.#"];
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(got[i].message.subject(), "Order");
      EXPECT_EQ(proton::get<int64_t>(got[i].message.properties().get("ts")), i + 1);
    }
    return 0;
  });
}

TEST_F(AmqpSecurityTest, AWrongPasswordOrAnUnknownUserIsRefused) {
  for (auto [user, password] : {std::pair{"alice", "bob-secret"}, std::pair{"mallory", "x"}}) {
    AmqpTestClient client(onLoopback(user, password));
    ASSERT_TRUE(client.waitFor([&] { return static_cast<bool>(client.error); })) << user;
    EXPECT_EQ(client.read<std::string>([&] { return client.error.name(); }),
              "amqp:unauthorized-access")
        << user;
    EXPECT_FALSE(client.read<bool>([&] { return client.open; })) << user;
  }
}

TEST_F(AmqpSecurityTest, AnonymousClientsAreRefusedWhenNotAllowed) {
  AmqpTestClient client(onLoopback("", ""));
  ASSERT_TRUE(client.waitFor([&] { return static_cast<bool>(client.error); }));
  EXPECT_EQ(client.read<std::string>([&] { return client.error.name(); }),
            "amqp:unauthorized-access");
  EXPECT_FALSE(client.read<bool>([&] { return client.open; }));
}

TEST_F(AmqpSecurityTest, PlainTcpIsRefusedWhenTlsIsConfigured) {
  AmqpTestClient client(as("alice", "alice-secret", /*tls=*/false));
  ASSERT_TRUE(client.waitFor([&] { return static_cast<bool>(client.error); }));
  EXPECT_FALSE(client.read<bool>([&] { return client.open; }));
}

TEST_F(AmqpSecurityTest, AnAttachBeyondTheUsersPermitsIsUnauthorized) {
  AmqpTestClient bob(as("bob", "bob-secret"));
  ASSERT_TRUE(bob.waitOpen());
  bob.publish("orders.eu", {tick("Order", 1)});
  bob.subscribe("alerts.#");  // wider than bob's alerts.*
  bob.subscribe("alerts.fire");
  ASSERT_TRUE(bob.waitFor(
      [&] { return bob.link_errors.size() == 2 && bob.links_open["alerts.fire"] == 1; }));
  bob.read<int>([&] {
    EXPECT_EQ(bob.link_errors["alerts.#"].name(), "amqp:unauthorized-access");
    EXPECT_THAT(bob.link_errors["alerts.#"].description(), HasSubstr("may not subscribe"));
    EXPECT_EQ(bob.link_errors.size(), 2u);
    for (const auto& [name, error] : bob.link_errors) {
      EXPECT_EQ(error.name(), "amqp:unauthorized-access") << name;
    }
    EXPECT_EQ(bob.accepted, 0u);
    EXPECT_FALSE(bob.error) << "the connection stays up";
    return 0;
  });
}

// Debian's python3-qpid-proton over TLS with PLAIN: publishes and receives as
// alice; a wrong password fails to connect.
TEST_F(AmqpSecurityTest, ThePythonClientAuthenticatesOverTls) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  std::ofstream(bus_->dir() / "client.py") << R"(import sys
from proton import Message, SSLDomain
from proton.utils import BlockingConnection
url = "amqps://127.0.0.1:" + sys.argv[1]
def domain():
    d = SSLDomain(SSLDomain.MODE_CLIENT)
    d.set_trusted_ca_db(sys.argv[2])
    d.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME)
    return d
try:
    BlockingConnection(url, timeout=10, ssl_domain=domain(), user="alice", password="wrong",
                       allowed_mechs="PLAIN", virtual_host="localhost")
    print("wrong password accepted")
except Exception as e:
    print("wrong password refused")
conn = BlockingConnection(url, timeout=10, ssl_domain=domain(), user="alice",
                          password="alice-secret", allowed_mechs="PLAIN", virtual_host="localhost")
receiver = conn.create_receiver("orders.py")
sender = conn.create_sender("orders.py")
for i in range(1, 4):
    sender.send(Message(subject="Order", properties={"ts": i}))
for i in range(3):
    m = receiver.receive(timeout=10)
    receiver.accept()
    print("got", m.subject, m.properties["ts"])
conn.close()
)";
  fs::create_directories(bus_->dir() / "py");
  ChildProcess client({"/usr/bin/python3", (bus_->dir() / "client.py").string(),
                       std::to_string(port_), (bus_->dir() / "cert.pem").string()},
                      bus_->dir() / "py");
  ASSERT_TRUE(client.started());
  ASSERT_EQ(client.wait(std::chrono::seconds(60)), 0) << client.out() << client.err();
  const std::string out = client.out();
  EXPECT_THAT(out, HasSubstr("wrong password refused"));
  for (int i = 1; i <= 3; ++i) EXPECT_THAT(out, HasSubstr("got Order " + std::to_string(i)));
}

}  // namespace
}  // namespace cepbus
