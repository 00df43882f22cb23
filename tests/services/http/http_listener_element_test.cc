#include "services/http/http_listener_element.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "services/http/http_listener_config.h"
#include "tests/testing/descriptor_errors.h"

namespace cepbus::services::http {
namespace {

using ::testing::ElementsAre;

// The descriptor with HttpListenerElement's element alone; errorsOf(): what its parse reports.
constexpr auto parse = [](auto&&... args) {
  return testing::parseWithElement<HttpListenerElement>(std::forward<decltype(args)>(args)...);
};
constexpr auto errorsOf = testing::elementErrors<HttpListenerElement>;

TEST(HttpListenerElementTest, ReadsWhereItListensItsTokenAndItsLimits) {
  auto result = parse(R"(<cepbus name="t"><listeners>
<http host="::1" port="8080" token-env="CEPBUS_ADMIN_TOKEN" max-connections="7"
      max-ws-clients="0" request-timeout="1500" max-names="12"/>
</listeners></cepbus>)");
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  const HttpListenerConfig* http = result->element<HttpListenerConfig>();
  ASSERT_NE(http, nullptr);
  EXPECT_EQ(http->host, "::1");
  EXPECT_EQ(http->port, 8080);
  EXPECT_EQ(http->token_env, "CEPBUS_ADMIN_TOKEN");
  EXPECT_EQ(http->max_connections, 7u);
  EXPECT_EQ(http->max_ws_clients, 0u);
  EXPECT_EQ(http->request_timeout_ms, 1500u);
  EXPECT_EQ(http->max_names, 12u);
  EXPECT_EQ(http->where.toString(), "t.xml:2");
}

TEST(HttpListenerElementTest, AbsentAttributesLeaveTheListenersDefaults) {
  auto result = parse(R"(<cepbus name="t"><listeners><http port="0"/></listeners></cepbus>)");
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  const HttpListenerConfig& http = *result->element<HttpListenerConfig>();
  EXPECT_EQ(http.host, "127.0.0.1");
  EXPECT_EQ(http.port, 0);
  EXPECT_EQ(http.token_env, "");
  EXPECT_FALSE(http.max_connections.has_value());
  EXPECT_FALSE(http.request_timeout_ms.has_value());
  EXPECT_FALSE(http.max_names.has_value());
}

TEST(HttpListenerElementErrorTest, EachBadAttributeIsNamedWithItsLine) {
  EXPECT_THAT(errorsOf(R"(<cepbus name="t"><listeners>
<http host="256.1.1.1" port="-1" token-env="1TOKEN"/>
</listeners></cepbus>)"),
              ElementsAre("t.xml:2: <http>: attribute \"host\" must be a host name or an IP "
                          "address, got \"256.1.1.1\"",
                          "t.xml:2: <http>: attribute \"port\" must be a non-negative integer, got "
                          "\"-1\"",
                          "t.xml:2: <http>: attribute \"token-env\" must be an environment "
                          "variable name (letters, digits and '_', not starting with a digit), "
                          "got \"1TOKEN\""));
  EXPECT_THAT(errorsOf(R"(<cepbus name="t"><listeners>
<http max-connections="0" request-timeout="soon" tls="yes"/>
</listeners></cepbus>)"),
              ElementsAre("t.xml:2: <http>: unknown attribute \"tls\"; expected one of \"host\", "
                          "\"port\", \"token-env\", \"max-connections\", \"max-ws-clients\", "
                          "\"request-timeout\", \"max-names\"",
                          "t.xml:2: <http>: attribute \"max-connections\" must be between 1 and "
                          "1073741824, got \"0\"",
                          "t.xml:2: <http>: attribute \"request-timeout\" must be a positive "
                          "integer, got \"soon\""));
}

}  // namespace
}  // namespace cepbus::services::http
