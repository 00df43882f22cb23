// Checkpointed CEP queries on the running bus, end to end with the real
// `cepbus`: an nfa query with partial matches open, fed over AMQP through a
// reliable route, the bus killed with SIGKILL at random moments and
// restarted on the same journal; the composites its durable subscriber
// received must be those of an uninterrupted run, none lost and none
// published twice. Then the bad cases: a checkpoint row damaged between two
// runs is refused and the query starts empty; a journal that will not store
// checkpoints holds the query's composites back, losing nothing.
//
// The default run kills the bus 3 times; CEPBUS_CHECKPOINT_KILLS=N kills it
// N times (24 in the long run). CEPBUS_CRASH_SEED=N repeats a schedule. The
// figures of a run are printed as one JSON line and appended to
// checkpoint_crash_results.jsonl in the build folder.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bus/core/plugin/snapshot.h"
#include "services/protocols/amqp/message_mapping.h"
#include "tests/integration/order_stream.h"
#include "tests/testing/amqp_test_client.h"
#include "tests/testing/bus_process.h"
#include "tests/testing/http_get.h"
#include "tests/testing/ports.h"
#include "tests/testing/sqlite_raw.h"
#include "tests/testing/wait.h"

namespace cepbus {
namespace {

using testing::AmqpReceived;
using testing::AmqpTestClient;
using testing::BusProcess;
using testing::client;
using testing::kPairsQuery;
using testing::order;
using testing::reservedPort;

int envInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::atoi(value) : fallback;
}

void sleepMs(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// A bus with an AMQP listener, an admin listener, reliable routes for the
// orders and the composites, and the pairs query checkpointed every
// `interval_ms`, its composites reliable.
std::string descriptor(int port, int interval_ms, const std::string& query = kPairsQuery,
                       int idle_timeout_ms = 2000) {
  return R"(<cepbus name="checkpoints">
  <journal path="journal.db"/>
  <listeners><amqp host="127.0.0.1" port=")" +
         std::to_string(port) +
         R"(" allow-anonymous="true"/><http host="127.0.0.1" port="0"/>
  </listeners>
  <plugins><search-path>)" +
         CEPBUS_PLUGIN_DIR + R"(</search-path><plugin name="nfa"/></plugins>
  <routes default-flow="st">
    <route address="orders.#" flow="reliable" qos="reliable"/>
    <route address="pairs.#" flow="reliable" qos="reliable"/>
  </routes>
  <service-assembly name="cep">
    <service-unit name="detector" type="cep">
      <query name="pairs" engine="nfa" input="orders.in" output="pairs.out">
        <option name="checkpoint_interval" value=")" +
         std::to_string(interval_ms) + R"("/>
        <option name="output_qos" value="reliable"/>
        <option name="idle_timeout" value=")" +
         std::to_string(idle_timeout_ms) + R"("/>
        <text>)" +
         query + R"(</text>
      </query>
    </service-unit>
  </service-assembly>
</cepbus>
)";
}

// What the composites' subscriber got: receptions by composite ts.
struct Received {
  std::map<Timestamp, size_t> times;
  size_t receptions = 0;
  size_t marked = 0;            // redeliveries the bus marked (delivery-count, first-acquirer)
  size_t unmarked_repeats = 0;  // a composite published again as new: what must never happen

  void add(const AmqpReceived& r) {
    const services::amqp::MappedEvent e = services::amqp::eventFromMessage(r.message);
    const Timestamp ts = e.event ? e.event->ts() : -1;
    ++receptions;
    if (r.delivery_count > 0 || !r.first_acquirer) {
      ++marked;
    } else if (times.count(ts) != 0) {
      ++unmarked_repeats;
    }
    ++times[ts];
  }
  void addAll(AmqpTestClient& subscriber) {
    subscriber.read<int>([&] {
      for (const AmqpReceived& r : subscriber.received["pairs"]) add(r);
      return 0;
    });
  }
};

