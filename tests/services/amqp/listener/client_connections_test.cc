#include "services/amqp/listener/client_connections.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <proton/connection_options.hpp>
#include <proton/io/connection_driver.hpp>
#include <string>

namespace cepbus::services::amqp {
namespace {

// A client connected to the bus in memory: two Proton connection drivers,
// never attached to a socket, whose bytes are copied across until both are
// idle. connection() is the bus's end, whose remote container id is the
// client's.
class Client {
 public:
  explicit Client(const std::string& container_id) : client_(container_id), bus_("bus") {
    client_.connect(proton::connection_options());
    bus_.accept(proton::connection_options());
    while (copy(client_, bus_) + copy(bus_, client_) > 0) {
    }
  }
  proton::connection connection() const { return bus_.connection(); }

 private:
  static size_t copy(proton::io::connection_driver& from, proton::io::connection_driver& to) {
    from.dispatch();
    const proton::io::const_buffer out = from.write_buffer();
    const proton::io::mutable_buffer in = to.read_buffer();
    const size_t n = std::min(out.size, in.size);
    if (n == 0) return 0;
    std::memcpy(in.data, out.data, n);
    to.read_done(n);
    from.write_done(n);
    to.dispatch();
    return n;
  }

  proton::io::connection_driver client_;
  proton::io::connection_driver bus_;
};

TEST(AuthenticatedUserTest, AnonymousOnlyWhenAllowed) {
  auto anonymous = authenticatedUser("ANONYMOUS", "", /*allow_anonymous=*/true);
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(*anonymous, "");
  auto refused = authenticatedUser("ANONYMOUS", "", false);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().message(), "authenticate with SASL PLAIN (got ANONYMOUS)");
}

TEST(AuthenticatedUserTest, PlainNamesTheUser) {
  auto alice = authenticatedUser("PLAIN", "alice", false);
  ASSERT_TRUE(alice);
  EXPECT_EQ(*alice, "alice");
  EXPECT_FALSE(authenticatedUser("PLAIN", "", true));  // no user: nobody to check permits for
}

TEST(AuthenticatedUserTest, ARefusalSaysWhatIsOfferedAndWhatCame) {
  auto none = authenticatedUser("", "", true);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.status().message(), "authenticate with SASL PLAIN or ANONYMOUS (got none)");
  auto external = authenticatedUser("EXTERNAL", "cn=x", false);
  ASSERT_FALSE(external);
  EXPECT_EQ(external.status().message(), "authenticate with SASL PLAIN (got EXTERNAL)");
}

TEST(WakerTest, RefusesWorkOnceClosed) {
  Waker nowhere(nullptr);
  EXPECT_FALSE(nowhere.add([] {}));
  Client client("c");
  Waker waker(&client.connection().work_queue());
  waker.close();
  bool ran = false;
  EXPECT_FALSE(waker.add([&ran] { ran = true; }));
  EXPECT_FALSE(ran);
}

struct ClientConnectionsTest : ::testing::Test {
  AmqpLimits limits() {
    AmqpLimits l;
    l.max_connections = 2;
    l.max_sessions = 1;
    return l;
  }
  std::shared_ptr<AmqpAdmission> admission = std::make_shared<AmqpAdmission>(limits());
  std::shared_ptr<ListenerCounters> counters = std::make_shared<ListenerCounters>();
  ClientConnections connections{admission, counters};
};

TEST_F(ClientConnectionsTest, RemembersWhoIsBehindAnOpenConnection) {
  Client client("client-1");
  EXPECT_EQ(connections.find(client.connection()), nullptr);
  ASSERT_FALSE(connections.open(client.connection(), 7, "alice").has_value());
  const ClientConnection* conn = connections.find(client.connection());
  ASSERT_NE(conn, nullptr);
  EXPECT_EQ(conn->id, 7u);
  EXPECT_EQ(conn->user, "alice");
  EXPECT_EQ(conn->container_id, "client-1");
  EXPECT_EQ(conn->owner(), "alice");
  EXPECT_NE(connections.wakerOf(client.connection()), nullptr);
  EXPECT_EQ(counters->connections.value(), 1u);
}

TEST_F(ClientConnectionsTest, AnAnonymousClientsDurablesCountAgainstItsContainerId) {
  Client client("client-1");
  ASSERT_FALSE(connections.open(client.connection(), 1, "").has_value());
  EXPECT_EQ(connections.find(client.connection())->owner(), "client-1");
}

