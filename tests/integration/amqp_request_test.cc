// Request/response over AMQP end to end with the real `cepbus`: an AMQP
// client that subscribes to a plain address provides it; requesters (the
// project's Proton C++ client and Debian's python3-qpid-proton) send
// messages with reply-to and correlation-id and get the answers on their
// dynamic reply addresses. The listener's counters show up in the admin
// API and in /metrics.

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <proton/codec/map.hpp>
#include <proton/message.hpp>
#include <proton/scalar.hpp>
#include <regex>
#include <string>
#include <vector>

#include "tests/testing/amqp_test_client.h"
#include "tests/testing/bus_process.h"
#include "tests/testing/http_get.h"
#include "tests/testing/ports.h"

namespace cepbus {
namespace {

namespace fs = std::filesystem;
using testing::AmqpTestClient;
using testing::BusProcess;
using testing::reservedPort;
using testing::httpGet;

int64_t bodyInt(const proton::message& m, const std::string& key) {
  std::map<std::string, proton::scalar> body;
  proton::get(m.body(), body);
  return proton::coerce<int64_t>(body.at(key));
}

// Answers {x} with {y = x * x} (subject "Square").
std::optional<proton::message> square(const proton::message& request) {
  const int64_t x = bodyInt(request, "x");
  proton::message answer;
  answer.subject("Square");
  answer.properties().put("ts", int64_t{2000});
  answer.body(proton::value(std::map<std::string, proton::scalar>{{"y", x * x}}));
  return answer;
}

class AmqpRequestE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bus_ = new BusProcess(CEPBUS_BINARY, "cepbus-amqp-req");
    port_ = reservedPort();
    const std::string descriptor = R"(<cepbus name="requests">
  <listeners>
    <amqp host="127.0.0.1" port=")" +
                                   std::to_string(port_) +
                                   R"(" allow-anonymous="true"/>
    <http host="127.0.0.1" port="0"/>
  </listeners>
  <routes default-flow="st"/>
</cepbus>
)";
    ASSERT_TRUE(bus_->start(descriptor, {port_}));
    http_port_ = bus_->adminPort();
    ASSERT_NE(http_port_, 0) << bus_->err();
  }
  static void TearDownTestSuite() {
    EXPECT_TRUE(bus_->stop());
    delete bus_;
  }

  static inline BusProcess* bus_ = nullptr;
  static inline int port_ = 0;
  static inline int http_port_ = 0;
};

TEST_F(AmqpRequestE2eTest, ProtonClientsRequestAndAnswerThroughTheBus) {
  AmqpTestClient provider(port_, "square-provider");
  ASSERT_TRUE(provider.waitOpen());
  provider.receive("square", "math.square", square);
  ASSERT_TRUE(provider.waitFor([&] { return provider.addresses.count("square") > 0; }));

  AmqpTestClient requester(port_, "square-requester");
  ASSERT_TRUE(requester.waitOpen());
  requester.receive("replies", "");
  ASSERT_TRUE(requester.waitFor([&] { return requester.addresses.count("replies") > 0; }));
  const std::string reply_to = requester.replyAddress("replies");
  std::vector<proton::message> requests;
  for (int64_t x = 1; x <= 3; ++x) {
    proton::message m;
    m.subject("Number");
    m.properties().put("ts", x);
    m.body(proton::value(std::map<std::string, proton::scalar>{{"x", x}}));
    m.reply_to(reply_to);
    m.correlation_id("c" + std::to_string(x));
    requests.push_back(m);
  }
  requester.send("math.square", requests);
  ASSERT_TRUE(requester.waitFor([&] { return requester.received["replies"].size() == 3; }));
  std::map<std::string, int64_t> answers;
  requester.read<int>([&] {
    for (const proton::message& m : requester.received["replies"]) {
      EXPECT_EQ(m.subject(), "Square");
      answers[proton::coerce<std::string>(m.correlation_id())] = bodyInt(m, "y");
    }
    return 0;
  });
  EXPECT_EQ(answers, (std::map<std::string, int64_t>{{"c1", 1}, {"c2", 4}, {"c3", 9}}));
  EXPECT_EQ(requester.read<size_t>([&] { return requester.accepted; }), 3u);

  // Nobody provides math.cube: rejected, saying so.
  proton::message cube = requests[0];
  requester.send("math.cube", {cube});
  ASSERT_TRUE(requester.waitFor([&] { return requester.rejected == 1; }));
  EXPECT_EQ(requester.read<std::string>([&] { return requester.rejections[0].name(); }),
            "amqp:not-found");
}

