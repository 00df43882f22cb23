// `cepbus publish`: its command line, and the real binary against a real
// `cepbus run` — outcomes per event with the bus's conditions, bad lines,
// a refused link, an unreachable bus, TLS and SASL PLAIN — and Debian's
// python3-qpid-proton as an independent receiver of what it publishes.

#include "bus/app/publish_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bus/core/event_json.h"
#include "services/protocols/amqp/password_hash.h"
#include "tests/testing/bus_process.h"
#include "tests/testing/cli_run.h"
#include "tests/testing/http_get.h"
#include "tests/testing/ports.h"
#include "tests/testing/self_signed_pair.h"
#include "tests/testing/wait.h"

namespace cepbus::app {
namespace {

namespace fs = std::filesystem;
using cepbus::testing::BusProcess;
using cepbus::testing::CliRun;
using cepbus::testing::freePort;
using cepbus::testing::httpRequest;
using cepbus::testing::reservedPort;
using cepbus::testing::waitUntil;
using cepbus::testing::writeSelfSignedPair;
using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;

Result<PublishOptions> parse(std::vector<std::string> args) { return parsePublishArguments(args); }

TEST(PublishArgumentsTest, ReadsEveryOption) {
  auto o = parse({"stocks.ticks", "--events=ticks.jsonl", "--rate", "200/s", "--at-most-once",
                  "--strict", "--quiet", "--timeout", "2.5", "--url", "amqp://127.0.0.1:5999"});
  ASSERT_TRUE(o.isOk()) << o.status().message();
  EXPECT_EQ(o->address, "stocks.ticks");
  EXPECT_EQ(o->events_file, "ticks.jsonl");
  EXPECT_DOUBLE_EQ(o->rate, 200);
  EXPECT_TRUE(o->at_most_once && o->strict && o->quiet);
  EXPECT_EQ(o->timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(o->peer.url, "amqp://127.0.0.1:5999");
  EXPECT_TRUE(o->peer.user.empty());

  auto defaults = parse({"a"});
  ASSERT_TRUE(defaults.isOk());
  EXPECT_EQ(defaults->events_file, "-");  // standard input
  EXPECT_EQ(defaults->peer.url, "amqp://127.0.0.1:5672");
  EXPECT_DOUBLE_EQ(defaults->rate, 0);
  EXPECT_FALSE(defaults->at_most_once);
  EXPECT_DOUBLE_EQ(parse({"a", "--rate", "0.5"})->rate, 0.5);
}

TEST(PublishArgumentsTest, RefusesWhatItCannotUseNamingIt) {
  auto message = [](std::vector<std::string> args) { return parse(args).status().message(); };
  EXPECT_EQ(message({}), "expected one ADDRESS");
  EXPECT_EQ(message({"a", "b"}), "expected one ADDRESS");
  EXPECT_EQ(message({"a", "--bogus"}), "unknown argument '--bogus'");
  EXPECT_EQ(message({"a", "--quiet=yes"}), "unknown argument '--quiet=yes'");
  EXPECT_EQ(message({"a", "--events"}), "--events needs a value");
  EXPECT_THAT(message({"a", "--rate", "0"}), HasSubstr("--rate 0: expected events per second"));
  EXPECT_THAT(message({"a", "--rate", "fast"}), HasSubstr("--rate fast"));
  EXPECT_THAT(message({"a", "--timeout", "-1"}), HasSubstr("--timeout -1: expected a number"));
  EXPECT_THAT(message({"a", "--at-most-once", "--at-least-once"}), HasSubstr("exclude"));
  EXPECT_THAT(message({"a", "--ca", "ca.pem"}), HasSubstr("need an amqps:// --url"));
}

// The password never comes from a flag: $CEPBUS_PASSWORD or --password-env.
TEST(PublishArgumentsTest, AUsersPasswordComesFromTheEnvironment) {
  ::unsetenv("CEPBUS_PASSWORD");
  EXPECT_EQ(parse({"a", "--user", "alice"}).status().message(),
            "--user alice: the environment variable CEPBUS_PASSWORD holds no password");
  ::setenv("CEPBUS_PASSWORD", "secret", 1);
  auto o = parse({"a", "--user", "alice"});
  ASSERT_TRUE(o.isOk()) << o.status().message();
  EXPECT_EQ(o->peer.password, "secret");
  ::setenv("ALICE_PW", "other", 1);
  EXPECT_EQ(parse({"a", "--user", "alice", "--password-env", "ALICE_PW"})->peer.password, "other");
  EXPECT_THAT(parse({"a", "--password-env", "ALICE_PW"}).status().message(),
              HasSubstr("--password-env needs --user"));
  // PLAIN in clear only to a loopback host, as the listener offers it.
  EXPECT_THAT(parse({"a", "--user", "alice", "--url", "amqp://10.1.2.3:5672"}).status().message(),
              HasSubstr("goes only over amqps://"));
  EXPECT_TRUE(parse({"a", "--user", "alice", "--url", "amqps://10.1.2.3:5671"}).isOk());
  ::unsetenv("CEPBUS_PASSWORD");
  ::unsetenv("ALICE_PW");
}

// One bus for the suite: an anonymous AMQP listener whose max-message-size
// makes a big event a rejection, an admin listener to pause a route (a
// release), and a sink recording what arrives under ticks.#.
class PublishCommandTest : public ::testing::Test {
 protected:
  static constexpr char kToken[] = "publish-test-token";

  static void SetUpTestSuite() {
    ::setenv("CEPBUS_TEST_TOKEN", kToken, 1);
    bus_ = new BusProcess(CEPBUS_BINARY, "cepbus-publish");
    port_ = reservedPort();
    http_port_ = reservedPort();
    ASSERT_TRUE(bus_->start(R"(<cepbus name="publish">
  <listeners>
    <amqp host="127.0.0.1" port=")" +
                                std::to_string(port_) +
                                R"(" allow-anonymous="true" max-message-size="512"/>
    <http host="127.0.0.1" port=")" +
                                std::to_string(http_port_) +
                                R"(" token-env="CEPBUS_TEST_TOKEN"/>
  </listeners>
  <routes>
    <route address="paused.#" flow="st"/>
  </routes>
  <service-assembly name="a">
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="out.jsonl"/>
      <subscribe address="ticks.#"/>
    </service-unit>
  </service-assembly>
</cepbus>
)",
                            {port_, http_port_}));
  }
  static void TearDownTestSuite() {
    EXPECT_TRUE(bus_->stop());
    delete bus_;
  }

  void SetUp() override {
    dir_ = bus_->dir() / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::create_directories(dir_);
  }

  fs::path write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }
  std::string url() const { return "amqp://127.0.0.1:" + std::to_string(port_); }
  // `cepbus publish ARGS --url URL`, started.
  CliRun publish(std::vector<std::string> args, const fs::path& input = "/dev/null") {
    args.insert(args.begin(), {CEPBUS_BINARY, "publish"});
    args.insert(args.end(), {"--url", url()});
    return CliRun(dir_, "publish-" + std::to_string(++runs_), std::move(args), input);
  }
  // The sink's lines for events whose type is `type`.
  static std::vector<std::string> recorded(const std::string& type) {
    std::vector<std::string> out;
    std::ifstream in(bus_->dir() / "out.jsonl");
    for (std::string l; std::getline(in, l);) {
      if (l.find("\"type\":\"" + type + "\"") != std::string::npos) out.push_back(l);
    }
    return out;
  }
  static std::string events(const std::string& type, int n) {
    std::string s;
    for (int i = 1; i <= n; ++i) {
      s += R"({"type":")" + type + R"(","ts":)" + std::to_string(i) + R"(,"attrs":{"n":)" +
           std::to_string(i) + "}}\n";
    }
    return s;
  }