void subscribePairs(AmqpTestClient& subscriber) {
  subscriber.subscribe("pairs.out", "pairs", /*durable=*/true, /*credit=*/1000);
}

std::string queries(int admin) { return testing::httpGet(admin, "/api/queries"); }

// A JSON number of the query's "checkpoints" object.
uint64_t checkpointFigure(const std::string& json, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + name + "\":\"?([0-9.]+)"))) return 0;
  return static_cast<uint64_t>(std::stod(m[1].str()));
}

TEST(CheckpointCrashTest, CompositesOfAKilledAndRestartedBusAreThoseOfAnUninterruptedRun) {
  const uint32_t seed = testing::crashSeed("checkpoint_crash");
  std::mt19937 rng(seed);
  const int kills = envInt("CEPBUS_CHECKPOINT_KILLS", 3);
  constexpr uint64_t kBatch = 2000;
  const int port = reservedPort();
  BusProcess bus(CEPBUS_BINARY, "cepbus-checkpoint-crash");
  Received got;
  std::set<uint64_t> accepted;
  std::vector<uint64_t> unaccepted;  // sent, not heard accepted: sent again after the restart
  uint64_t next = 2;                 // the Open of pair 1
  std::vector<uint64_t> bytes;
  auto sendRound = [&](AmqpTestClient& publisher, std::vector<uint64_t> ids) {
    std::vector<proton::message> messages;
    for (uint64_t n : ids) messages.push_back(order(n));
    publisher.send("orders.in", messages);
    return ids;
  };
  auto settle = [&](AmqpTestClient& publisher, const std::vector<uint64_t>& sent) {
    std::set<uint64_t> now;
    publisher.read<int>([&] {
      for (const proton::message_id& id : publisher.accepted_ids) {
        now.insert(proton::get<uint64_t>(id));
      }
      return 0;
    });
    unaccepted.clear();
    for (uint64_t n : sent) {
      if (now.count(n) != 0) {
        accepted.insert(n);
      } else {
        unaccepted.push_back(n);
      }
    }
  };
  for (int kill = 0; kill < kills; ++kill) {
    ASSERT_TRUE(bus.start(descriptor(port, 50), {port})) << "before kill " << kill;
    AmqpTestClient subscriber(client(port, "checkpoint-sub"));
    ASSERT_TRUE(subscriber.waitOpen());
    subscribePairs(subscriber);
    AmqpTestClient publisher(client(port));
    ASSERT_TRUE(publisher.waitOpen());
    // The batch ends on an Open half the time: a partial match across the
    // kill. The kill comes once some of it is accepted, a random time later.
    const uint64_t count = kBatch - std::uniform_int_distribution<uint64_t>(0, 1)(rng);
    std::vector<uint64_t> ids = unaccepted;
    for (uint64_t n = next; n < next + count; ++n) ids.push_back(n);
    next += count;
    const std::vector<uint64_t> sent = sendRound(publisher, ids);
    const size_t some = std::uniform_int_distribution<size_t>(1, sent.size() - 1)(rng);
    publisher.waitFor([&] { return publisher.accepted >= some; });
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<int>(0, 80'000)(rng)));
    bus.kill();
    settle(publisher, sent);
    got.addAll(subscriber);
    std::cout << "kill " << kill + 1 << ": accepted " << sent.size() - unaccepted.size() << "/"
              << sent.size() << ", composites so far " << got.times.size() << std::endl;
  }
  // The last run: what was never accepted goes again, then the stream's end
  // (the Close of the last Open), and a clean stop.
  ASSERT_TRUE(bus.start(descriptor(port, 50), {port}));
  const int admin = bus.adminPort();
  {
    AmqpTestClient subscriber(client(port, "checkpoint-sub"));
    ASSERT_TRUE(subscriber.waitOpen());
    subscribePairs(subscriber);
    AmqpTestClient publisher(client(port));
    ASSERT_TRUE(publisher.waitOpen());
    std::vector<uint64_t> ids = unaccepted;
    if (next % 2 == 1) ids.push_back(next++);  // the last pair's Close
    const std::vector<uint64_t> sent = sendRound(publisher, ids);
    ASSERT_TRUE(publisher.waitFor([&] { return publisher.accepted == sent.size(); },
                                  std::chrono::seconds(30)))
        << bus.err();
    settle(publisher, sent);
    const size_t pairs = (next - 2) / 2;
    subscriber.waitFor(
        [&] {
          Received now = got;
          for (const AmqpReceived& r : subscriber.received["pairs"]) now.add(r);
          return now.times.size() >= pairs;
        },
        std::chrono::seconds(30));
    // Redeliveries still under way are counted too.
    testing::settledValue(
        [&] {
          return subscriber.read<size_t>([&] { return subscriber.received["pairs"].size(); });
        },
        std::chrono::milliseconds(500));
    got.addAll(subscriber);
  }
  const std::string figures = queries(admin);
  EXPECT_TRUE(bus.stop());
  EXPECT_EQ(accepted.size(), next - 2) << "every order is accepted in the end";
  // The uninterrupted run: one Pair per pair, at its Close's ts.
  std::map<Timestamp, size_t> expected;
  for (uint64_t p = 1; 2 * p + 1 < next; ++p) expected[static_cast<Timestamp>(2 * p + 1)] = 1;
  size_t missing = 0, extra = 0;
  for (const auto& [ts, n] : expected) missing += got.times.count(ts) == 0;
  for (const auto& [ts, n] : got.times) extra += expected.count(ts) == 0;
  std::ostringstream line;
  line << "{\"test\":\"checkpoint_kill_restart\",\"seed\":" << seed << ",\"kills\":" << kills
       << ",\"orders\":" << next - 2 << ",\"composites_expected\":" << expected.size()
       << ",\"composites_received\":" << got.times.size() << ",\"receptions\":" << got.receptions
       << ",\"marked_redeliveries\":" << got.marked
       << ",\"unmarked_repeats\":" << got.unmarked_repeats << ",\"missing\":" << missing
       << ",\"extra\":" << extra
       << ",\"last_checkpoint_bytes\":" << checkpointFigure(figures, "last_bytes")
       << ",\"restored_bytes\":" << checkpointFigure(figures, "restored_bytes") << "}";
  std::cout << line.str() << "\n" << figures << std::endl;
  std::ofstream(std::string(CEPBUS_TEST_BUILD_DIR) + "/checkpoint_crash_results.jsonl",
                std::ios::app)
      << line.str() << "\n";
  std::string first_missing;
  for (const auto& [ts, n] : expected) {
    if (got.times.count(ts) == 0 && first_missing.size() < 200) {
      first_missing += std::to_string(ts) + " ";
    }
  }
  EXPECT_EQ(missing, 0u) << "composites of the uninterrupted run never received, the first: "
                         << first_missing << "\n"
                         << bus.err();
  EXPECT_EQ(extra, 0u) << "composites the uninterrupted run does not have";
  EXPECT_EQ(got.unmarked_repeats, 0u) << "a composite published twice";
  EXPECT_GT(checkpointFigure(figures, "restored_bytes"), 0u) << figures;
}

// Runs the bus until its query stored a checkpoint holding an open Open
// (pair 1), then stops it cleanly.
void checkpointAnOpen(BusProcess& bus, int port) {
  ASSERT_TRUE(bus.start(descriptor(port, 20), {port}));
  const int admin = bus.adminPort();
  AmqpTestClient publisher(client(port));
  ASSERT_TRUE(publisher.waitOpen());
  publisher.send("orders.in", {order(2)});
  ASSERT_TRUE(publisher.waitFor([&] { return publisher.accepted == 1; }));
  ASSERT_TRUE(testing::eventually(
      "a checkpoint", [&] { return checkpointFigure(queries(admin), "written") > 0; },
      std::chrono::seconds(30), std::chrono::milliseconds(20)))
      << queries(admin);
  bus.kill();
}

// Whether the bus's query counts a refused checkpoint within 10 s.
bool refusalShows(int admin) {
  return testing::eventually(
      "the refusal to show", [&] { return checkpointFigure(queries(admin), "restore_refused"); },
      std::chrono::seconds(10), std::chrono::milliseconds(20));
}

// On a bus whose query started empty after checkpointAnOpen(): pair 1's
// Close, then pair 2, make pair 2's composite alone (the Open of pair 1, had
// any of the stored state been kept, would pair too), then stops the bus.
void expectPairOneForgotten(BusProcess& bus, int port) {
  AmqpTestClient subscriber(client(port, "forgotten-sub"));
  ASSERT_TRUE(subscriber.waitOpen());
  subscribePairs(subscriber);
  ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.links_open["pairs"] == 1; }));
  AmqpTestClient publisher(client(port));
  ASSERT_TRUE(publisher.waitOpen());
  publisher.send("orders.in", {order(3), order(4), order(5)});
  ASSERT_TRUE(subscriber.waitFor([&] { return !subscriber.received["pairs"].empty(); }))
      << bus.err();
  sleepMs(200);  // a pair-1 composite would be out by now
  EXPECT_EQ(subscriber.receivedTs("pairs"), std::vector<Timestamp>({5}));
  EXPECT_TRUE(bus.stop());
}

