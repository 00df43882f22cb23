#include "services/protocols/amqp/access_control.h"

#include <gtest/gtest.h>

#include "services/protocols/amqp/listener_config.h"
#include "services/protocols/amqp/password_hash.h"

namespace cepbus::services::amqp {
namespace {

TEST(PasswordHashTest, VerifiesOnlyTheRightPasswordAndIsSalted) {
  auto a = hashPassword("s3cret", kMinPasswordIterations);
  auto b = hashPassword("s3cret", kMinPasswordIterations);
  ASSERT_TRUE(a.isOk() && b.isOk());
  EXPECT_NE(*a, *b);  // a fresh salt each time
  EXPECT_EQ(a->rfind("pbkdf2-sha256:1000:", 0), 0u) << *a;
  EXPECT_TRUE(verifyPassword("s3cret", *a));
  EXPECT_TRUE(verifyPassword("s3cret", *b));
  EXPECT_FALSE(verifyPassword("s3cret ", *a));
  EXPECT_FALSE(verifyPassword("", *a));
  EXPECT_EQ(hashPassword("x", 10).status().code(), Status::Code::kInvalidArgument);
}

TEST(PasswordHashTest, MatchesTheOpenSslCommandLineDerivation) {
  // openssl kdf -keylen 32 -kdfopt digest:SHA256 -kdfopt pass:secret
  //   -kdfopt hexsalt:00112233445566778899aabbccddeeff -kdfopt iter:1000 PBKDF2
  const std::string compact =
      "pbkdf2-sha256:1000:00112233445566778899aabbccddeeff:"
      "588372775fb38b5711b6f36b465e293dc7b793e008550ee8a10bb26a8e7f85b8";
  EXPECT_TRUE(verifyPassword("secret", compact));
  EXPECT_FALSE(verifyPassword("Secret", compact));
}

TEST(PasswordHashTest, MalformedHashesNeverVerify) {
  for (const char* bad :
       {"", "secret", "pbkdf2-sha256:1000:0011:zz", "pbkdf2-sha1:1000:0011:0011",
        "pbkdf2-sha256:10:00112233445566778899aabbccddeeff:00", "pbkdf2-sha256:1000:abc:def"}) {
    EXPECT_FALSE(verifyPassword("secret", bad)) << bad;
  }
}

TEST(PatternCoversTest, ASubscriptionIsAllowedOnlyWithinThePermit) {
  EXPECT_TRUE(patternCovers("#", "a.b"));
  EXPECT_TRUE(patternCovers("#", "#"));
  EXPECT_TRUE(patternCovers("orders.#", "orders"));
  EXPECT_TRUE(patternCovers("orders.#", "orders.eu.*"));
  EXPECT_TRUE(patternCovers("orders.#", "orders.#"));
  EXPECT_TRUE(patternCovers("orders.*", "orders.eu"));
  EXPECT_TRUE(patternCovers("orders.*", "orders.*"));
  EXPECT_TRUE(patternCovers("a.#.z", "a.b.#.z"));
  EXPECT_FALSE(patternCovers("orders.#", "#"));
  EXPECT_FALSE(patternCovers("orders.*", "orders.#"));
  EXPECT_FALSE(patternCovers("orders.*", "orders.eu.x"));
  EXPECT_FALSE(patternCovers("orders.eu", "orders.*"));
  EXPECT_FALSE(patternCovers("alerts.*", "alerts.#"));
  EXPECT_FALSE(patternCovers("a.#.z", "a.#"));
}

services::amqp::AmqpListenerConfig listener(bool anonymous, const std::string& host = "127.0.0.1") {
  services::amqp::AmqpListenerConfig l;
  l.host = host;
  l.allow_anonymous = anonymous;
  services::amqp::AmqpUser alice;
  alice.name = "alice";
  alice.password_hash = *hashPassword("pw", kMinPasswordIterations);
  alice.permits.push_back({"orders.#", "", {}});
  alice.permits.push_back({"", "alerts.*", {}});
  l.users.push_back(alice);
  return l;
}

TEST(AccessControlTest, AuthenticatesDeclaredUsersOnly) {
  AccessControl access(listener(false));
  EXPECT_TRUE(access.authenticate("alice", "pw"));
  EXPECT_FALSE(access.authenticate("alice", "PW"));
  EXPECT_FALSE(access.authenticate("bob", "pw"));
  EXPECT_FALSE(access.authenticate("", ""));
}

TEST(AccessControlTest, PermitsArePerUserAndPerDirection) {
  AccessControl access(listener(false));
  EXPECT_TRUE(access.mayPublish("alice", "orders.eu"));
  EXPECT_FALSE(access.mayPublish("alice", "alerts.fire"));  // subscribe-only permit
  EXPECT_TRUE(access.maySubscribe("alice", "alerts.fire"));
  EXPECT_FALSE(access.maySubscribe("alice", "orders.eu"));  // publish-only permit
  EXPECT_FALSE(access.maySubscribe("alice", "alerts.#"));
  EXPECT_FALSE(access.mayPublish("bob", "orders.eu"));
  EXPECT_FALSE(access.mayPublish("", "orders.eu"));  // anonymous, not allowed
  AccessControl dev(listener(true));
  EXPECT_TRUE(dev.mayPublish("", "anything.at.all"));
  EXPECT_TRUE(dev.maySubscribe("", "#"));
  EXPECT_FALSE(dev.mayPublish("alice", "alerts.fire"));  // a user keeps their permits
}

TEST(AccessControlTest, PlainIsOfferedInClearOnlyOnLoopback) {
  EXPECT_EQ(AccessControl(listener(false)).mechanisms(false), "PLAIN");
  EXPECT_EQ(AccessControl(listener(true)).mechanisms(false), "PLAIN ANONYMOUS");
  EXPECT_EQ(AccessControl(listener(false, "0.0.0.0")).mechanisms(false), "");
  EXPECT_EQ(AccessControl(listener(false, "0.0.0.0")).mechanisms(true), "PLAIN");
  EXPECT_EQ(AccessControl(listener(true, "bus.example.org")).mechanisms(false), "ANONYMOUS");
  services::amqp::AmqpListenerConfig none;
  EXPECT_EQ(AccessControl(none).mechanisms(true), "");
}

}  // namespace
}  // namespace cepbus::services::amqp