TEST_F(AmqpRequestE2eTest, PythonProtonRequesterGetsTheAnswer) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  AmqpTestClient provider(port_, "py-square-provider");
  ASSERT_TRUE(provider.waitOpen());
  provider.receive("square", "math.pysquare", square);
  ASSERT_TRUE(provider.waitFor([&] { return provider.addresses.count("square") > 0; }));

  const fs::path script = bus_->dir() / "requester.py";
  std::ofstream(script) << R"PY(
import sys
from proton import Message
from proton.utils import BlockingConnection
conn = BlockingConnection("127.0.0.1:%s" % sys.argv[1], timeout=20)
replies = conn.create_receiver(None, dynamic=True, credit=10)
address = replies.link.remote_source.address
snd = conn.create_sender("math.pysquare")
snd.send(Message(subject="Number", properties={"ts": 1}, body={"x": 12},
                 reply_to=address, correlation_id="py-1"))
m = replies.receive(timeout=20)
replies.accept()
print("answer %s %s %s" % (m.subject, m.correlation_id, m.body["y"]))
conn.close()
)PY";
  const std::string command =
      "/usr/bin/python3 " + script.string() + " " + std::to_string(port_) + " 2>&1";
  std::string output;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, pipe) != nullptr) output += buf;
    EXPECT_EQ(::pclose(pipe), 0) << output;
  }
  EXPECT_NE(output.find("answer Square py-1 144"), std::string::npos) << output;
}

TEST_F(AmqpRequestE2eTest, StatsShowInTheAdminApiAndMetrics) {
  AmqpTestClient client(port_, "stats-client");
  ASSERT_TRUE(client.waitOpen());
  client.receive("ticks", "stats.ticks");
  ASSERT_TRUE(client.waitFor([&] { return client.addresses.count("ticks") > 0; }));
  proton::message tick;
  tick.subject("Tick");
  tick.properties().put("ts", int64_t{1});
  client.send("stats.ticks", {tick, tick});
  ASSERT_TRUE(client.waitFor([&] { return client.received["ticks"].size() == 2; }));

  const std::string component = httpGet(http_port_, "/api/components/amqp-listener");
  ASSERT_NE(component.find(" 200 "), std::string::npos) << component;
  std::smatch m;
  // Its counters are numbers, not strings.
  ASSERT_TRUE(std::regex_search(component, m, std::regex("\"sent\"\\s*:\\s*([0-9]+)")))
      << component;
  EXPECT_GE(std::stoull(m[1].str()), 2u);
  ASSERT_TRUE(std::regex_search(component, m, std::regex("\"accepted\"\\s*:\\s*([0-9]+)")))
      << component;
  EXPECT_GE(std::stoull(m[1].str()), 2u);
  EXPECT_NE(component.find("\"type\":\"amqp-listener\""), std::string::npos) << component;

  const std::string metrics = httpGet(http_port_, "/metrics");
  ASSERT_TRUE(std::regex_search(metrics, m,
                                std::regex("cepbus_component_delivered_total\\{name=\"amqp-"
                                           "listener\",kind=\"service\"\\} ([0-9]+)")))
      << metrics;
  EXPECT_GE(std::stoull(m[1].str()), 2u);
  // The listener's own counters are families of /metrics.
  ASSERT_TRUE(std::regex_search(
      metrics, m, std::regex("cepbus_amqp_accepted_total\\{name=\"amqp-listener\"\\} ([0-9]+)")))
      << metrics;
  EXPECT_GE(std::stoull(m[1].str()), 2u);
  EXPECT_NE(metrics.find("# TYPE cepbus_amqp_subscriber_links gauge"), std::string::npos);
  EXPECT_NE(metrics.find("cepbus_amqp_links_refused_total{name=\"amqp-listener\"} 0"),
            std::string::npos)
      << metrics;
}

}  // namespace
}  // namespace cepbus
