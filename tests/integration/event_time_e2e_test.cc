// Event time on the real bus, end to end: the real `cepbus` with an AMQP
// listener, real AMQP clients publishing (each client's sending link is a
// source of its own), the CEP service's queries on the nfa plugin.
//
// Two publishers far apart in ts give the sorted stream's matches (the
// query's time is the slower one's); a quiet publisher stops holding the
// other back once idle; a late event lands on the late address; a trailing
// negation's composite comes out with no later event at all (time-unit
// "ms": the wall clock moves time once every source is idle); a producer
// whose clock runs backwards gives counted late events and loses nothing.
// Every wait polls with a generous deadline; the only figure, the delay of
// the trailing negation's composite after its window, is reported, not
// asserted.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/testing/amqp_test_client.h"
#include "tests/testing/bus_process.h"
#include "tests/testing/http_get.h"
#include "tests/testing/ports.h"
#include "tests/testing/wait.h"

namespace cepbus {
namespace {

using nlohmann::json;
using testing::AmqpClientOptions;
using testing::AmqpTestClient;
using testing::BusProcess;
using testing::eventually;
using testing::reservedPort;

proton::message event(const std::string& type, int64_t ts, int64_t id) {
  proton::message m;
  m.subject(type);
  m.properties().put("ts", ts);
  m.properties().put("id", id);
  return m;
}

int64_t wallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class EventTimeE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bus_ = new BusProcess(CEPBUS_BINARY, "cepbus-event-time");
    port_ = reservedPort();
    const std::string descriptor =
        R"(<cepbus name="event-time">
  <listeners>
    <amqp host="127.0.0.1" port=")" +
        std::to_string(port_) +
        R"(" allow-anonymous="true"/>
    <http host="127.0.0.1" port="0"/>
  </listeners>
  <plugins><search-path>)" +
        std::string(CEPBUS_PLUGIN_DIR) +
        R"(</search-path><plugin name="nfa"/><plugin name="algebra"/><plugin name="petri"/></plugins>
  <service-assembly name="et">
    <service-unit name="cep" type="cep">
      <query name="pairs" engine="nfa" input="pairs.in" output="pairs.out">
        <option name="max_delay" value="5"/><option name="idle_timeout" value="500"/>
        <text>PATTERN SEQ(A a, B b) WHERE a.id = b.id WITHIN 3 RETURN Pair(a.id)</text>
      </query>
      <query name="quiet" engine="nfa" input="quiet.in" output="quiet.out">
        <option name="idle_timeout" value="1000"/>
        <text>PATTERN SEQ(A a, B b) WHERE a.id = b.id WITHIN 10 RETURN Pair(a.id)</text>
      </query>
      <query name="closing" engine="nfa" input="closing.in" output="closing.out">
        <option name="idle_timeout" value="600000"/>
        <text>PATTERN SEQ(A a, B b) WHERE a.id = b.id WITHIN 10 RETURN Pair(a.id)</text>
      </query>
      <query name="absence" engine="nfa" input="absence.in" output="absence.out" time-unit="ms">
        <option name="max_delay" value="200"/><option name="idle_timeout" value="1000"/>
        <text>PATTERN SEQ(A a, NOT(B b)) WHERE b.id = a.id WITHIN 2 s RETURN Lonely(a.id)</text>
      </query>
      <query name="absence-petri" engine="petri" input="absence.in" output="absence.petri"
             time-unit="ms">
        <option name="max_delay" value="200"/><option name="idle_timeout" value="1000"/>
        <text>PATTERN SEQ(A a, NOT(B b)) WHERE b.id = a.id WITHIN 2 s RETURN Lonely(a.id)</text>
      </query>
      <query name="absence-algebra" engine="algebra" input="absence.in" output="absence.algebra"
             time-unit="ms">
        <option name="max_delay" value="200"/><option name="idle_timeout" value="1000"/>
        <text>PATTERN SEQ(A a, NOT(B b)) WHERE b.id = a.id WITHIN 2 s CONTEXT unrestricted
              RETURN Lonely(a.id)</text>
      </query>
      <query name="broken" engine="nfa" input="broken.in" output="broken.out">
        <option name="max_delay" value="3"/>
        <text>PATTERN A a RETURN Seen(a.id)</text>
      </query>
    </service-unit>
  </service-assembly>
</cepbus>
)";
    ASSERT_TRUE(bus_->start(descriptor, {port_}));
    admin_ = bus_->adminPort();
    ASSERT_GT(admin_, 0);
  }
  static void TearDownTestSuite() {
    EXPECT_TRUE(bus_->stop());
    delete bus_;
  }
  static AmqpClientOptions client() {
    AmqpClientOptions o;
    o.port = port_;
    return o;
  }
  // A client subscribed to `addresses` (each its own link, named after it).
  static std::unique_ptr<AmqpTestClient> subscriber(const std::vector<std::string>& addresses) {
    auto c = std::make_unique<AmqpTestClient>(client());
    EXPECT_TRUE(c->waitOpen());
    for (const std::string& a : addresses) c->subscribe(a, a);
    EXPECT_TRUE(c->waitFor([&] {
      return std::all_of(addresses.begin(), addresses.end(),
                         [&](const std::string& a) { return c->links_open[a] == 1; });
    }));
    return c;
  }
  // The query's entry in /api/queries (null when not there).
  static json queryStats(const std::string& name) {
    const std::string response = testing::httpGet(admin_, "/api/queries");
    const size_t body = response.find("\r\n\r\n");
    if (body == std::string::npos) return json();
    const json all = json::parse(response.substr(body + 4), nullptr, false);
    if (!all.is_object() || !all.contains("queries")) return json();
    for (const json& q : all["queries"]) {
      if (q.value("name", "") == name) return q;
    }
    return json();
  }

  static inline BusProcess* bus_ = nullptr;
  static inline int port_ = 0;
  static inline int admin_ = 0;
};