TEST_F(ClientConnectionsTest, RefusesConnectionsBeyondTheLimitUntilOneCloses) {
  Client a("a"), b("b"), c("c");
  ASSERT_FALSE(connections.open(a.connection(), 1, "").has_value());
  ASSERT_FALSE(connections.open(b.connection(), 2, "").has_value());
  auto refusal = connections.open(c.connection(), 3, "");
  ASSERT_TRUE(refusal.has_value());
  EXPECT_NE(refusal->find("max-connections"), std::string::npos) << *refusal;
  EXPECT_EQ(connections.find(c.connection()), nullptr);
  EXPECT_EQ(counters->connections.value(), 2u);
  EXPECT_EQ(admission->refusals().connections, 1u);

  EXPECT_EQ(connections.close(a.connection()), 1u);
  EXPECT_FALSE(connections.open(c.connection(), 4, "").has_value());
}

TEST_F(ClientConnectionsTest, ClosingForgetsTheConnectionAndClosesItsWaker) {
  Client client("c");
  ASSERT_FALSE(connections.open(client.connection(), 5, "").has_value());
  std::shared_ptr<Waker> waker = connections.wakerOf(client.connection());
  EXPECT_EQ(connections.close(client.connection()), 5u);
  EXPECT_EQ(connections.find(client.connection()), nullptr);
  EXPECT_EQ(connections.wakerOf(client.connection()), nullptr);
  EXPECT_FALSE(waker->add([] {}));  // a callback still holding it cannot reach it
  EXPECT_FALSE(connections.close(client.connection()).has_value());
}

TEST_F(ClientConnectionsTest, AdmitsSessionsPerConnectionUpToTheLimit) {
  Client a("a"), b("b");
  ASSERT_FALSE(connections.open(a.connection(), 1, "").has_value());
  ASSERT_FALSE(connections.open(b.connection(), 2, "").has_value());
  proton::session first = a.connection().open_session();
  proton::session second = a.connection().open_session();
  proton::session other = b.connection().open_session();
  EXPECT_EQ(connections.openSession(first).verdict, SessionAdmission::Verdict::kAdmitted);
  SessionAdmission refused = connections.openSession(second);
  EXPECT_EQ(refused.verdict, SessionAdmission::Verdict::kRefused);
  EXPECT_NE(refused.refusal.find("max-sessions"), std::string::npos) << refused.refusal;
  EXPECT_EQ(connections.openSession(other).verdict, SessionAdmission::Verdict::kAdmitted);

  connections.sessionClosed(first);
  EXPECT_EQ(connections.openSession(second).verdict, SessionAdmission::Verdict::kAdmitted);
}

TEST_F(ClientConnectionsTest, ASessionOfARefusedConnectionIsLeftBe) {
  Client client("c");
  proton::session s = client.connection().open_session();
  EXPECT_EQ(connections.openSession(s).verdict, SessionAdmission::Verdict::kUnknownConnection);
  EXPECT_EQ(admission->refusals().sessions, 0u);
}

TEST_F(ClientConnectionsTest, ClosingAConnectionForgetsItsSessions) {
  Client client("c");
  ASSERT_FALSE(connections.open(client.connection(), 1, "").has_value());
  proton::session old = client.connection().open_session();
  ASSERT_EQ(connections.openSession(old).verdict, SessionAdmission::Verdict::kAdmitted);
  connections.close(client.connection());
  // The same number again (the admission's key): the old session's late end
  // must not free the new connection's session.
  ASSERT_FALSE(connections.open(client.connection(), 1, "").has_value());
  ASSERT_EQ(connections.openSession(client.connection().open_session()).verdict,
            SessionAdmission::Verdict::kAdmitted);
  connections.sessionClosed(old);
  EXPECT_EQ(connections.openSession(client.connection().open_session()).verdict,
            SessionAdmission::Verdict::kRefused);
}

TEST_F(ClientConnectionsTest, ListsAndClearsTheOpenConnections) {
  Client a("a"), b("b");
  ASSERT_FALSE(connections.open(a.connection(), 1, "").has_value());
  ASSERT_FALSE(connections.open(b.connection(), 2, "").has_value());
  EXPECT_EQ(connections.all().size(), 2u);
  connections.clear();
  EXPECT_TRUE(connections.all().empty());
  EXPECT_EQ(connections.find(a.connection()), nullptr);
}

}  // namespace
}  // namespace cepbus::services::amqp
