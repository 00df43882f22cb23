// `cepbus subscribe`: its command line, and the real binary against a real
// `cepbus run` — the quickstart's composite events (with their start) to a
// subscriber started before the bus, --count, --timeout, a refused
// pattern, no bus at all — and against Debian's python3-qpid-proton as an
// independent peer that sends it a message that is no event.

#include "bus/app/subscribe_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bus/core/event_json.h"
#include "tests/testing/bus_process.h"
#include "tests/testing/cli_run.h"
#include "tests/testing/ports.h"
#include "tests/testing/wait.h"

namespace cepbus::app {
namespace {

namespace fs = std::filesystem;
using cepbus::testing::BusProcess;
using cepbus::testing::CliRun;
using cepbus::testing::freePort;
using cepbus::testing::reservedPort;
using cepbus::testing::waitUntil;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

Result<SubscribeOptions> parse(std::vector<std::string> args) {
  return parseSubscribeArguments(args);
}

TEST(SubscribeArgumentsTest, ReadsEveryOptionAndRefusesBadOnes) {
  auto o = parse({"stocks.#", "--count", "9", "--timeout", "1.5", "--at-most-once"});
  ASSERT_TRUE(o.isOk()) << o.status().message();
  EXPECT_EQ(o->pattern, "stocks.#");
  EXPECT_EQ(o->count, 9u);
  EXPECT_EQ(o->timeout, std::chrono::milliseconds(1500));
  EXPECT_TRUE(o->at_most_once);
  EXPECT_EQ(o->peer.url, "amqp://127.0.0.1:5672");
  auto defaults = parse({"a"});
  ASSERT_TRUE(defaults.isOk());
  EXPECT_FALSE(defaults->count.has_value());
  EXPECT_FALSE(defaults->timeout.has_value());
  EXPECT_FALSE(defaults->at_most_once);

  auto message = [](std::vector<std::string> args) { return parse(args).status().message(); };
  EXPECT_EQ(message({}), "expected one PATTERN");
  EXPECT_EQ(message({"a", "--bogus"}), "unknown argument '--bogus'");
  EXPECT_THAT(message({"a", "--count", "0"}), HasSubstr("--count 0: expected a number"));
  EXPECT_THAT(message({"a", "--count", "x"}), HasSubstr("--count x"));
  EXPECT_THAT(message({"a", "--timeout", "0"}), HasSubstr("--timeout 0: expected a number"));
}

std::vector<std::string> nonEmptyLines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty()) out.push_back(l);
  }
  return out;
}

std::string slurp(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class SubscribeCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bus_ = std::make_unique<BusProcess>(CEPBUS_BINARY, "cepbus-subscribe");
    port_ = reservedPort();
  }
  std::string url() const { return "amqp://127.0.0.1:" + std::to_string(port_); }
  // `cepbus subscribe ARGS --url URL`, started.
  CliRun subscribe(const std::string& name, std::vector<std::string> args) {
    args.insert(args.begin(), {CEPBUS_BINARY, "subscribe"});
    args.insert(args.end(), {"--url", url()});
    return CliRun(bus_->dir(), name, std::move(args));
  }
  ::testing::AssertionResult startPlainBus() {
    return bus_->start("<cepbus name=\"sub\"><listeners><amqp host=\"127.0.0.1\" port=\"" +
                           std::to_string(port_) +
                           "\" allow-anonymous=\"true\"/></listeners></cepbus>\n",
                       {port_});
  }

  std::unique_ptr<BusProcess> bus_;
  int port_ = 0;
};

// The tour of the README: a subscriber started first waits for the bus and
// gets every composite event of the quickstart's replay, each with its
// start, as the bus's own printer writes them.
TEST_F(SubscribeCommandTest, StartedBeforeTheQuickstartItGetsEveryCompositeEvent) {
  const fs::path quickstart = fs::path(CEPBUS_TEST_SOURCE_DIR) / "examples/quickstart";
  fs::copy_file(quickstart / "stocks.jsonl", bus_->dir() / "stocks.jsonl");
  std::string xml = slurp(quickstart / "quickstart.xml");
  for (const auto& [from, to] : {std::pair<std::string, std::string>{
                                     "port=\"5672\"", "port=\"" + std::to_string(port_) + "\""},
                                 {"port=\"8080\"", "port=\"0\""}}) {
    ASSERT_NE(xml.find(from), std::string::npos) << from;
    xml.replace(xml.find(from), from.size(), to);
  }
  CliRun subscriber = subscribe("subscriber", {"stocks.equal", "--count", "9", "--timeout", "60"});
  ASSERT_TRUE(waitUntil([&] {
    return subscriber.err().find("waiting for the bus") != std::string::npos;
  })) << subscriber.err();
  ASSERT_TRUE(bus_->start(xml, {port_}));
  ASSERT_EQ(subscriber.wait(), 0) << subscriber.out() << subscriber.err() << bus_->err();
  const std::vector<std::string> got = subscriber.lines();
  ASSERT_TRUE(waitUntil([&] {
    return nonEmptyLines(slurp(bus_->dir() / "stdout.txt")).size() == 9;
  })) << bus_->err();
  EXPECT_THAT(got, ElementsAreArray(nonEmptyLines(slurp(bus_->dir() / "stdout.txt"))));
  auto first = decodeEvent(got.at(0));
  ASSERT_TRUE(first.isOk()) << got.at(0);
  EXPECT_EQ((*first)->type().name(), "EqualPrices");
  EXPECT_LT((*first)->start(), (*first)->ts());  // the composite's interval came through
  EXPECT_THAT(subscriber.err(), HasSubstr("cepbus subscribe: 9 events from stocks.equal"));
}