// A(k) at 4k and B(k) at 4k + 2 for k = 1..40, each publisher swapping
// neighbours (4 apart, within the maximum delay of 5); the B publisher sends
// half its events after the A publisher's first two, 80 ts ahead of it. With
// the time of the newest event of either the A's would be late; with the
// slower publisher's time every pair matches, as in the sorted stream.
TEST_F(EventTimeE2eTest, TwoPublishersOutOfOrderGiveTheSortedStreamsMatches) {
  auto out = subscriber({"pairs.out", "pairs.late"});
  constexpr int64_t kPairs = 40;
  auto stream = [](const std::string& type, int64_t offset) {
    std::vector<proton::message> m;
    for (int64_t k = 1; k <= kPairs; k += 2) {
      m.push_back(event(type, 4 * (k + 1) + offset, k + 1));
      m.push_back(event(type, 4 * k + offset, k));
    }
    return m;
  };
  const std::vector<proton::message> as = stream("A", 0);
  const std::vector<proton::message> bs = stream("B", 2);
  AmqpTestClient pa(client());
  AmqpTestClient pb(client());
  ASSERT_TRUE(pa.waitOpen());
  ASSERT_TRUE(pb.waitOpen());
  // Each publisher is a source from its first event: the A publisher's
  // first two come first, then the B publisher runs 80 ahead.
  pa.send("pairs.in", {as.begin(), as.begin() + 2});
  ASSERT_TRUE(pa.waitFor([&] { return pa.accepted == 2; }));
  pb.send("pairs.in", {bs.begin(), bs.begin() + kPairs / 2});
  ASSERT_TRUE(pb.waitFor([&] { return pb.accepted == kPairs / 2; }));
  pa.send("pairs.in", {as.begin() + 2, as.end()});
  pb.send("pairs.in", {bs.begin() + kPairs / 2, bs.end()});
  ASSERT_TRUE(pa.waitFor([&] { return pa.accepted == kPairs; }));
  ASSERT_TRUE(pb.waitFor([&] { return pb.accepted == kPairs; }));
  // The last D of time stays held until time moves past it: both move on.
  pa.send("pairs.in", {event("X", 200, 0)});
  pb.send("pairs.in", {event("X", 200, 0)});
  ASSERT_TRUE(out->waitFor([&] { return out->received["pairs.out"].size() == kPairs; }))
      << out->read<size_t>([&] { return out->received["pairs.out"].size(); });
  std::set<Timestamp> got;
  for (Timestamp ts : out->receivedTs("pairs.out")) got.insert(ts);
  std::set<Timestamp> expected;
  for (int64_t k = 1; k <= kPairs; ++k) expected.insert(4 * k + 2);
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(out->read<bool>([&] { return out->received["pairs.late"].empty(); }));

  // The time is 200 now: an A at 100 is late, and goes to the late address
  // as it came.
  pa.send("pairs.in", {event("A", 100, 99)});
  ASSERT_TRUE(out->waitFor([&] { return out->received["pairs.late"].size() == 1; }));
  EXPECT_EQ(out->receivedTs("pairs.late"), std::vector<Timestamp>{100});
  EXPECT_TRUE(eventually("the late count in /api/queries",
                         [] { return queryStats("pairs").value("late", 0) == 1; }));
}