  static inline BusProcess* bus_ = nullptr;
  static inline int port_ = 0;
  static inline int http_port_ = 0;
  fs::path dir_;
  int runs_ = 0;
};

TEST_F(PublishCommandTest, PublishesEveryEventAndReportsEachOutcome) {
  CliRun run = publish({"ticks.one", "--events", write("in.jsonl", events("One", 5)).string()});
  ASSERT_EQ(run.wait(), 0) << run.out() << run.err();
  const std::vector<std::string> lines = run.lines();
  ASSERT_EQ(lines.size(), 6u) << run.out();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(Json::parse(lines[i]),
              Json::parse(R"({"line":)" + std::to_string(i + 1) + R"(,"type":"One","ts":)" +
                          std::to_string(i + 1) + R"(,"outcome":"accepted"})"));
  }
  EXPECT_EQ(Json::parse(lines[5]), Json::parse(R"({"events":5,"sent":5,"accepted":5,"rejected":0,
      "released":0,"unsettled":0,"not_sent":0,"bad_lines":0})"));
  // Accepted means the bus has it.
  ASSERT_TRUE(waitUntil([] { return recorded("One").size() == 5; }));
  auto first = decodeEvent(recorded("One")[0]);
  ASSERT_TRUE(first.isOk());
  EXPECT_EQ((*first)->find(Symbol::intern("n"))->asInt(), 1);
}