TEST(CheckpointCrashTest, ARestartResumesAPartialMatchFromItsCheckpoint) {
  const int port = reservedPort();
  BusProcess bus(CEPBUS_BINARY, "cepbus-checkpoint-resume");
  ASSERT_NO_FATAL_FAILURE(checkpointAnOpen(bus, port));
  ASSERT_TRUE(bus.start(descriptor(port, 20), {port}));
  const int admin = bus.adminPort();
  AmqpTestClient subscriber(client(port, "resume-sub"));
  ASSERT_TRUE(subscriber.waitOpen());
  subscribePairs(subscriber);
  ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.links_open["pairs"] == 1; }));
  AmqpTestClient publisher(client(port));
  ASSERT_TRUE(publisher.waitOpen());
  publisher.send("orders.in", {order(3)});  // the Close of pair 1
  ASSERT_TRUE(subscriber.waitFor([&] { return !subscriber.received["pairs"].empty(); }))
      << bus.err() << queries(admin);
  EXPECT_EQ(subscriber.receivedTs("pairs"), std::vector<Timestamp>({3}));
  EXPECT_GT(checkpointFigure(queries(admin), "restored_bytes"), 0u) << queries(admin);
  EXPECT_TRUE(bus.stop());
}

// An event no query pairs, at `ts`: it keeps its link's event time there.
proton::message beat(int64_t ts) {
  proton::message m;
  m.subject("Beat");
  m.properties().put("ts", ts);
  return m;
}

