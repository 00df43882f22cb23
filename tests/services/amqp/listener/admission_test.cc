#include "services/amqp/listener/admission.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "bus/core/wire_names.h"

namespace cepbus::services::amqp {
namespace {

AmqpLimits small() {
  AmqpLimits limits;
  limits.max_connections = 2;
  limits.max_sessions = 2;
  limits.max_links = 3;
  limits.max_durable = 1;
  limits.max_pending_requests = 2;
  return limits;
}

bool contains(const std::optional<std::string>& refusal, const std::string& text) {
  return refusal && refusal->find(text) != std::string::npos;
}

TEST(AmqpAdmissionTest, RefusesConnectionsBeyondTheLimitUntilOneCloses) {
  AmqpAdmission admission(small());
  EXPECT_FALSE(admission.admitConnection(1));
  EXPECT_FALSE(admission.admitConnection(2));
  EXPECT_TRUE(contains(admission.admitConnection(3), "max-connections=2"));
  admission.connectionClosed(1);
  EXPECT_FALSE(admission.admitConnection(4));
  EXPECT_EQ(admission.refusals().connections, 1u);
}

TEST(AmqpAdmissionTest, CountsSessionsLinksAndRequestsPerConnection) {
  AmqpAdmission admission(small());
  ASSERT_FALSE(admission.admitConnection(1));
  ASSERT_FALSE(admission.admitConnection(2));
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(admission.admitLink(1));
  EXPECT_TRUE(contains(admission.admitLink(1), "too many links on this connection: max-links=3"));
  EXPECT_FALSE(admission.admitLink(2));  // another connection has its own count
  admission.linkClosed(1);
  EXPECT_FALSE(admission.admitLink(1));

  EXPECT_FALSE(admission.admitSession(1));
  EXPECT_FALSE(admission.admitSession(1));
  EXPECT_TRUE(contains(admission.admitSession(1), "max-sessions=2"));
  admission.sessionClosed(1);
  EXPECT_FALSE(admission.admitSession(1));

  EXPECT_FALSE(admission.admitRequest(1));
  EXPECT_FALSE(admission.admitRequest(1));
  EXPECT_TRUE(contains(admission.admitRequest(1), "max-pending-requests=2"));
  admission.requestEnded(1);
  EXPECT_FALSE(admission.admitRequest(1));

  const AmqpRefusals refused = admission.refusals();
  EXPECT_EQ(refused.links, 1u);
  EXPECT_EQ(refused.sessions, 1u);
  EXPECT_EQ(refused.requests, 1u);
}

TEST(AmqpAdmissionTest, AClosedConnectionTakesWhatItHeldWithIt) {
  AmqpAdmission admission(small());
  ASSERT_FALSE(admission.admitConnection(1));
  for (int i = 0; i < 3; ++i) ASSERT_FALSE(admission.admitLink(1));
  admission.connectionClosed(1);
  // Late ends of what it held are ignored, and nothing is admitted on it.
  admission.linkClosed(1);
  admission.requestEnded(1);
  EXPECT_TRUE(contains(admission.admitLink(1), "not open"));
  ASSERT_FALSE(admission.admitConnection(5));
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(admission.admitLink(5));
}

TEST(AmqpAdmissionTest, CountsDurableSubscriptionsPerOwnerAcrossConnections) {
  AmqpAdmission admission(small());
  EXPECT_FALSE(admission.admitDurable("alice"));
  EXPECT_TRUE(contains(admission.admitDurable("alice"),
                       "too many durable subscriptions for this user: max-durable=1"));
  EXPECT_FALSE(admission.admitDurable("bob"));
  admission.durableEnded("alice");
  admission.durableEnded("alice");  // once too often: stays at zero
  EXPECT_FALSE(admission.admitDurable("alice"));
  EXPECT_TRUE(admission.admitDurable("alice").has_value());
  EXPECT_EQ(admission.refusals().durable, 2u);
}

TEST(AmqpAdmissionTest, ZeroDurableRefusesEveryOne) {
  AmqpLimits limits = small();
  limits.max_durable = 0;
  AmqpAdmission admission(limits);
  EXPECT_TRUE(contains(admission.admitDurable("alice"), "max-durable=0"));
}

// An authenticated user's connections share the per-user limits; the
// anonymous client counts as a user per connection (the per-connection
// limits alone).
TEST(AmqpAdmissionTest, CountsSessionsAndLinksPerUserOverItsConnections) {
  AmqpLimits limits = small();
  limits.max_connections = 4;
  limits.max_user_sessions = 3;
  limits.max_user_links = 4;
  AmqpAdmission admission(limits);
  ASSERT_FALSE(admission.admitConnection(1, "alice"));
  ASSERT_FALSE(admission.admitConnection(2, "alice"));
  ASSERT_FALSE(admission.admitConnection(3, "bob"));
  ASSERT_FALSE(admission.admitConnection(4));
  EXPECT_FALSE(admission.admitSession(1));
  EXPECT_FALSE(admission.admitSession(1));
  EXPECT_FALSE(admission.admitSession(2));
  EXPECT_EQ(admission.admitSession(2),
            "too many sessions for this user (over its connections): max-user-sessions=3");
  EXPECT_FALSE(admission.admitSession(3));  // bob has his own
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(admission.admitLink(1));
  EXPECT_FALSE(admission.admitLink(2));
  EXPECT_TRUE(contains(admission.admitLink(2), "max-user-links=4"));
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(admission.admitLink(4));  // anonymous: max-links only
  EXPECT_TRUE(contains(admission.admitLink(4), "max-links=3"));
  // A user refusal takes nothing of the connection's count: once alice
  // closes a link elsewhere, connection 2 gets its second.
  admission.linkClosed(1);
  EXPECT_FALSE(admission.admitLink(2));
  // A closed connection gives its user back what it held.
  admission.connectionClosed(1);
  EXPECT_FALSE(admission.admitSession(2));
  EXPECT_FALSE(admission.admitLink(2));
  const AmqpRefusals refused = admission.refusals();
  EXPECT_EQ(refused.user_sessions, 1u);
  EXPECT_EQ(refused.user_links, 1u);
  EXPECT_EQ(refused.links, 1u);
}

// New names are charged to the connection and its user while they are
// held; a user's quota outlives its connections, as the names it paid for
// do, and gets them back when they are given back.
TEST(AmqpAdmissionTest, ChargesNamesToTheConnectionAndItsUser) {
  AmqpLimits limits = small();
  limits.max_connections = 4;
  limits.max_names = 2;
  limits.max_user_names = 3;
  AmqpAdmission admission(limits);
  ASSERT_FALSE(admission.admitConnection(1, "carol"));
  ASSERT_FALSE(admission.admitConnection(2));
  std::optional<NameHold> a = holdWireName("admission-test-a", admission.names(1).get());
  std::optional<NameHold> b = holdWireName("admission-test-b", admission.names(1).get());
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(holdWireName("admission-test-c", admission.names(1).get()));
  // Anonymous: its own quota.
  std::optional<NameHold> c = holdWireName("admission-test-c", admission.names(2).get());
  EXPECT_TRUE(c);
  admission.connectionClosed(1);
  EXPECT_EQ(admission.names(1), nullptr);
  ASSERT_FALSE(admission.admitConnection(3, "carol"));
  std::optional<NameHold> d = holdWireName("admission-test-d", admission.names(3).get());
  EXPECT_TRUE(d);
  EXPECT_FALSE(holdWireName("admission-test-e", admission.names(3).get()));  // carol's 3 spent
  const AmqpRefusals refused = admission.refusals();
  EXPECT_EQ(refused.names, 1u);
  EXPECT_EQ(refused.user_names, 1u);
  a.reset();  // what the closed connection held, given back: carol's again
  EXPECT_TRUE(holdWireName("admission-test-e", admission.names(3).get()));
}

// A user's connections share one budget of unsettled deliveries; the
// anonymous client has none beyond its connection's.
TEST(AmqpAdmissionTest, AUsersConnectionsShareItsUnsettledBudget) {
  AmqpLimits limits = small();
  limits.max_connections = 4;
  limits.max_user_unsettled = 3;
  limits.max_user_bytes_in_flight = 1000;
  AmqpAdmission admission(limits);
  ASSERT_FALSE(admission.admitConnection(1, "dave"));
  ASSERT_FALSE(admission.admitConnection(2, "dave"));
  ASSERT_FALSE(admission.admitConnection(3));
  ASSERT_NE(admission.userUnsettled(1), nullptr);
  EXPECT_EQ(admission.userUnsettled(1), admission.userUnsettled(2));
  EXPECT_EQ(admission.userUnsettled(3), nullptr);
  EXPECT_EQ(admission.userUnsettled(9), nullptr);  // not open
  EXPECT_FALSE(admission.userUnsettled(1)->hold(10));
  EXPECT_FALSE(admission.userUnsettled(2)->hold(10));
  EXPECT_EQ(admission.userUnsettled(2)->deliveries(), 2u);
  // What a closed connection held is settled by its handler as it goes, so
  // the budget outlives the connection, as the user's names quota does.
  admission.connectionClosed(1);
  admission.connectionClosed(2);
  ASSERT_FALSE(admission.admitConnection(4, "dave"));
  EXPECT_EQ(admission.userUnsettled(4)->deliveries(), 2u);
}

TEST(AmqpAdmissionTest, RefusesMessagesLargerThanTheLimitOnly) {
  AmqpLimits limits = small();
  limits.max_message_size = 100;
  AmqpAdmission admission(limits);
  EXPECT_FALSE(admission.admitMessage(0));
  EXPECT_FALSE(admission.admitMessage(100));
  const std::optional<std::string> refusal = admission.admitMessage(101);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(*refusal, "message of 101 bytes exceeds max-message-size=100");
  EXPECT_EQ(admission.refusals().messages_too_large, 1u);
}

}  // namespace
}  // namespace cepbus::services::amqp