// A bad line is named with its line, counted, skipped — not fatal, but the
// exit status says not everything was published; --strict stops there.
TEST_F(PublishCommandTest, ABadLineIsNamedCountedAndSkippedOrStopsWithStrict) {
  const fs::path file = write("in.jsonl", R"({"type":"Bad","ts":1}
{"type":"Bad","ts":2}
{"type":"Bad","timestamp":3}
{"type":"Bad","ts":4}
)");
  CliRun skipped = publish({"ticks.bad", "--events", file.string()});
  ASSERT_EQ(skipped.wait(), 1) << skipped.out() << skipped.err();
  EXPECT_THAT(skipped.err(), HasSubstr("cepbus publish: " + file.string() + ": line 3: "));
  EXPECT_THAT(skipped.err(), HasSubstr("missing field \"ts\""));
  EXPECT_THAT(skipped.err(), HasSubstr("(skipped)"));
  Json summary = Json::parse(skipped.lines().back());
  EXPECT_EQ(summary["events"], 3);
  EXPECT_EQ(summary["accepted"], 3);
  EXPECT_EQ(summary["bad_lines"], 1);

  CliRun strict = publish({"ticks.bad", "--events", file.string(), "--strict"});
  ASSERT_EQ(strict.wait(), 1) << strict.out() << strict.err();
  EXPECT_THAT(strict.err(), HasSubstr("line 3: "));
  EXPECT_THAT(strict.err(), HasSubstr("(--strict: stopping)"));
  summary = Json::parse(strict.lines().back());
  EXPECT_EQ(summary["accepted"], 2) << strict.out();
  EXPECT_EQ(summary["bad_lines"], 1);
  EXPECT_THAT(strict.out(), Not(HasSubstr("\"line\":4")));
}

// The bus's reason travels with the rejection: here the listener's
// max-message-size, as amqp:link:message-size-exceeded.
TEST_F(PublishCommandTest, ARejectionCarriesTheBusesCondition) {
  const std::string big(700, 'x');
  const fs::path file = write("in.jsonl", R"({"type":"Big","ts":1}
{"type":"Big","ts":2,"attrs":{"blob":")" + big +
                                              R"("}}
{"type":"Big","ts":3}
)");
  CliRun run = publish({"ticks.big", "--events", file.string()});
  ASSERT_EQ(run.wait(), 1) << run.out() << run.err();
  Json rejected;
  for (const std::string& l : run.lines()) {
    Json j = Json::parse(l);
    if (j.value("outcome", "") == "rejected") rejected = j;
  }
  ASSERT_FALSE(rejected.is_null()) << run.out();
  EXPECT_EQ(rejected["line"], 2);
  EXPECT_EQ(rejected["condition"], "amqp:link:message-size-exceeded");
  EXPECT_THAT(rejected["description"].get<std::string>(), HasSubstr("max-message-size=512"));
  Json summary = Json::parse(run.lines().back());
  EXPECT_EQ(summary["accepted"], 2);
  EXPECT_EQ(summary["rejected"], 1);
  EXPECT_THAT(run.err(), HasSubstr("1 of 3 events not accepted (1 rejected"));
}

