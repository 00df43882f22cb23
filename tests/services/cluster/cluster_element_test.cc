#include "services/cluster/cluster_element.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "services/cluster/cluster_spec.h"
#include "tests/testing/descriptor_errors.h"

namespace cepbus::services::cluster {
namespace {

using ::testing::ElementsAre;

// The descriptor with ClusterElement's element alone; errorsOf(): what its parse reports.
constexpr auto parse = [](auto&&... args) {
  return testing::parseWithElement<ClusterElement>(std::forward<decltype(args)>(args)...);
};
constexpr auto errorsOf = testing::elementErrors<ClusterElement>;

TEST(ClusterElementTest, ClusterElementParsesIntoTheModel) {
  auto result = parse(R"(<cepbus name="n1">
  <cluster name="trades" node="n1" partitions="12" key="price, symbol" heartbeat="300"
           idle-timeout="2000" max-unsettled="500" max-delay="5">
    <broker host="127.0.0.1" port="5673" management-port="15673"/>
    <broker port="5674"/>
    <query name="q" engine="nfa" output="equal"><text>PATTERN SEQ(A a, B b) WITHIN 10</text></query>
  </cluster>
</cepbus>
)",
                      "t.xml");
  ASSERT_TRUE(result.isOk()) << result.status().message();
  ASSERT_NE(result->element<ClusterSpec>(), nullptr);
  const ClusterSpec& c = *result->element<ClusterSpec>();
  EXPECT_EQ(c.name, "trades");
  EXPECT_EQ(c.node, "n1");
  EXPECT_EQ(c.partitions, 12u);
  EXPECT_EQ(c.key, (std::vector<std::string>{"price", "symbol"}));
  EXPECT_EQ(c.user, "guest");
  EXPECT_EQ(c.heartbeat_ms, 300u);
  EXPECT_EQ(c.idle_timeout_ms, 2000u);
  EXPECT_EQ(c.max_unsettled, 500u);
  EXPECT_EQ(c.max_delay, 5);
  ASSERT_EQ(c.brokers.size(), 2u);
  EXPECT_EQ(c.brokers[0].port, 5673);
  EXPECT_EQ(c.brokers[0].management_port, 15673);
  EXPECT_EQ(c.brokers[1].host, "127.0.0.1");
  EXPECT_EQ(c.brokers[1].management_port, 15672);
  ASSERT_EQ(c.queries.size(), 1u);
  EXPECT_EQ(c.queries[0].output, "equal");
  EXPECT_TRUE(c.queries[0].inputs.empty());
  EXPECT_EQ(c.queries[0].text_where.line, 6);
}

TEST(ClusterElementErrorTest, ClusterErrorsNameTheLineAndWhatToDo) {
  const auto errors = errorsOf(R"(<cepbus name="n1">
<cluster name="trades" node="n1" key="price" user="ops" heartbeat="1000" idle-timeout="1500">
<broker host="10.1.2.3"/>
<query name="q" engine="nfa" input="x" output="y"><text>PATTERN A a WITHIN 1</text></query>
</cluster>
</cepbus>
)");
  ASSERT_EQ(errors.size(), 5u) << ::testing::PrintToString(errors);
  EXPECT_EQ(errors[0],
            "t.xml:2: <cluster name=\"trades\">: missing required attribute \"partitions\"");
  EXPECT_NE(errors[1].find("user \"ops\" needs \"password-env\""), std::string::npos) << errors[1];
  EXPECT_NE(errors[2].find("must be at least twice \"heartbeat\""), std::string::npos) << errors[2];
  EXPECT_EQ(errors[3],
            "t.xml:3: <broker> host \"10.1.2.3\" is not a loopback host: add <tls ca=...> to the "
            "<cluster> (SASL PLAIN would send the password in clear)");
  EXPECT_NE(errors[4].find("t.xml:4:"), std::string::npos) << errors[4];
  EXPECT_NE(errors[4].find("\"input\""), std::string::npos) << errors[4];
}

TEST(ClusterElementTest, SlackIsASynonymOfMaxDelay) {
  auto result = parse(R"(<cepbus name="n1">
  <cluster name="trades" node="n1" partitions="2" key="k" slack="7">
    <broker port="5672"/>
    <query name="q" engine="nfa" output="o"><text>PATTERN SEQ(A a, B b) WITHIN 10</text></query>
  </cluster>
</cepbus>
)",
                      "t.xml");
  ASSERT_TRUE(result.isOk()) << result.status().message();
  EXPECT_EQ(result->element<ClusterSpec>()->max_delay, 7);
}