// The A publisher sends one event and stays connected, silent; the B
// publisher runs far ahead. The pair's B waits behind the quiet publisher's
// time until it is idle, then comes out; /api/queries shows the two
// sources, one idle.
TEST_F(EventTimeE2eTest, AQuietPublisherStopsHoldingTheOtherBackOnceIdle) {
  auto out = subscriber({"quiet.out"});
  AmqpTestClient pa(client());
  AmqpTestClient pb(client());
  ASSERT_TRUE(pa.waitOpen());
  ASSERT_TRUE(pb.waitOpen());
  pa.send("quiet.in", {event("A", 100, 1)});
  ASSERT_TRUE(pa.waitFor([&] { return pa.accepted == 1; }));
  pb.send("quiet.in", {event("B", 105, 1), event("B", 300, 2)});
  ASSERT_TRUE(pb.waitFor([&] { return pb.accepted == 2; }));
  ASSERT_TRUE(out->waitFor([&] { return out->received["quiet.out"].size() == 1; }));
  EXPECT_EQ(out->receivedTs("quiet.out"), std::vector<Timestamp>{105});
  json stats;
  EXPECT_TRUE(eventually("two sources, both idle, in /api/queries", [&] {
    stats = queryStats("quiet");
    return stats.value("sources", 0) == 2 && stats.value("idle_sources", 0) == 2;
  })) << stats;
  EXPECT_EQ(stats.value("watermark", 0), 300);
}

// As above, but the A publisher closes: its link first, then a second
// one its connection. A closed source holds nothing back at once, while
// the idle timeout (ten minutes) would keep the pair waiting.
TEST_F(EventTimeE2eTest, AClosedPublisherStopsHoldingTheOtherBackAtOnce) {
  auto out = subscriber({"closing.out"});
  AmqpTestClient pb(client());
  ASSERT_TRUE(pb.waitOpen());
  {
    AmqpTestClient pa(client());
    ASSERT_TRUE(pa.waitOpen());
    pa.send("closing.in", {event("A", 100, 1)});
    ASSERT_TRUE(pa.waitFor([&] { return pa.accepted == 1; }));
    pb.send("closing.in", {event("B", 105, 1), event("B", 300, 2)});
    ASSERT_TRUE(pb.waitFor([&] { return pb.accepted == 2; }));
    ASSERT_TRUE(eventually("A's source holding the time at 100", [] {
      const json stats = queryStats("closing");
      return stats.value("sources", 0) == 2 && stats.value("watermark", 0) == 100;
    })) << queryStats("closing");
    pa.closeSenders("closing.in");
    ASSERT_TRUE(out->waitFor([&] { return out->received["closing.out"].size() == 1; }));
    EXPECT_EQ(out->receivedTs("closing.out"), std::vector<Timestamp>{105});
    EXPECT_TRUE(eventually("the time at the B publisher's 300", [] {
      const json stats = queryStats("closing");
      return stats.value("sources", 0) == 1 && stats.value("watermark", 0) == 300;
    })) << queryStats("closing");
  }
  // A new publisher holds the time at 400 until its connection closes.
  AmqpTestClient pc(client());
  ASSERT_TRUE(pc.waitOpen());
  pc.send("closing.in", {event("A", 400, 3)});
  ASSERT_TRUE(pc.waitFor([&] { return pc.accepted == 1; }));
  pb.send("closing.in", {event("B", 402, 3), event("B", 900, 4)});
  ASSERT_TRUE(pb.waitFor([&] { return pb.accepted == 4; }));
  ASSERT_TRUE(eventually("C's source holding the time at 400", [] {
    return queryStats("closing").value("watermark", 0) == 400;
  })) << queryStats("closing");
  pc.closeConnection();
  ASSERT_TRUE(out->waitFor([&] { return out->received["closing.out"].size() == 2; }));
  EXPECT_EQ(out->receivedTs("closing.out"), (std::vector<Timestamp>{105, 402}));
}