// A paused route refuses for now: the event is released, to be sent again.
TEST_F(PublishCommandTest, AReleasedEventIsReportedAsSuch) {
  const std::string auth = std::string("Authorization: Bearer ") + kToken + "\r\n";
  ASSERT_THAT(httpRequest(http_port_, "POST", "/api/routes/paused.%23/pause", auth),
              HasSubstr("200 OK"));
  CliRun run = publish({"paused.x", "--events", write("in.jsonl", events("P", 2)).string()});
  EXPECT_EQ(run.wait(), 1) << run.out() << run.err();
  ASSERT_THAT(httpRequest(http_port_, "POST", "/api/routes/paused.%23/resume", auth),
              HasSubstr("200 OK"));
  EXPECT_THAT(run.out(), HasSubstr(R"({"line":1,"type":"P","ts":1,"outcome":"released"})"));
  EXPECT_EQ(Json::parse(run.lines().back())["released"], 2);
}

// What the bus refuses at the attach comes back with its condition.
TEST_F(PublishCommandTest, ARefusedAddressIsNamedWithTheBusesCondition) {
  CliRun run = publish({"ticks.#", "--events", write("in.jsonl", events("R", 3)).string()});
  ASSERT_EQ(run.wait(), 1) << run.out() << run.err();
  EXPECT_THAT(run.err(), HasSubstr("cepbus publish: the bus refused the link to ticks.#: "
                                   "amqp:invalid-field: target address \"ticks.#\""));
  EXPECT_EQ(Json::parse(run.lines().back())["accepted"], 0);
}

TEST_F(PublishCommandTest, AnUnreachableBusIsNamed) {
  const std::string nowhere = "amqp://127.0.0.1:" + std::to_string(freePort());
  CliRun run(dir_, "nowhere",
             {CEPBUS_BINARY, "publish", "ticks.x", "--url", nowhere, "--events",
              write("in.jsonl", events("U", 1)).string()});
  ASSERT_EQ(run.wait(), 1) << run.out() << run.err();
  EXPECT_THAT(run.err(), HasSubstr("cepbus publish: cannot connect to " + nowhere + ": "));
  EXPECT_EQ(Json::parse(run.lines().back())["sent"], 0);
}

// At most once there is no outcome: each event is reported sent, and the
// bus gets them all the same.
TEST_F(PublishCommandTest, AtMostOnceSendsPresettled) {
  CliRun run = publish(
      {"ticks.amo", "--at-most-once", "--events", write("in.jsonl", events("Amo", 4)).string()});
  ASSERT_EQ(run.wait(), 0) << run.out() << run.err();
  EXPECT_THAT(run.out(), HasSubstr(R"({"line":4,"type":"Amo","ts":4,"outcome":"sent"})"));
  EXPECT_EQ(Json::parse(run.lines().back())["sent"], 4);
  EXPECT_TRUE(waitUntil([] { return recorded("Amo").size() == 4; }));
}

// Standard input is the default; --quiet prints only what was not accepted.
TEST_F(PublishCommandTest, ReadsStandardInputAndQuietReportsOnlyTheFailures) {
  CliRun run = publish({"ticks.stdin", "--quiet"}, write("in.jsonl", events("In", 3)));
  ASSERT_EQ(run.wait(), 0) << run.out() << run.err();
  ASSERT_EQ(run.lines().size(), 1u) << run.out();
  EXPECT_EQ(Json::parse(run.lines()[0])["accepted"], 3);
  EXPECT_TRUE(waitUntil([] { return recorded("In").size() == 3; }));
}