TEST(ClusterElementErrorTest, MaxDelayAndSlackTogetherAreRefused) {
  const auto errors = errorsOf(R"(<cepbus name="n1">
<cluster name="trades" node="n1" partitions="2" key="k" max-delay="5" slack="5">
<broker port="5672"/>
<query name="q" engine="nfa" output="o"><text>PATTERN A a WITHIN 1</text></query>
</cluster>
</cepbus>
)");
  EXPECT_THAT(errors,
              ElementsAre("t.xml:2: <cluster name=\"trades\">: attributes \"max-delay\" and "
                          "\"slack\": give one (slack is a synonym of max-delay)"));
}

// The partition's event time: the unit of its events' ts, which its queries
// inherit (a query may repeat it), and how long it waits when quiet.
TEST(ClusterElementTest, TimeUnitAndSourceIdleTimeoutSetThePartitionsEventTime) {
  auto result = parse(R"(<cepbus name="n1">
  <cluster name="trades" node="n1" partitions="2" key="k" time-unit="ms"
           source-idle-timeout="1500">
    <broker port="5672"/>
    <query name="q" engine="nfa" output="o"><text>PATTERN SEQ(A a, B b) WITHIN 2 s</text></query>
    <query name="r" engine="nfa" output="o" time-unit="ms"><text>PATTERN A a</text></query>
  </cluster>
</cepbus>
)",
                      "t.xml");
  ASSERT_TRUE(result.isOk()) << result.status().message();
  const ClusterSpec& c = *result->element<ClusterSpec>();
  EXPECT_EQ(c.ts_unit, pattern::TimeUnit::kMilliseconds);
  EXPECT_EQ(c.source_idle_timeout_ms, 1500u);
  ASSERT_EQ(c.queries.size(), 2u);
  EXPECT_EQ(c.queries[0].ts_unit, pattern::TimeUnit::kMilliseconds);
  EXPECT_EQ(c.queries[1].ts_unit, pattern::TimeUnit::kMilliseconds);

  auto plain = parse(R"(<cepbus name="n1">
  <cluster name="trades" node="n1" partitions="2" key="k">
    <broker port="5672"/>
    <query name="q" engine="nfa" output="o"><text>PATTERN A a</text></query>
  </cluster>
</cepbus>
)",
                     "t.xml");
  ASSERT_TRUE(plain.isOk()) << plain.status().message();
  EXPECT_EQ(plain->element<ClusterSpec>()->ts_unit, pattern::TimeUnit::kNone);
  EXPECT_EQ(plain->element<ClusterSpec>()->source_idle_timeout_ms, 2000u)
      << "the bus's default idle_timeout";
}

TEST(ClusterElementErrorTest, TimeUnitAndSourceIdleTimeoutAreChecked) {
  const auto errors = errorsOf(R"(<cepbus name="n1">
<cluster name="trades" node="n1" partitions="2" key="k" time-unit="min"
 source-idle-timeout="0">
<broker port="5672"/>
<query name="q" engine="nfa" output="o"><text>PATTERN A a WITHIN 1</text></query>
</cluster>
</cepbus>
)");
  ASSERT_EQ(errors.size(), 2u) << ::testing::PrintToString(errors);
  EXPECT_NE(errors[0].find("\"time-unit\" must be us, ms or s"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("\"source-idle-timeout\""), std::string::npos) << errors[1];

  const auto mismatch = errorsOf(R"(<cepbus name="n1">
<cluster name="trades" node="n1" partitions="2" key="k" time-unit="ms">
<broker port="5672"/>
<query name="q" engine="nfa" output="o" time-unit="s"><text>PATTERN A a WITHIN 1</text></query>
</cluster>
</cepbus>
)");
  ASSERT_EQ(mismatch.size(), 1u) << ::testing::PrintToString(mismatch);
  EXPECT_NE(mismatch[0].find("t.xml:4:"), std::string::npos) << mismatch[0];
  EXPECT_NE(mismatch[0].find("differs from the <cluster>'s \"ms\""), std::string::npos)
      << mismatch[0];
}

TEST(ClusterElementTest, ClusterTlsAllowsRemoteBrokersAndResolvesTheCa) {
  auto result = parse(R"(<cepbus name="n1">
  <cluster name="trades" node="n1" partitions="2" key="k">
    <broker host="rabbit-1.example" port="5671" management-port="15671"/>
    <tls ca="certs/ca.pem" peer-name="rabbit.example"/>
    <query name="q" engine="nfa" output="o"><text>PATTERN SEQ(A a, B b) WITHIN 10</text></query>
  </cluster>
</cepbus>
)",
                      "t.xml", nullptr, "/etc/cepbus");
  ASSERT_TRUE(result.isOk()) << result.status().message();
  const ClusterSpec& c = *result->element<ClusterSpec>();
  ASSERT_TRUE(c.tls.has_value());
  EXPECT_EQ(c.tls->ca, std::filesystem::path("/etc/cepbus/certs/ca.pem"));
  EXPECT_EQ(c.tls->peer_name, "rabbit.example");
  EXPECT_EQ(c.tls->where.line, 4);
  EXPECT_EQ(c.brokers[0].host, "rabbit-1.example");
}