// SEQ(A a, NOT(B b)) WITHIN 2 s on ts in milliseconds: A(2) is cancelled by
// its B; A(1) gets no B and no later event comes at all. Its composite comes
// out once the wall clock (every source idle) passes its window plus the
// maximum delay, never before: on the nfa, which runs the NOT itself, and on
// petri and algebra, around which the host runs it.
TEST_F(EventTimeE2eTest, ATrailingNegationArrivesWithNoLaterEvent) {
  const std::vector<std::string> outputs = {"absence.out", "absence.petri", "absence.algebra"};
  auto out = subscriber(outputs);
  AmqpTestClient p(client());
  ASSERT_TRUE(p.waitOpen());
  const int64_t now = wallMs();
  p.send("absence.in", {event("A", now - 100, 2), event("B", now - 50, 2), event("A", now, 1)});
  ASSERT_TRUE(p.waitFor([&] { return p.accepted == 3; }));
  std::map<std::string, int64_t> arrived;
  ASSERT_TRUE(out->waitFor([&] {
    for (const std::string& o : outputs) {
      if (!arrived.contains(o) && !out->received[o].empty()) arrived[o] = wallMs();
    }
    return arrived.size() == outputs.size();
  }));
  for (const std::string& o : outputs) {
    EXPECT_EQ(out->receivedTs(o), std::vector<Timestamp>{now}) << o;
    // Not before the window (2,000) and the maximum delay (200) passed.
    EXPECT_GE(arrived[o], now + 2000 + 200) << o;
    RecordProperty("ms_after_window_end_" + o, std::to_string(arrived[o] - (now + 2000)));
    std::cout << "trailing negation (" << o << "): composite " << arrived[o] - (now + 2000)
              << " ms after its window closed (idle timeout 1000 ms, max delay 200 ms)\n";
  }
}

// Every event 10 behind the one before, with a maximum delay of 3: the
// first is held (within the delay of the newest), the other nine are late —
// counted, on the late address, none lost — and the bus runs on: an event
// 10 later releases the first.
TEST_F(EventTimeE2eTest, AProducerWithABrokenClockGivesCountedLateEvents) {
  auto out = subscriber({"broken.out", "broken.late"});
  AmqpTestClient p(client());
  ASSERT_TRUE(p.waitOpen());
  std::vector<proton::message> backwards;
  for (int64_t i = 0; i < 10; ++i) backwards.push_back(event("A", 1000 - 10 * i, i));
  p.send("broken.in", backwards);
  ASSERT_TRUE(p.waitFor([&] { return p.accepted == 10; }));
  ASSERT_TRUE(out->waitFor([&] { return out->received["broken.late"].size() == 9; }));
  std::vector<Timestamp> late;
  for (int64_t i = 1; i < 10; ++i) late.push_back(1000 - 10 * i);
  EXPECT_EQ(out->receivedTs("broken.late"), late);
  p.send("broken.in", {event("A", 1010, 10)});
  ASSERT_TRUE(out->waitFor([&] { return out->received["broken.out"].size() == 1; }));
  EXPECT_EQ(out->receivedTs("broken.out"), std::vector<Timestamp>{1000});
  json stats;
  EXPECT_TRUE(eventually("9 late of 11 consumed in /api/queries", [&] {
    stats = queryStats("broken");
    return stats.value("late", 0) == 9 && stats.value("consumed", 0) == 11;
  })) << stats;
  EXPECT_EQ(stats.value("errors", -1), 0);
  EXPECT_EQ(stats.value("watermark", 0), 1007);
}

}  // namespace
}  // namespace cepbus
