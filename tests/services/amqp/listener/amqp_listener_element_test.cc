#include "services/amqp/listener/amqp_listener_element.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "services/protocols/amqp/listener_config.h"
#include "tests/testing/descriptor_errors.h"

namespace cepbus::services::amqp {
namespace {

using ::testing::ElementsAre;

// The descriptor with AmqpListenerElement's element alone; errorsOf(): what its parse reports.
constexpr auto parse = [](auto&&... args) {
  return testing::parseWithElement<AmqpListenerElement>(std::forward<decltype(args)>(args)...);
};
constexpr auto errorsOf = testing::elementErrors<AmqpListenerElement>;

TEST(AmqpListenerElementErrorTest, BadListeners) {
  EXPECT_THAT(errorsOf(R"(<cepbus name="t"><listeners>
<amqp host="local host" port="70000" allow-anonymous="yes"/>
</listeners></cepbus>)"),
              ElementsAre("t.xml:2: <amqp>: attribute \"host\" must be a host name or an IP "
                          "address, got \"local host\"",
                          "t.xml:2: <amqp>: attribute \"port\" must be between 0 and 65535, got "
                          "\"70000\"",
                          "t.xml:2: <amqp>: attribute \"allow-anonymous\" must be true or false, "
                          "got \"yes\""));
  for (const char* host : {"localhost", "0.0.0.0", "bus-1.example.org", "[::1]", "fe80::1"}) {
    auto result = parse("<cepbus name=\"t\"><listeners><amqp host=\"" + std::string(host) +
                            "\"/></listeners></cepbus>",
                        "t.xml");
    EXPECT_TRUE(result.isOk()) << host << ": " << result.status().toString();
  }
  for (const char* host : {"-bus", "1.2.3", "a..b", "bus_1", "x:y"}) {
    EXPECT_EQ(errorsOf("<cepbus name=\"t\"><listeners><amqp host=\"" + std::string(host) +
                       "\"/></listeners></cepbus>")
                  .size(),
              1u)
        << host;
  }
}

TEST(AmqpListenerElementTest, AmqpFlowControlAttributes) {
  auto result = parse(R"(<cepbus name="t"><listeners>
<amqp credit-window="64" subscriber-buffer="5000" durable-buffer="0" request-timeout="2500"
      subscriber-stall-timeout="300" subscriber-return-timeout="0" threads="3"/>
</listeners></cepbus>)",
                      "t.xml");
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  const AmqpListenerConfig& amqp = *result->element<AmqpListenerConfig>();
  EXPECT_EQ(amqp.threads, 3u);
  EXPECT_EQ(amqp.credit_window, 64u);
  EXPECT_EQ(amqp.subscriber_buffer, 5000u);
  EXPECT_EQ(amqp.durable_buffer, 0u);
  EXPECT_EQ(amqp.request_timeout_ms, 2500u);
  EXPECT_EQ(amqp.subscriber_stall_timeout_ms, 300u);
  EXPECT_EQ(amqp.subscriber_return_timeout_ms, 0u);
  // Absent: the listener's defaults apply.
  auto plain = parse(R"(<cepbus name="t"><listeners><amqp/></listeners></cepbus>)", "t.xml");
  ASSERT_TRUE(plain.isOk()) << plain.status().toString();
  EXPECT_FALSE(plain->element<AmqpListenerConfig>()->credit_window.has_value());
  EXPECT_FALSE(plain->element<AmqpListenerConfig>()->subscriber_buffer.has_value());
  EXPECT_FALSE(plain->element<AmqpListenerConfig>()->durable_buffer.has_value());
  EXPECT_FALSE(plain->element<AmqpListenerConfig>()->request_timeout_ms.has_value());
  EXPECT_FALSE(plain->element<AmqpListenerConfig>()->subscriber_stall_timeout_ms.has_value());
  EXPECT_FALSE(plain->element<AmqpListenerConfig>()->subscriber_return_timeout_ms.has_value());
  EXPECT_FALSE(plain->element<AmqpListenerConfig>()->threads.has_value());
}

TEST(AmqpListenerElementTest, ListenerLimitAttributes) {
  auto result = parse(R"(<cepbus name="t"><listeners>
<amqp max-connections="10" max-sessions="2" max-links="20" max-durable="0"
      max-pending-requests="5" max-message-size="4096" handshake-timeout="0"
      max-user-sessions="3" max-user-links="30" max-names="0" max-user-names="50"
      max-unsettled="7" max-bytes-in-flight="65536" max-user-unsettled="9"
      max-user-bytes-in-flight="131072"/>
</listeners></cepbus>)",
                      "t.xml");
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  const AmqpListenerConfig& amqp = *result->element<AmqpListenerConfig>();
  EXPECT_EQ(amqp.max_connections, 10u);
  EXPECT_EQ(amqp.max_sessions, 2u);
  EXPECT_EQ(amqp.max_links, 20u);
  EXPECT_EQ(amqp.max_durable, 0u);
  EXPECT_EQ(amqp.max_pending_requests, 5u);
  EXPECT_EQ(amqp.max_message_size, 4096u);
  EXPECT_EQ(amqp.handshake_timeout_ms, 0u);  // no deadline
  EXPECT_EQ(amqp.max_user_sessions, 3u);
  EXPECT_EQ(amqp.max_user_links, 30u);
  EXPECT_EQ(amqp.max_names, 0u);  // known names only
  EXPECT_EQ(amqp.max_user_names, 50u);
  EXPECT_EQ(amqp.max_unsettled, 7u);
  EXPECT_EQ(amqp.max_bytes_in_flight, 65536u);
  EXPECT_EQ(amqp.max_user_unsettled, 9u);
  EXPECT_EQ(amqp.max_user_bytes_in_flight, 131072u);
  auto plain = parse(R"(<cepbus name="t"><listeners><amqp/></listeners></cepbus>)", "t.xml");
  ASSERT_TRUE(plain.isOk()) << plain.status().toString();
  EXPECT_FALSE(plain->element<AmqpListenerConfig>()->max_links.has_value());
  EXPECT_FALSE(plain->element<AmqpListenerConfig>()->max_message_size.has_value());
  EXPECT_FALSE(plain->element<AmqpListenerConfig>()->handshake_timeout_ms.has_value());
  EXPECT_FALSE(plain->element<AmqpListenerConfig>()->max_names.has_value());
  EXPECT_FALSE(plain->element<AmqpListenerConfig>()->max_unsettled.has_value());
  EXPECT_FALSE(plain->element<AmqpListenerConfig>()->max_user_unsettled.has_value());
}