// Pair 2 waits in the checkpoint for a slower link's ts 2 when the bus is
// killed. The restarted bus releases it once that time has passed for an
// idle timeout (the link is gone with the process), though nothing more
// comes; before the source clock was checkpointed it waited for ever.
TEST(CheckpointCrashTest, EventsHeldForASlowSourceComeOutAfterARestartWithoutNewEvents) {
  const int port = reservedPort();
  BusProcess bus(CEPBUS_BINARY, "cepbus-checkpoint-clock");
  const std::string xml = descriptor(port, 20, kPairsQuery, /*idle_timeout_ms=*/1000);
  ASSERT_TRUE(bus.start(xml, {port}));
  int admin = bus.adminPort();
  {
    AmqpTestClient subscriber(client(port, "clock-sub"));
    ASSERT_TRUE(subscriber.waitOpen());
    subscribePairs(subscriber);
    ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.links_open["pairs"] == 1; }));
    AmqpTestClient slow(client(port));
    AmqpTestClient fast(client(port));
    ASSERT_TRUE(slow.waitOpen());
    ASSERT_TRUE(fast.waitOpen());
    slow.send("orders.in", {order(2)});
    ASSERT_TRUE(slow.waitFor([&] { return slow.accepted == 1; }));
    fast.send("orders.in", {order(4), order(5)});
    ASSERT_TRUE(fast.waitFor([&] { return fast.accepted == 2; }));
    // The slow link stays live (a beat at its ts) until a checkpoint covers
    // the orders: one written after the detector consumed all three.
    auto beating = [&](const char* what, auto done) {
      return testing::eventually(
          what,
          [&] {
            slow.send("orders.in", {beat(2)});
            return done(queries(admin));
          },
          std::chrono::seconds(30), std::chrono::milliseconds(20));
    };
    uint64_t written = 0;
    ASSERT_TRUE(beating("the orders consumed", [&](const std::string& json) {
      written = checkpointFigure(json, "written");
      return checkpointFigure(json, "consumed") >= 3;
    })) << queries(admin);
    ASSERT_TRUE(beating("a checkpoint after them", [&](const std::string& json) {
      return checkpointFigure(json, "written") > written;
    })) << queries(admin);
    ASSERT_EQ(checkpointFigure(queries(admin), "matches"), 0u) << "pair 2 is held back";
    bus.kill();
    EXPECT_TRUE(subscriber.receivedTs("pairs").empty());
  }
  ASSERT_TRUE(bus.start(xml, {port}));
  admin = bus.adminPort();
  AmqpTestClient subscriber(client(port, "clock-sub"));
  ASSERT_TRUE(subscriber.waitOpen());
  subscribePairs(subscriber);
  ASSERT_TRUE(subscriber.waitFor([&] { return !subscriber.received["pairs"].empty(); },
                                 std::chrono::seconds(20)))
      << bus.err() << queries(admin);
  EXPECT_EQ(subscriber.receivedTs("pairs"), std::vector<Timestamp>({5}));
  EXPECT_TRUE(bus.stop());
}

