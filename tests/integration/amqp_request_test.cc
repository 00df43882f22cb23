// Request/response over AMQP end to end with the real `cepbus`: an AMQP
// client that subscribes to a plain address provides it; requesters (the
// project's Proton C++ client and Debian's python3-qpid-proton) send
// messages with reply-to and correlation-id and get the answers on their
// dynamic reply addresses. The listener's counters show up in the admin
// API and in /metrics.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <proton/codec/map.hpp>
#include <proton/message.hpp>
#include <proton/scalar.hpp>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/child_process.h"
#include "tests/testing/amqp_test_client.h"
#include "tests/testing/ports.h"

namespace cepbus {
namespace {

using cepbus::testing::freePort;

namespace fs = std::filesystem;
using testing::AmqpTestClient;
using testing::ChildProcess;

int connectTo(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// A plain HTTP/1.1 GET with Connection: close; the whole response.
std::string httpGet(int port, const std::string& target) {
  int fd = connectTo(port);
  if (fd < 0) return {};
  const std::string req =
      "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return {};
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

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
    std::random_device rd;
    dir_ = new fs::path(fs::temp_directory_path() / ("cepbus-amqp-req-" + std::to_string(rd())));
    fs::create_directories(*dir_);
    port_ = freePort();
    std::ofstream(*dir_ / "bus.xml") << R"(<cepbus name="requests">
  <listeners>
    <amqp host="127.0.0.1" port=")" + std::to_string(port_) +
                                            R"(" allow-anonymous="true"/>
    <http host="127.0.0.1" port="0"/>
  </listeners>
  <routes default-flow="st"/>
</cepbus>
)";
    bus_ = new ChildProcess({CEPBUS_BINARY, "run", "bus.xml"}, *dir_);
    ASSERT_TRUE(bus_->started());
    const std::regex listening("admin listening on http://127\\.0\\.0\\.1:([0-9]+)/");
    for (int i = 0; i < 3000 && (http_port_ == 0 || !reachable(port_)); ++i) {
      std::smatch m;
      const std::string err = bus_->err();
      if (http_port_ == 0 && std::regex_search(err, m, listening)) {
        http_port_ = std::stoi(m[1].str());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(reachable(port_)) << bus_->err();
    ASSERT_NE(http_port_, 0) << bus_->err();
  }
  static void TearDownTestSuite() {
    if (bus_ != nullptr) {
      bus_->signal(SIGTERM);
      EXPECT_EQ(bus_->wait(std::chrono::seconds(30)), 0) << bus_->err();
      delete bus_;
    }
    fs::remove_all(*dir_);
    delete dir_;
  }
  static bool reachable(int port) {
    int fd = connectTo(port);
    if (fd >= 0) ::close(fd);
    return fd >= 0;
  }

  static fs::path* dir_;
  static ChildProcess* bus_;
  static int port_;
  static int http_port_;
};

fs::path* AmqpRequestE2eTest::dir_ = nullptr;
ChildProcess* AmqpRequestE2eTest::bus_ = nullptr;
int AmqpRequestE2eTest::port_ = 0;
int AmqpRequestE2eTest::http_port_ = 0;

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

  const fs::path script = *dir_ / "requester.py";
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
  ASSERT_TRUE(std::regex_search(component, m, std::regex("\"sent\"\\s*:\\s*\"([0-9]+)\"")))
      << component;
  EXPECT_GE(std::stoull(m[1].str()), 2u);
  ASSERT_TRUE(std::regex_search(component, m, std::regex("\"accepted\"\\s*:\\s*\"([0-9]+)\"")))
      << component;
  EXPECT_GE(std::stoull(m[1].str()), 2u);
  EXPECT_NE(component.find("\"type\":\"amqp-listener\""), std::string::npos) << component;

  const std::string metrics = httpGet(http_port_, "/metrics");
  ASSERT_TRUE(std::regex_search(metrics, m,
                                std::regex("cepbus_component_delivered_total\\{name=\"amqp-"
                                           "listener\",kind=\"service\"\\} ([0-9]+)")))
      << metrics;
  EXPECT_GE(std::stoull(m[1].str()), 2u);
}

}  // namespace
}  // namespace cepbus