TEST(AmqpListenerElementErrorTest, BadListenerLimitAttributes) {
  EXPECT_THAT(errorsOf(R"(<cepbus name="t"><listeners>
<amqp max-links="0" max-message-size="0" handshake-timeout="-1"/>
</listeners></cepbus>)"),
              ElementsAre("t.xml:2: <amqp>: attribute \"handshake-timeout\" must be a "
                          "non-negative integer, got \"-1\"",
                          "t.xml:2: <amqp>: attribute \"max-links\" must be between 1 and "
                          "1073741824, got \"0\"",
                          "t.xml:2: <amqp>: attribute \"max-message-size\" must be between 1 and "
                          "1073741824, got \"0\""));
}

TEST(AmqpListenerElementErrorTest, BadAmqpFlowControlAttributes) {
  EXPECT_THAT(errorsOf(R"(<cepbus name="t"><listeners>
<amqp credit-window="0" subscriber-buffer="many"
      durable-buffer="-3" request-timeout="0" subscriber-stall-timeout="1.5"/>
</listeners></cepbus>)"),
              ElementsAre("t.xml:2: <amqp>: attribute \"credit-window\" must be between 1 and "
                          "1000000, got \"0\"",
                          "t.xml:2: <amqp>: attribute \"subscriber-buffer\" must be a positive "
                          "integer, got \"many\"",
                          "t.xml:3: <amqp>: attribute \"durable-buffer\" must be a non-negative "
                          "integer, got \"-3\"",
                          "t.xml:3: <amqp>: attribute \"request-timeout\" must be between 1 and "
                          "86400000, got \"0\"",
                          "t.xml:3: <amqp>: attribute \"subscriber-stall-timeout\" must be a "
                          "positive integer, got \"1.5\""));
  EXPECT_THAT(errorsOf(R"(<cepbus name="t"><listeners>
<amqp credit-window="2000000"/>
</listeners></cepbus>)"),
              ElementsAre("t.xml:2: <amqp>: attribute \"credit-window\" must be between 1 and "
                          "1000000, got \"2000000\""));
  EXPECT_THAT(errorsOf(R"(<cepbus name="t"><listeners>
<amqp threads="0"/>
</listeners></cepbus>)"),
              ElementsAre("t.xml:2: <amqp>: attribute \"threads\" must be between 1 and "
                          "256, got \"0\""));
}