TEST(ClusterElementErrorTest, ClusterTlsNeedsItsCaAndComesOnce) {
  const auto errors = errorsOf(R"(<cepbus name="n1">
<cluster name="trades" node="n1" partitions="2" key="k">
<broker port="5671"/>
<tls peer-name="x"/>
<tls ca="ca.pem"/>
<query name="q" engine="nfa" output="o"><text>PATTERN A a WITHIN 1</text></query>
</cluster>
</cepbus>
)");
  ASSERT_EQ(errors.size(), 2u) << ::testing::PrintToString(errors);
  EXPECT_NE(errors[0].find("t.xml:4:"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("\"ca\""), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("t.xml:5:"), std::string::npos) << errors[1];
  EXPECT_NE(errors[1].find("tls"), std::string::npos) << errors[1];
}

TEST(ClusterElementTest, ClusterIngressTakesItsListenerAndBatchLimits) {
  auto result = parse(R"(<cepbus name="n1">
  <cluster name="trades" node="n1" partitions="2" key="k">
    <broker port="5672"/>
    <ingress port="5690" linger-ms="0" batch-events="64" batch-bytes="4096"
             max-held-events="1000" credit="50"/>
    <query name="q" engine="nfa" output="o"><text>PATTERN SEQ(A a, B b) WITHIN 10</text></query>
  </cluster>
</cepbus>
)",
                      "t.xml");
  ASSERT_TRUE(result.isOk()) << result.status().message();
  const ClusterSpec& c = *result->element<ClusterSpec>();
  ASSERT_TRUE(c.ingress.has_value());
  EXPECT_EQ(c.ingress->host, "127.0.0.1");
  EXPECT_EQ(c.ingress->port, 5690);
  EXPECT_EQ(c.ingress->linger_ms, 0u);
  EXPECT_EQ(c.ingress->batch_events, 64u);
  EXPECT_EQ(c.ingress->batch_bytes, 4096u);
  EXPECT_EQ(c.ingress->max_held_events, 1000u);
  EXPECT_EQ(c.ingress->credit, 50u);
  EXPECT_EQ(c.ingress->where.line, 4);
}

TEST(ClusterElementErrorTest, ClusterIngressNeedsAPortAndBatchesOfOneEventOrMore) {
  const auto errors = errorsOf(R"(<cepbus name="n1">
<cluster name="trades" node="n1" partitions="2" key="k">
<broker port="5672"/>
<ingress batch-events="0"/>
<query name="q" engine="nfa" output="o"><text>PATTERN A a WITHIN 1</text></query>
</cluster>
</cepbus>
)");
  ASSERT_EQ(errors.size(), 2u) << ::testing::PrintToString(errors);
  EXPECT_NE(errors[0].find("t.xml:4:"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("\"port\""), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("\"batch-events\""), std::string::npos) << errors[1];
}

TEST(ClusterElementTest, ClusterOutputTakesItsBatchLimitsWithDefaults) {
  const char* kText = R"(<cepbus name="n1">
  <cluster name="trades" node="n1" partitions="2" key="k">
    <broker port="5672"/>
    %s
    <query name="q" engine="nfa" output="o"><text>PATTERN SEQ(A a, B b) WITHIN 10</text></query>
  </cluster>
</cepbus>
)";
  auto with = [&](const std::string& output) {
    std::string text = kText;
    text.replace(text.find("%s"), 2, output);
    return parse(text, "t.xml");
  };
  auto defaults = with("");
  ASSERT_TRUE(defaults.isOk()) << defaults.status().message();
  const ClusterOutputSpec& d = defaults->element<ClusterSpec>()->output;
  EXPECT_EQ(d.batch_events, 256u);
  EXPECT_EQ(d.batch_bytes, 65536u);
  EXPECT_EQ(d.linger_ms, 5u);
  auto given = with(R"(<output batch-events="1" batch-bytes="4096" linger-ms="0"/>)");
  ASSERT_TRUE(given.isOk()) << given.status().message();
  const ClusterOutputSpec& o = given->element<ClusterSpec>()->output;
  EXPECT_EQ(o.batch_events, 1u);
  EXPECT_EQ(o.batch_bytes, 4096u);
  EXPECT_EQ(o.linger_ms, 0u);
}