// A checkpoint row damaged between two runs: refused with a message naming
// the query, counted; the query starts empty and runs.
TEST(CheckpointCrashTest, ADamagedCheckpointIsRefusedAndTheQueryStartsEmpty) {
  const int port = reservedPort();
  BusProcess bus(CEPBUS_BINARY, "cepbus-checkpoint-damaged");
  ASSERT_NO_FATAL_FAILURE(checkpointAnOpen(bus, port));
  testing::execRaw((bus.dir() / "journal.db").string(),
                   "UPDATE checkpoints SET state = substr(state, 1, length(state) - 3)");
  ASSERT_TRUE(bus.start(descriptor(port, 20), {port}));
  const int admin = bus.adminPort();
  ASSERT_TRUE(refusalShows(admin)) << queries(admin);
  EXPECT_NE(bus.err().find("query cep.detector/pairs: checkpoint refused"), std::string::npos)
      << bus.err();
  ASSERT_NO_FATAL_FAILURE(expectPairOneForgotten(bus, port));
}

// A checkpoint whose checksum holds but whose engine state fails part-way
// (the count of parked matches at its end made 5 where none follow): the
// engine's restore has read the partitions before it fails, so the query
// starts on a new, empty detection, never on half a snapshot: the Open of
// pair 1 the partitions held makes no pair with its Close.
TEST(CheckpointCrashTest, AStateThatFailsPartWayIsNotKeptInPart) {
  const int port = reservedPort();
  BusProcess bus(CEPBUS_BINARY, "cepbus-checkpoint-part-way");
  ASSERT_NO_FATAL_FAILURE(checkpointAnOpen(bus, port));
  const std::string journal = (bus.dir() / "journal.db").string();
  std::string state = testing::readBlobRaw(journal, "SELECT state FROM checkpoints");
  ASSERT_GT(state.size(), 8u);
  ASSERT_EQ(state[state.size() - 5], 0) << "the body ends with no parked match";
  state[state.size() - 5] = 5;
  const uint32_t crc =
      plugin::crc32({reinterpret_cast<const unsigned char*>(state.data()), state.size() - 4});
  for (size_t i = 0; i < 4; ++i) state[state.size() - 4 + i] = static_cast<char>(crc >> (8 * i));
  ASSERT_NO_FATAL_FAILURE(
      testing::writeBlobRaw(journal, "UPDATE checkpoints SET state = ?1", state));
  ASSERT_TRUE(bus.start(descriptor(port, 20), {port}));
  const int admin = bus.adminPort();
  ASSERT_TRUE(refusalShows(admin)) << queries(admin);
  EXPECT_NE(bus.err().find("exceeds"), std::string::npos) << bus.err();
  ASSERT_NO_FATAL_FAILURE(expectPairOneForgotten(bus, port));
}