// Debian's python3-qpid-proton receives what `cepbus publish` sends: the
// type as subject, ts (and a composite's start) as properties, the
// attributes as a map body.
TEST_F(PublishCommandTest, AnIndependentClientReceivesWhatItPublishes) {
  if (!fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  write("receive.py", R"(import json, sys
from proton.utils import BlockingConnection
conn = BlockingConnection(sys.argv[1], timeout=30)
receiver = conn.create_receiver("py.#")
print("attached", flush=True)
for i in range(2):
    m = receiver.receive(timeout=30)
    receiver.accept()
    print(json.dumps({"subject": m.subject, "ts": m.properties["ts"],
                      "start": m.properties.get("start"), "body": m.body},
                     sort_keys=True), flush=True)
conn.close()
)");
  CliRun python(dir_, "python", {"/usr/bin/python3", (dir_ / "receive.py").string(), url()});
  ASSERT_TRUE(waitUntil([&] { return python.out().find("attached") != std::string::npos; }))
      << python.err();
  CliRun run = publish({"py.events", "--events",
                        write("in.jsonl", R"(
{"type":"Tick","ts":7000,"attrs":{"symbol":"IBM","price":42.5}}
{"type":"Pair","start":6990,"ts":7001,"attrs":{"n":2}}
)")
                            .string()});
  ASSERT_EQ(run.wait(), 0) << run.out() << run.err();
  ASSERT_EQ(python.wait(), 0) << python.out() << python.err();
  EXPECT_THAT(python.out(), HasSubstr(R"({"body": {"price": 42.5, "symbol": "IBM"}, )"
                                      R"("start": null, "subject": "Tick", "ts": 7000})"));
  EXPECT_THAT(python.out(),
              HasSubstr(R"({"body": {"n": 2}, "start": 6990, "subject": "Pair", "ts": 7001})"));
}

// TLS with SASL PLAIN, as the listener takes them: the password from the
// environment, the bus's certificate checked against --ca; a user's
// permits decide the link.
class PublishSecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bus_ = new BusProcess(CEPBUS_BINARY, "cepbus-publish-tls");
    ASSERT_TRUE(writeSelfSignedPair(bus_->dir()));
    auto alice = services::amqp::hashPassword("alice-secret", 1000);
    auto bob = services::amqp::hashPassword("bob-secret", 1000);
    ASSERT_TRUE(alice.isOk() && bob.isOk());
    port_ = reservedPort();
    ASSERT_TRUE(bus_->start(R"(<cepbus name="tls"><listeners><amqp host="127.0.0.1" port=")" +
                                std::to_string(port_) +
                                R"(" allow-anonymous="false"><tls cert="cert.pem" key="key.pem"/>
      <user name="alice" password-hash=")" +
                                *alice + R"("><permit publish="orders.#"/></user>
      <user name="bob" password-hash=")" +
                                *bob + R"("><permit subscribe="orders.#"/></user>
    </amqp></listeners></cepbus>
)",
                            {port_}));
  }
  static void TearDownTestSuite() {
    EXPECT_TRUE(bus_->stop());
    delete bus_;
  }
  // `cepbus publish` as `user`, the password in $CEPBUS_PASSWORD, started.
  CliRun publishAs(const std::string& user, const std::string& password, const std::string& name) {
    ::setenv("CEPBUS_PASSWORD", password.c_str(), 1);
    std::ofstream(bus_->dir() / "orders.jsonl") << R"({"type":"Order","ts":1})"
                                                << "\n";
    return CliRun(bus_->dir(), name,
                  {CEPBUS_BINARY, "publish", "orders.eu", "--url",
                   "amqps://127.0.0.1:" + std::to_string(port_), "--user", user, "--ca",
                   (bus_->dir() / "cert.pem").string(), "--peer-name", "localhost", "--events",
                   (bus_->dir() / "orders.jsonl").string()});
  }
  static inline BusProcess* bus_ = nullptr;
  static inline int port_ = 0;
};

TEST_F(PublishSecurityTest, PublishesOverTlsAsAUserAndNamesEachRefusal) {
  CliRun alice = publishAs("alice", "alice-secret", "alice");
  EXPECT_EQ(alice.wait(), 0) << alice.out() << alice.err();
  EXPECT_THAT(alice.out(), HasSubstr(R"("outcome":"accepted")"));

  CliRun bob = publishAs("bob", "bob-secret", "bob");
  EXPECT_EQ(bob.wait(), 1);
  EXPECT_THAT(bob.err(), HasSubstr("the bus refused the link to orders.eu: "
                                   "amqp:unauthorized-access: user \"bob\" may not publish"));

  CliRun wrong = publishAs("alice", "not-her-password", "wrong");
  EXPECT_EQ(wrong.wait(), 1);
  EXPECT_THAT(wrong.err(), HasSubstr("amqp:unauthorized-access"));
}

}  // namespace
}  // namespace cepbus::app