TEST(ClusterElementErrorTest, ClusterOutputRefusesBatchesOfNoEventAndUnknownAttributes) {
  const auto errors = errorsOf(R"(<cepbus name="n1">
<cluster name="trades" node="n1" partitions="2" key="k">
<broker port="5672"/>
<output batch-events="0" linger="5"/>
<query name="q" engine="nfa" output="o"><text>PATTERN A a WITHIN 1</text></query>
</cluster>
</cepbus>
)");
  ASSERT_EQ(errors.size(), 2u) << ::testing::PrintToString(errors);
  EXPECT_NE(errors[0].find("t.xml:4:"), std::string::npos) << errors[0];
  const std::string both = errors[0] + errors[1];
  EXPECT_NE(both.find("\"batch-events\""), std::string::npos) << both;
  EXPECT_NE(both.find("linger"), std::string::npos) << both;
}

TEST(ClusterElementTest, ClusterStreamInputTakesARetention) {
  auto result = parse(R"(<cepbus name="n1">
  <cluster name="trades" node="n1" partitions="2" key="k" input="stream" retention="36h">
    <broker port="5672"/>
    <query name="q" engine="nfa" output="o"><text>PATTERN SEQ(A a, B b) WITHIN 10</text></query>
  </cluster>
</cepbus>
)",
                      "t.xml");
  ASSERT_TRUE(result.isOk()) << result.status().message();
  EXPECT_EQ(result->element<ClusterSpec>()->input, ClusterSpec::Input::kStream);
  EXPECT_EQ(result->element<ClusterSpec>()->retention, "36h");
  auto plain = parse(R"(<cepbus name="n1">
  <cluster name="trades" node="n1" partitions="2" key="k">
    <broker port="5672"/>
    <query name="q" engine="nfa" output="o"><text>PATTERN SEQ(A a, B b) WITHIN 10</text></query>
  </cluster>
</cepbus>
)",
                     "t.xml");
  ASSERT_TRUE(plain.isOk()) << plain.status().message();
  EXPECT_EQ(plain->element<ClusterSpec>()->input, ClusterSpec::Input::kQueue);
}

TEST(ClusterElementErrorTest, ClusterInputAndRetentionAreChecked) {
  const auto errors = errorsOf(R"(<cepbus name="n1">
<cluster name="a" node="n1" partitions="2" key="k" input="log">
<broker port="5672"/>
<query name="q" engine="nfa" output="o"><text>PATTERN A a WITHIN 1</text></query>
</cluster>
</cepbus>
)");
  ASSERT_EQ(errors.size(), 1u) << ::testing::PrintToString(errors);
  EXPECT_NE(errors[0].find("t.xml:2:"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("must be \"queue\" or \"stream\", got \"log\""), std::string::npos)
      << errors[0];
  for (const char* bad : {"7", "D", "0D", "7d", "1.5h", "7D "}) {
    const auto age = errorsOf(std::string(R"(<cepbus name="n1">
<cluster name="a" node="n1" partitions="2" key="k" input="stream" retention=")") +
                              bad + R"(">
<broker port="5672"/>
<query name="q" engine="nfa" output="o"><text>PATTERN A a WITHIN 1</text></query>
</cluster>
</cepbus>
)");
    ASSERT_EQ(age.size(), 1u) << bad << ": " << ::testing::PrintToString(age);
    EXPECT_NE(age[0].find("must be a positive count and a unit"), std::string::npos) << age[0];
  }
  const auto queue = errorsOf(R"(<cepbus name="n1">
<cluster name="a" node="n1" partitions="2" key="k" retention="7D">
<broker port="5672"/>
<query name="q" engine="nfa" output="o"><text>PATTERN A a WITHIN 1</text></query>
</cluster>
</cepbus>
)");
  ASSERT_EQ(queue.size(), 1u) << ::testing::PrintToString(queue);
  EXPECT_NE(queue[0].find("applies to input=\"stream\" only"), std::string::npos) << queue[0];
}

}  // namespace
}  // namespace cepbus::services::cluster