// --count stops after that many (the rest is never granted credit), and
// --timeout ends a wait; the exit status says whether --count was reached.
TEST_F(SubscribeCommandTest, CountStopsAndTimeoutEndsTheWait) {
  ASSERT_TRUE(startPlainBus());
  CliRun three = subscribe("three", {"t.#", "--count", "3", "--timeout", "60"});
  CliRun idle = subscribe("idle", {"nothing.here", "--timeout", "0.5"});
  CliRun short_of_count = subscribe("short", {"nothing.here", "--count", "2", "--timeout", "0.5"});
  ASSERT_EQ(idle.wait(), 0) << idle.err();
  EXPECT_THAT(idle.err(), HasSubstr("0 events from nothing.here"));
  ASSERT_EQ(short_of_count.wait(), 1) << short_of_count.err();
  // Published once `three` is attached: it only prints what arrives after.
  std::ofstream(bus_->dir() / "in.jsonl") << R"({"type":"T","ts":1,"attrs":{"n":1}}
{"type":"T","ts":2,"attrs":{"n":2}}
{"type":"T","ts":3,"attrs":{"n":3}}
{"type":"T","ts":4,"attrs":{"n":4}}
)";
  ASSERT_TRUE(waitUntil([&] { return three.err().find("subscribed to t.#") != std::string::npos; }))
      << three.err();
  CliRun publish(bus_->dir(), "publish",
                 {CEPBUS_BINARY, "publish", "t.x", "--url", url(), "--events",
                  (bus_->dir() / "in.jsonl").string()});
  ASSERT_EQ(publish.wait(), 0) << publish.out() << publish.err();
  ASSERT_EQ(three.wait(), 0) << three.err();
  EXPECT_THAT(three.lines(), ElementsAreArray({R"({"attrs":{"n":1},"ts":1,"type":"T"})",
                                               R"({"attrs":{"n":2},"ts":2,"type":"T"})",
                                               R"({"attrs":{"n":3},"ts":3,"type":"T"})"}));
}

TEST_F(SubscribeCommandTest, ARefusedPatternIsNamedWithTheBusesCondition) {
  ASSERT_TRUE(startPlainBus());
  CliRun run = subscribe("refused", {"a..b", "--timeout", "30"});
  ASSERT_EQ(run.wait(), 1) << run.err();
  EXPECT_THAT(run.err(), HasSubstr("cepbus subscribe: the bus refused the subscription to a..b: "
                                   "amqp:invalid-field: source address \"a..b\""));
}

TEST_F(SubscribeCommandTest, NoBusWithinTheTimeoutIsNamed) {
  port_ = freePort();
  CliRun run = subscribe("nobus", {"a.b", "--timeout", "1"});
  ASSERT_EQ(run.wait(), 1) << run.err();
  EXPECT_THAT(run.err(), HasSubstr("cepbus subscribe: waiting for the bus at " + url() + " ("));
  EXPECT_THAT(run.err(), HasSubstr("no bus at " + url()));
}

// Debian's python3-qpid-proton as the peer `cepbus subscribe` connects to:
// a message that is no event is named, counted and rejected with the reason
// the mapping gives; the event after it is printed.
TEST_F(SubscribeCommandTest, AMessageThatIsNoEventIsNamedAndRejected) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  port_ = freePort();
  std::ofstream(bus_->dir() / "peer.py") << R"(import sys
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

class Peer(MessagingHandler):
    def __init__(self, port):
        super().__init__()
        self.port = port
        self.sent = False
    def on_start(self, event):
        self.acceptor = event.container.listen("127.0.0.1:%s" % self.port)
        print("listening", flush=True)
    def on_link_opening(self, event):
        if event.link.is_sender:
            event.link.source.address = event.link.remote_source.address
    def on_sendable(self, event):
        if self.sent:
            return
        self.sent = True
        event.sender.send(Message(subject="Tick", properties={"ts": 4}, body=[1, 2]))
        event.sender.send(Message(subject="Tick", properties={"ts": 5}, body={"n": 1}))
    def on_rejected(self, event):
        c = event.delivery.remote.condition
        print("rejected", c.name, c.description, flush=True)
    def on_accepted(self, event):
        print("accepted", flush=True)
    # The subscriber closes first (closing), or the peer does (closed).
    def on_connection_closing(self, event):
        self.acceptor.close()
    def on_connection_closed(self, event):
        self.acceptor.close()

Container(Peer(int(sys.argv[1]))).run()
)";
  CliRun peer(bus_->dir(), "peer",
              {"/usr/bin/python3", (bus_->dir() / "peer.py").string(), std::to_string(port_)});
  ASSERT_TRUE(waitUntil([&] { return peer.out().find("listening") != std::string::npos; }))
      << peer.err();
  CliRun run = subscribe("subscriber", {"ticks", "--count", "1", "--timeout", "30"});
  ASSERT_EQ(run.wait(), 0) << run.out() << run.err();
  EXPECT_THAT(run.lines(), ElementsAreArray({R"({"attrs":{"n":1},"ts":5,"type":"Tick"})"}));
  EXPECT_THAT(run.err(), HasSubstr("cepbus subscribe: a message on ticks is no event: "
                                   "amqp:decode-error: the body must be a map of attributes"));
  EXPECT_THAT(run.err(), HasSubstr("1 events from ticks, 1 no events"));
  ASSERT_EQ(peer.wait(), 0) << peer.out() << peer.err();
  EXPECT_THAT(peer.out(), HasSubstr("rejected amqp:decode-error the body must be a map"));
  EXPECT_THAT(peer.out(), HasSubstr("accepted"));
}

}  // namespace
}  // namespace cepbus::app