// The query changed between two runs, its strategy with it (an edit of
// WITHIN alone would carry the state over, checkpoint.h): its stored state
// is another query's, refused as such, and the new query starts empty.
TEST(CheckpointCrashTest, TheCheckpointOfAnotherQueryIsRefused) {
  const int port = reservedPort();
  BusProcess bus(CEPBUS_BINARY, "cepbus-checkpoint-foreign");
  ASSERT_NO_FATAL_FAILURE(checkpointAnOpen(bus, port));
  const std::string other =
      "PATTERN SEQ(Open a, Close b) WHERE a.pair = b.pair WITHIN 2000 RETURN Pair(a.pair)";
  ASSERT_TRUE(bus.start(descriptor(port, 20, other), {port}));
  const int admin = bus.adminPort();
  ASSERT_TRUE(refusalShows(admin)) << queries(admin);
  EXPECT_NE(bus.err().find("it was written for another query or options"), std::string::npos)
      << bus.err();
  EXPECT_EQ(checkpointFigure(queries(admin), "restored_bytes"), 0u) << queries(admin);
  EXPECT_TRUE(bus.stop());
}

// A journal that refuses the checkpoints' rows (an SQLite trigger, as a
// full disk would): logged and counted, the query runs on, its composites
// held and its input unacknowledged; once the journal stores again, the
// composites come out.
TEST(CheckpointCrashTest, AJournalThatCannotStoreACheckpointHoldsTheCompositesBack) {
  const int port = reservedPort();
  BusProcess bus(CEPBUS_BINARY, "cepbus-checkpoint-refusing");
  ASSERT_TRUE(bus.start(descriptor(port, 20), {port}));
  const int admin = bus.adminPort();
  const std::string journal = (bus.dir() / "journal.db").string();
  testing::execRaw(journal,
                   "CREATE TRIGGER refuse BEFORE INSERT ON checkpoints "
                   "BEGIN SELECT RAISE(ABORT, 'checkpoints refused by the test'); END");
  AmqpTestClient subscriber(client(port, "refusing-sub"));
  ASSERT_TRUE(subscriber.waitOpen());
  subscribePairs(subscriber);
  ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.links_open["pairs"] == 1; }));
  AmqpTestClient publisher(client(port));
  ASSERT_TRUE(publisher.waitOpen());
  publisher.send("orders.in", {order(2), order(3)});
  ASSERT_TRUE(publisher.waitFor([&] { return publisher.accepted == 2; }));
  ASSERT_TRUE(testing::eventually(
      "a failed checkpoint", [&] { return checkpointFigure(queries(admin), "failed") > 0; },
      std::chrono::seconds(10), std::chrono::milliseconds(20)))
      << queries(admin);
  EXPECT_NE(bus.err().find("checkpoints refused by the test"), std::string::npos) << bus.err();
  EXPECT_TRUE(subscriber.received["pairs"].empty()) << "a composite out before its checkpoint";
  EXPECT_EQ(checkpointFigure(queries(admin), "held"), 1u) << queries(admin);
  testing::execRaw(journal, "DROP TRIGGER refuse");
  ASSERT_TRUE(subscriber.waitFor([&] { return !subscriber.received["pairs"].empty(); }))
      << bus.err() << queries(admin);
  EXPECT_EQ(subscriber.receivedTs("pairs"), std::vector<Timestamp>({3}));
  EXPECT_TRUE(bus.stop());
}

}  // namespace
}  // namespace cepbus