TEST(AmqpListenerElementTest, AmqpSecurity) {
  const std::string hash =
      "pbkdf2-sha256:200000:00112233445566778899aabbccddeeff:"
      "588372775fb38b5711b6f36b465e293dc7b793e008550ee8a10bb26a8e7f85b8";
  auto result = parse(R"(<cepbus name="t">
<listeners>
  <amqp host="0.0.0.0" port="5671">
    <tls cert="tls/cert.pem" key="/etc/cepbus/key.pem"/>
    <user name="alice" password-hash=")" +
                          hash +
                          R"(">
      <permit publish="orders.#" subscribe="alerts.*"/>
      <permit subscribe="orders.eu"/>
    </user>
    <user name="bob" password-hash=")" +
                          hash +
                          R"("/>
  </amqp>
</listeners>
</cepbus>)",
                      "t.xml", nullptr, "/srv/bus");
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  const AmqpListenerConfig& amqp = *result->element<AmqpListenerConfig>();
  EXPECT_FALSE(amqp.allow_anonymous);
  ASSERT_TRUE(amqp.tls.has_value());
  EXPECT_EQ(amqp.tls->cert, std::filesystem::path("/srv/bus/tls/cert.pem"));
  EXPECT_EQ(amqp.tls->key, std::filesystem::path("/etc/cepbus/key.pem"));
  EXPECT_EQ(amqp.tls->where.line, 4);
  ASSERT_EQ(amqp.users.size(), 2u);
  const AmqpUser* alice = amqp.user("alice");
  ASSERT_NE(alice, nullptr);
  EXPECT_EQ(alice->password_hash, hash);
  EXPECT_EQ(alice->where.line, 5);
  ASSERT_EQ(alice->permits.size(), 2u);
  EXPECT_EQ(alice->permits[0].publish, "orders.#");
  EXPECT_EQ(alice->permits[0].subscribe, "alerts.*");
  EXPECT_EQ(alice->permits[1].publish, "");
  EXPECT_EQ(alice->permits[1].subscribe, "orders.eu");
  EXPECT_EQ(alice->permits[1].where.line, 7);
  EXPECT_TRUE(amqp.user("bob")->permits.empty());
  EXPECT_EQ(amqp.user("carol"), nullptr);
}

TEST(AmqpListenerElementErrorTest, BadAmqpSecurity) {
  const std::string hash =
      "pbkdf2-sha256:200000:00112233445566778899aabbccddeeff:"
      "588372775fb38b5711b6f36b465e293dc7b793e008550ee8a10bb26a8e7f85b8";
  EXPECT_THAT(
      errorsOf(R"(<cepbus name="t"><listeners><amqp>
<tls cert="c.pem"/>
<user name="alice" password="secret"/>
<user name="bob" password-hash="sha1:abc"/>
<user name="carol" password-hash=")" +
               hash + R"(">
  <permit/>
  <permit publish="orders.#x" subscribe="a..b"/>
</user>
<user name="carol" password-hash=")" +
               hash + R"("/>
<tls cert="c.pem" key="k.pem"/>
</amqp></listeners></cepbus>)"),
      ElementsAre(
          "t.xml:2: <tls>: missing required attribute \"key\"",
          "t.xml:3: <user name=\"alice\">: unknown attribute \"password\"; expected one of "
          "\"name\", \"password-hash\"",
          "t.xml:3: <user name=\"alice\">: missing required attribute \"password-hash\"",
          "t.xml:4: <user name=\"bob\">: attribute \"password-hash\" must be "
          "\"pbkdf2-sha256:<iterations>:<salt hex>:<hash hex>\" (a salted hash, never the "
          "password itself; see `cepbus-amqp-passwd`), got \"sha1:abc\"",
          "t.xml:6: <permit>: needs a \"publish\" or a \"subscribe\" pattern (or both)",
          "t.xml:7: <permit>: attribute \"publish\" is not a valid address "
          "\"orders.#x\": segment 2 \"#x\" mixes the wildcard \'#\' with other characters; a "
          "wildcard is a whole segment",
          "t.xml:7: <permit>: attribute \"subscribe\" is not a valid address \"a..b\": "
          "segment 2 is empty",
          "t.xml:9: <user name=\"carol\">: duplicate user \"carol\" (first at line 5)",
          "t.xml:10: <tls> appears twice in <amqp> (first at line 2)"));
}

}  // namespace
}  // namespace cepbus::services::amqp
