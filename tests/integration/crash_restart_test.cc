// kill -9 under load, end to end with the real `cepbus`: a reliable route
// with a journal, a CEP query and a durable AMQP subscriber, the bus killed
// with SIGKILL at random moments and restarted on the same journal; the same
// across a bridge between two buses; what a crash does to a query's partial
// matches; and the journal's disk faults (full, truncated, corrupted).
//
// The random moments come from a seeded generator: the seed is printed, and
// CEPBUS_CRASH_SEED=N runs the same schedule again. The figures of a run
// (kills, accepted, delivered, duplicates) are printed as one JSON line and
// written to crash_restart_results.jsonl in the build folder.

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/mount.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "flows/journal/batch_record.h"
#include "flows/journal/event_record.h"
#include "tests/integration/order_stream.h"
#include "tests/testing/amqp_test_client.h"
#include "tests/testing/bus_process.h"
#include "tests/testing/http_get.h"
#include "tests/testing/ports.h"
#include "tests/testing/wait.h"

namespace cepbus {
namespace {

using testing::AmqpReceived;
using testing::AmqpTestClient;
using testing::BusProcess;
using testing::client;
using testing::kPairsQuery;
using testing::order;
using testing::orders;
using testing::reservedPort;

uint64_t idOf(const proton::message& m) { return proton::get<uint64_t>(m.id()); }

// Lets time pass on purpose: a random moment to kill the bus at, or a window
// in which something must not happen. Waits for something use eventually().
void sleepMs(int64_t ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// An admin listener on a port of the bus's choosing (BusProcess::adminPort()).
constexpr char kAdminHttp[] = R"(<http host="127.0.0.1" port="0"/>)";

// The bus's admin answer at `target` matches `pattern` (a JSON number that may
// be rendered as a string too: "n" or n).
bool adminShows(int admin, const std::string& target, const std::string& pattern) {
  return std::regex_search(testing::httpGet(admin, target), std::regex(pattern));
}

// How many `address` messages `client` received so far.
size_t receivedCount(AmqpTestClient& client, const std::string& address) {
  return client.read<size_t>([&] { return client.received[address].size(); });
}

// What a run's subscriber got, against what its publishers heard accepted.
struct Tally {
  std::set<uint64_t> accepted;
  std::map<uint64_t, size_t> times;  // id -> receptions
  size_t receptions = 0;
  size_t marked = 0;            // receptions marked as redeliveries
  size_t unmarked_repeats = 0;  // a reception of an id seen before, not marked: AMQP forbids it
  size_t order_violations = 0;  // first deliveries (unmarked) not in publish order
  uint64_t last_unmarked = 0;

  void accept(AmqpTestClient& publisher) {
    publisher.read<int>([&] {
      for (const proton::message_id& id : publisher.accepted_ids) {
        accepted.insert(proton::get<uint64_t>(id));
      }
      return 0;
    });
  }
  void receive(const AmqpReceived& r) {
    const uint64_t id = idOf(r.message);
    const bool redelivery = r.delivery_count > 0 || !r.first_acquirer;
    ++receptions;
    if (redelivery) {
      ++marked;
    } else {
      if (times.count(id) != 0) ++unmarked_repeats;
      if (id <= last_unmarked && last_unmarked != 0) ++order_violations;
      last_unmarked = std::max(last_unmarked, id);
    }
    ++times[id];
  }
  void receiveAll(AmqpTestClient& subscriber, const std::string& link) {
    subscriber.read<int>([&] {
      for (const AmqpReceived& r : subscriber.received[link]) receive(r);
      return 0;
    });
  }
  size_t missing() const {
    size_t n = 0;
    for (uint64_t id : accepted) n += times.count(id) == 0;
    return n;
  }
  size_t duplicates() const {
    size_t n = 0;
    for (const auto& [id, count] : times) n += count - 1;
    return n;
  }
};

// One JSON line of figures, printed and appended to the build folder's
// crash_restart_results.jsonl (docs/operations.md quotes it).
void report(const std::string& test, uint32_t seed, int kills, const Tally& t) {
  std::ostringstream line;
  line << "{\"test\":\"" << test << "\",\"seed\":" << seed << ",\"kills\":" << kills
       << ",\"accepted\":" << t.accepted.size() << ",\"delivered\":" << t.times.size()
       << ",\"receptions\":" << t.receptions << ",\"duplicates\":" << t.duplicates()
       << ",\"marked_redeliveries\":" << t.marked << ",\"missing\":" << t.missing() << "}";
  std::cout << line.str() << std::endl;
  std::ofstream(std::string(CEPBUS_TEST_BUILD_DIR) + "/crash_restart_results.jsonl", std::ios::app)
      << line.str() << "\n";
}

// A bus with an AMQP listener, a reliable route "orders.#" on the journal,
// and the pairs query on orders.in; `extra` goes inside <cepbus>.
std::string descriptor(int port, int commit_delay_us, const std::string& journal = "journal.db",
                       const std::string& extra = "") {
  return R"(<cepbus name="crash">
  <journal path=")" +
         journal + R"(" commit-delay-us=")" + std::to_string(commit_delay_us) + R"("/>
  <listeners><amqp host="127.0.0.1" port=")" +
         std::to_string(port) + R"(" allow-anonymous="true"/>)" + extra + R"(</listeners>
  <plugins><search-path>)" +
         CEPBUS_PLUGIN_DIR + R"(</search-path><plugin name="nfa"/></plugins>
  <routes default-flow="st"><route address="orders.#" flow="reliable" qos="reliable"/></routes>
  <service-assembly name="cep">
    <service-unit name="detector" type="cep">
      <query name="pairs" engine="nfa" input="orders.in" output="pairs.out">
        <text>)" +
         kPairsQuery + R"(</text>
      </query>
    </service-unit>
  </service-assembly>
</cepbus>
)";
}

// Where in the life of a batch the bus is killed.
enum class Moment { kMidBatch, kMidCommit, kMidDelivery, kPartialMatch };
constexpr const char* kMomentNames[] = {"mid-batch", "mid-commit", "mid-delivery", "partial-match"};

// 24 kills, six at each moment in a random order, each after a random delay;
// the journal's commit delay changes between restarts (0: every record is
// written at once; 2000 us: most are cancelled by the subscriber's accept).
TEST(CrashRestartTest, EveryAcceptedMessageArrivesThroughTwentyFourKills) {
  const uint32_t seed = testing::crashSeed("crash_restart");
  std::mt19937 rng(seed);
  constexpr int kKills = 24;
  constexpr uint64_t kBatch = 300;
  std::vector<Moment> moments;
  moments.reserve(kKills);
  for (int i = 0; i < kKills; ++i) moments.push_back(static_cast<Moment>(i % 4));
  std::shuffle(moments.begin(), moments.end(), rng);
  const int port = reservedPort();
  BusProcess bus(CEPBUS_BINARY, "cepbus-crash");
  Tally tally;
  uint64_t next = 1;
  for (int kill = 0; kill < kKills; ++kill) {
    const int delay_us = std::uniform_int_distribution<int>(0, 1)(rng) == 0 ? 0 : 2000;
    ASSERT_TRUE(bus.start(descriptor(port, delay_us), {port})) << "before kill " << kill;
    AmqpTestClient subscriber(client(port, "crash-sub"));
    ASSERT_TRUE(subscriber.waitOpen());
    subscriber.subscribe("orders.#", "feed", /*durable=*/true);
    ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.links_open["feed"] == 1; }));
    AmqpTestClient publisher(client(port));
    ASSERT_TRUE(publisher.waitOpen());
    const Moment moment = moments[static_cast<size_t>(kill)];
    // A partial match: the batch ends on an Open whose Close never comes.
    const uint64_t count =
        moment == Moment::kPartialMatch ? kBatch - (next + kBatch - 1) % 2 : kBatch;
    publisher.send("orders.in", orders(next, count));
    switch (moment) {
      case Moment::kMidBatch:
        sleepMs(std::uniform_int_distribution<int>(0, 60)(rng));
        break;
      case Moment::kMidCommit: {
        const size_t some = std::uniform_int_distribution<size_t>(1, count / 2)(rng);
        publisher.waitFor([&] { return publisher.accepted >= some; });
        std::this_thread::sleep_for(
            std::chrono::microseconds(std::uniform_int_distribution<int>(0, 3000)(rng)));
        break;
      }
      case Moment::kMidDelivery: {
        const size_t some = std::uniform_int_distribution<size_t>(1, count)(rng);
        subscriber.waitFor([&] { return subscriber.received["feed"].size() >= some; });
        break;
      }
      case Moment::kPartialMatch:
        publisher.waitFor([&] { return publisher.accepted == count; });
        sleepMs(std::uniform_int_distribution<int>(0, 20)(rng));
        break;
    }
    bus.kill();
    std::cout << "kill " << kill + 1 << " " << kMomentNames[static_cast<int>(moment)]
              << " commit-delay-us=" << delay_us << " accepted "
              << publisher.read<size_t>([&] { return publisher.accepted; }) << "/" << count
              << std::endl;
    tally.accept(publisher);
    tally.receiveAll(subscriber, "feed");
    next += count;
  }
  // The last start: the subscriber gets what is left, then a clean stop.
  ASSERT_TRUE(bus.start(descriptor(port, 2000), {port}));
  {
    AmqpTestClient subscriber(client(port, "crash-sub"));
    ASSERT_TRUE(subscriber.waitOpen());
    subscriber.subscribe("orders.#", "feed", /*durable=*/true);
    subscriber.waitFor(
        [&] {
          Tally now = tally;
          for (const AmqpReceived& r : subscriber.received["feed"]) now.receive(r);
          return now.missing() == 0;
        },
        std::chrono::seconds(30));
    // Redeliveries still under way are counted too: duplicates are judged.
    testing::settledValue([&] { return receivedCount(subscriber, "feed"); },
                          std::chrono::milliseconds(500));
    tally.receiveAll(subscriber, "feed");
  }
  EXPECT_TRUE(bus.stop());
  report("kill_restart", seed, kKills, tally);
  EXPECT_GT(tally.accepted.size(), 0u);
  EXPECT_EQ(tally.missing(), 0u) << "accepted messages never delivered";
  EXPECT_EQ(tally.unmarked_repeats, 0u) << "a duplicate without delivery-count/first-acquirer";
  EXPECT_EQ(tally.order_violations, 0u) << "first deliveries out of publish order";
}

// Partial matches live in the detector's memory: after a crash the query
// starts empty, so an Open consumed before the kill never pairs with its
// Close after the restart, while a pair entirely after the restart matches.
TEST(CrashRestartTest, APartialMatchDoesNotSurviveACrash) {
  const int port = reservedPort();
  BusProcess bus(CEPBUS_BINARY, "cepbus-crash-cep");
  ASSERT_TRUE(bus.start(descriptor(port, 2000, "journal.db", kAdminHttp), {port}));
  const int admin = bus.adminPort();
  ASSERT_GT(admin, 0) << bus.err();
  {
    AmqpTestClient publisher(client(port));
    ASSERT_TRUE(publisher.waitOpen());
    publisher.send("orders.in", {order(10)});  // Open of pair 5
    ASSERT_TRUE(publisher.waitFor([&] { return publisher.accepted == 1; }));
    // Consumed by the detector, and its acknowledgement committed to the
    // journal (a transaction of its own, 50 ms on), so no restart redelivers it.
    ASSERT_TRUE(testing::eventually(
        "the detector to consume the Open",
        [&] { return adminShows(admin, "/api/queries", R"("consumed":"?1\b)"); },
        std::chrono::seconds(30), std::chrono::milliseconds(20)))
        << testing::httpGet(admin, "/api/queries");
    ASSERT_TRUE(testing::eventually(
        "the journal to commit the Open's acknowledgement",
        [&] { return adminShows(admin, "/api/flows", R"("acknowledged":"?[1-9])"); },
        std::chrono::seconds(30), std::chrono::milliseconds(20)))
        << testing::httpGet(admin, "/api/flows");
  }
  bus.kill();
  ASSERT_TRUE(bus.start(descriptor(port, 2000), {port}));
  AmqpTestClient watcher(client(port));
  ASSERT_TRUE(watcher.waitOpen());
  watcher.receive("pairs", "pairs.out");
  ASSERT_TRUE(watcher.waitFor([&] { return watcher.links_open["pairs"] == 1; }));
  AmqpTestClient publisher(client(port));
  ASSERT_TRUE(publisher.waitOpen());
  // Close of pair 5, then pair 6 whole.
  publisher.send("orders.in", {order(11), order(12), order(13)});
  ASSERT_TRUE(publisher.waitFor([&] { return publisher.accepted == 3; }));
  ASSERT_TRUE(watcher.waitFor([&] { return !watcher.received["pairs"].empty(); })) << bus.err();
  // A pair-5 match, had the Open survived, would be out by now: its Close
  // went in before pair 6. The wait covers one that trails pair 6's.
  sleepMs(200);
  // The one match is pair 6 (a composite event carries its last event's ts).
  EXPECT_EQ(watcher.receivedTs("pairs"), std::vector<Timestamp>({13}));
  EXPECT_TRUE(bus.stop());
}

// A durable subscription is recorded in the journal when it is made: after
// a kill -9 and a restart the bus re-creates it, parked, before it accepts
// connections, so what is published before its subscriber re-attaches is
// kept for it and delivered in order.
TEST(CrashRestartTest, ADurableSubscriptionKeepsWhatIsPublishedBetweenARestartAndItsReattach) {
  constexpr uint64_t kEvents = 50;
  const int port = reservedPort();
  BusProcess bus(CEPBUS_BINARY, "cepbus-crash-durable");
  ASSERT_TRUE(bus.start(descriptor(port, 2000, "journal.db", kAdminHttp), {port}));
  const int admin = bus.adminPort();
  ASSERT_GT(admin, 0) << bus.err();
  {
    AmqpTestClient subscriber(client(port, "durable-sub"));
    ASSERT_TRUE(subscriber.waitOpen());
    subscriber.subscribe("orders.kept", "kept", /*durable=*/true);
    ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.links_open["kept"] == 1; }));
    subscriber.closeReceiver("kept", /*detach=*/true);
  }
  ASSERT_TRUE(testing::eventually(
      "the listener to park the detached subscription",
      [&] {
        return adminShows(admin, "/api/components/amqp-listener",
                          R"("parked_subscriptions":"?1\b)");
      },
      std::chrono::seconds(30), std::chrono::milliseconds(20)))
      << testing::httpGet(admin, "/api/components/amqp-listener");
  bus.kill();
  ASSERT_TRUE(bus.start(descriptor(port, 2000), {port}));
  {
    AmqpTestClient publisher(client(port));
    ASSERT_TRUE(publisher.waitOpen());
    publisher.send("orders.kept", orders(1, kEvents));
    ASSERT_TRUE(publisher.waitFor([&] { return publisher.accepted == kEvents; }));
  }
  AmqpTestClient subscriber(client(port, "durable-sub"));
  ASSERT_TRUE(subscriber.waitOpen());
  subscriber.subscribe("orders.kept", "kept", /*durable=*/true);
  subscriber.waitFor([&] { return subscriber.received["kept"].size() >= kEvents; });
  std::vector<uint64_t> ids;
  subscriber.read<int>([&] {
    for (const AmqpReceived& r : subscriber.received["kept"]) ids.push_back(idOf(r.message));
    return 0;
  });
  std::vector<uint64_t> expected;
  for (uint64_t n = 1; n <= kEvents; ++n) expected.push_back(n);
  EXPECT_EQ(ids, expected) << bus.err();
  EXPECT_TRUE(bus.stop());
}

// Two buses: b journals what is published on local.# and bridges it out to
// a, whose reliable route journals it for a replay-sink (a subscription the
// descriptor declares, so it exists before the bridge reconnects). a is
// killed four times, then b three times, each under a publisher's flood.
TEST(CrashRestartTest, EveryAcceptedMessageCrossesABridgeThroughKillsOfBothBuses) {
  const uint32_t seed = testing::crashSeed("crash_restart");
  std::mt19937 rng(seed);
  const int port_a = reservedPort();
  const int port_b = reservedPort();
  const std::string a_xml = R"(<cepbus name="a">
  <journal path="journal.db" commit-delay-us="0"/>
  <listeners><amqp host="127.0.0.1" port=")" +
                            std::to_string(port_a) + R"(" allow-anonymous="true"/></listeners>
  <routes default-flow="st"><route address="from-b.#" flow="reliable" qos="reliable"/></routes>
  <service-assembly name="out">
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="received.jsonl"/><subscribe address="from-b.#"/>
    </service-unit>
  </service-assembly>
</cepbus>
)";
  const std::string b_xml = R"(<cepbus name="b">
  <journal path="journal.db"/>
  <listeners><amqp host="127.0.0.1" port=")" +
                            std::to_string(port_b) + R"(" allow-anonymous="true"/></listeners>
  <routes default-flow="st"><route address="local.#" flow="reliable" qos="reliable"/></routes>
  <service-assembly name="bridges">
    <service-unit name="out" type="amqp-bridge">
      <param name="url" value="127.0.0.1:)" +
                            std::to_string(port_a) + R"("/>
      <param name="remote-address" value="from-b.ticks"/>
      <param name="direction" value="out"/>
      <param name="reconnect-delay-ms" value="20"/>
      <subscribe address="local.#"/>
    </service-unit>
  </service-assembly>
</cepbus>
)";
  BusProcess a(CEPBUS_BINARY, "cepbus-crash-bridge-a");
  BusProcess b(CEPBUS_BINARY, "cepbus-crash-bridge-b");
  // What a's sink wrote, gathered before each restart (the sink starts its file anew).
  std::map<int64_t, size_t> arrived;
  auto gather = [&] {
    std::ifstream in(a.dir() / "received.jsonl");
    static const std::regex kTs("\"ts\":([0-9]+)");
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (std::regex_search(line, m, kTs)) ++arrived[std::stoll(m[1].str())];
    }
  };
  Tally tally;
  constexpr int kKillsOfA = 4, kKillsOfB = 3;
  constexpr uint64_t kBatch = 300;
  uint64_t next = 1;
  ASSERT_TRUE(a.start(a_xml, {port_a}));
  ASSERT_TRUE(b.start(b_xml, {port_b}));
  for (int kill = 0; kill < kKillsOfA + kKillsOfB; ++kill) {
    const bool kill_a = kill < kKillsOfA;
    // b is killed mid-flood: a larger batch, a shorter delay.
    const uint64_t count = kill_a ? kBatch : 4 * kBatch;
    AmqpTestClient publisher(client(port_b));
    ASSERT_TRUE(publisher.waitOpen());
    publisher.send("local.sensor", orders(next, count));
    sleepMs(std::uniform_int_distribution<int>(kill_a ? 5 : 20, kill_a ? 150 : 200)(rng));
    BusProcess& victim = kill_a ? a : b;
    victim.kill();
    if (kill_a) {
      // b keeps accepting while a is away: the bridge holds what it cannot send.
      publisher.waitFor([&] { return publisher.accepted + publisher.released == count; },
                        std::chrono::seconds(5));
      gather();
    }
    tally.accept(publisher);
    std::cout << "kill " << kill + 1 << " of " << (kill_a ? "a (receiving)" : "b (sending)")
              << ": accepted " << publisher.read<size_t>([&] { return publisher.accepted; }) << "/"
              << count << std::endl;
    next += count;
    ASSERT_TRUE(victim.start(kill_a ? a_xml : b_xml, {kill_a ? port_a : port_b}));
  }
  // Everything accepted at b reaches a's sink (b redelivers its journal to the bridge).
  auto missing = [&] {
    size_t n = 0;
    for (uint64_t id : tally.accepted) n += arrived.count(static_cast<int64_t>(id)) == 0;
    return n;
  };
  std::map<int64_t, size_t> before = arrived;
  testing::waitUntil(
      [&] {
        arrived = before;
        gather();
        return missing() == 0;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(100));  // judged below
  EXPECT_TRUE(b.stop());
  EXPECT_TRUE(a.stop());
  arrived = before;
  gather();
  for (const auto& [ts, count] : arrived) tally.times[static_cast<uint64_t>(ts)] = count;
  for (const auto& [ts, count] : arrived) tally.receptions += count;
  report("bridge_kill_restart", seed, kKillsOfA + kKillsOfB, tally);
  EXPECT_GT(tally.accepted.size(), 0u);
  EXPECT_EQ(missing(), 0u) << "accepted at b, never arrived at a";
}

// Mounts a small tmpfs for a journal that runs out of space; skips the test
// where mounting is not allowed (not root). Unmounted when destroyed.
class SmallDisk {
 public:
  SmallDisk(std::filesystem::path dir, const std::string& size) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_);
    const std::string options = "size=" + size;
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, options.c_str()) == 0) {
      mounted_ = true;
    } else {
      error_ = std::strerror(errno);
    }
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  // Writes a file until the disk is full.
  void fill() {
    std::ofstream out(dir_ / "filler", std::ios::binary);
    const std::string block(4096, 'x');
    while (out.write(block.data(), static_cast<std::streamsize>(block.size()))) out.flush();
  }
  void release() { std::filesystem::remove(dir_ / "filler"); }

 private:
  std::filesystem::path dir_;
  bool mounted_ = false;
  std::string error_;
};

// A subscriber that never accepts holds every record in the journal: a
// message is accepted only once its record is durable there.
void subscribeWithoutAccepting(AmqpTestClient& subscriber) {
  subscriber.subscribe("orders.#", "feed", /*durable=*/false, /*credit=*/1000, /*accept_limit=*/0);
}

// (a) Disk full: the journal cannot grow. The bus releases what it cannot
// journal (the publisher may retry), logs the journal's error and counts it,
// accepts nothing it did not journal, and journals again once space returns.
TEST(CrashRestartTest, AFullDiskRefusesWhatTheJournalCannotHoldAndRecovers) {
  const int port = reservedPort();
  BusProcess bus(CEPBUS_BINARY, "cepbus-crash-disk");
  SmallDisk disk(bus.dir() / "disk", "1m");
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here: " << disk.error();
  ASSERT_TRUE(bus.start(descriptor(port, 0, "disk/journal.db", kAdminHttp), {port}));
  const int admin = bus.adminPort();
  ASSERT_GT(admin, 0) << bus.err();
  Tally tally;
  {
    AmqpTestClient subscriber(client(port, "disk-sub"));
    ASSERT_TRUE(subscriber.waitOpen());
    subscribeWithoutAccepting(subscriber);
    ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.links_open["feed"] == 1; }));
    AmqpTestClient publisher(client(port));
    ASSERT_TRUE(publisher.waitOpen());
    publisher.send("orders.in", orders(1, 50));
    ASSERT_TRUE(publisher.waitFor([&] { return publisher.accepted == 50; }));
    disk.fill();
    // More than the WAL's room left from before; fewer than the subscriber's
    // buffer (1000), which the unaccepted deliveries fill and which bounds
    // the publisher's credit.
    constexpr uint64_t kFull = 600;
    publisher.send("orders.in", orders(51, kFull));
    // Refused: released, and the link's credit withheld for a while (the
    // admission's backpressure), so not every message has gone out yet.
    ASSERT_TRUE(publisher.waitFor([&] { return publisher.released > 0; }))
        << "accepted " << publisher.read<size_t>([&] { return publisher.accepted; }) << "\n"
        << bus.err();
    // Time for the rest of the flood to be answered before space returns
    // (595 to 600 of the 600 released by then in five runs). A poll for
    // every message answered instead timed out in three runs of five, with
    // a few never answered while the disk stayed full: kept as a fixed wait
    // until that is understood.
    sleepMs(500);
    const size_t refused = publisher.read<size_t>([&] { return publisher.released; });
    EXPECT_GT(refused, 0u) << "a full disk refused nothing";
    EXPECT_NE(bus.err().find("disk/journal.db"), std::string::npos) << bus.err();
    EXPECT_NE(bus.err().find("full"), std::string::npos) << bus.err();
    std::cout << "disk full: released " << refused << "; the bus logged:\n" << bus.err();
    EXPECT_EQ(testing::httpGet(admin, "/api/flows").find("\"errors\":0"), std::string::npos)
        << testing::httpGet(admin, "/api/flows");
    disk.release();
    const size_t before = publisher.read<size_t>([&] { return publisher.accepted; });
    publisher.send("orders.in", orders(51 + kFull, 50));
    ASSERT_TRUE(publisher.waitFor([&] { return publisher.accepted == before + 50; })) << bus.err();
    tally.accept(publisher);
  }
  // Killed and restarted: what was accepted was journaled, and comes again.
  bus.kill();
  ASSERT_TRUE(bus.start(descriptor(port, 0, "disk/journal.db"), {port}));
  AmqpTestClient subscriber(client(port, "disk-sub"));
  ASSERT_TRUE(subscriber.waitOpen());
  subscriber.subscribe("orders.#", "feed");
  subscriber.waitFor([&] {
    Tally now = tally;
    for (const AmqpReceived& r : subscriber.received["feed"]) now.receive(r);
    return now.missing() == 0;
  });
  tally.receiveAll(subscriber, "feed");
  EXPECT_EQ(tally.missing(), 0u) << "accepted while the disk was full, yet not journaled";
  EXPECT_TRUE(bus.stop());
}

// (b) The journal damaged between two runs: 40 records held for a
// subscriber that never accepted them, then the file truncated or a page of
// it overwritten, or one record's event made undecodable. The bus either refuses to start, naming
// the journal and what is wrong with it, or starts and says what it lost (log line and the
// `corrupt` counter); it never drops a record it could read.
class DamagedJournalTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DamagedJournalTest, TheBusRefusesOrSaysWhatItLost) {
  const std::string damage = GetParam();
  const int port = reservedPort();
  BusProcess bus(CEPBUS_BINARY, "cepbus-crash-damaged");
  {
    ASSERT_TRUE(bus.start(descriptor(port, 0), {port}));
    AmqpTestClient subscriber(client(port, "damage-sub"));
    ASSERT_TRUE(subscriber.waitOpen());
    subscribeWithoutAccepting(subscriber);
    ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.links_open["feed"] == 1; }));
    AmqpTestClient publisher(client(port));
    ASSERT_TRUE(publisher.waitOpen());
    publisher.send("orders.in", orders(1, 40));
    ASSERT_TRUE(publisher.waitFor([&] { return publisher.accepted == 40; }));
  }
  ASSERT_TRUE(bus.stop());  // the records stay journaled, checkpointed into the file
  const std::filesystem::path journal = bus.dir() / "journal.db";
  const auto size = std::filesystem::file_size(journal);
  ASSERT_GT(size, 8192u);
  if (damage == std::string("truncated")) {
    std::filesystem::resize_file(journal, size / 2);
  } else if (damage == std::string("record")) {
    // One live record of the subscriber's gets its event as a binary record
    // (flows/journal/event_record.h) missing its last bytes, in a row
    // resealed around it (flows/journal/batch_record.h): neither SQLite nor
    // the row's checksum can tell, the bus must. Through SQLite, so that the damage
    // lands in a row the bus will read (a byte search can hit a stale copy
    // of a row in a free page and damage nothing).
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(journal.c_str(), &db), SQLITE_OK);
    sqlite3_stmt* select = nullptr;
    sqlite3_prepare_v2(db, "SELECT n, records FROM pending_batches ORDER BY n", -1, &select,
                       nullptr);
    int64_t row = 0;
    std::string resealed;
    while (row == 0 && sqlite3_step(select) == SQLITE_ROW) {
      auto records = flows::decodeBatchRecord(
          std::string_view(static_cast<const char*>(sqlite3_column_blob(select, 1)),
                           static_cast<size_t>(sqlite3_column_bytes(select, 1))));
      ASSERT_TRUE(records.isOk()) << records.status().toString();
      for (flows::JournalRecord& r : *records) {
        if (r.target.name().find("damage-sub/feed") == std::string_view::npos) continue;
        if (r.stored_event.empty()) r.stored_event = flows::encodeEventRecord(*r.event);
        r.stored_event.resize(r.stored_event.size() - 3);
        std::vector<const flows::JournalRecord*> pointers;
        for (const flows::JournalRecord& each : *records) pointers.push_back(&each);
        resealed = flows::encodeBatchRecord(pointers);
        row = sqlite3_column_int64(select, 0);
        break;
      }
    }
    sqlite3_finalize(select);
    sqlite3_stmt* update = nullptr;
    sqlite3_prepare_v2(db, "UPDATE pending_batches SET records = ? WHERE n = ?", -1, &update,
                       nullptr);
    sqlite3_bind_blob(update, 1, resealed.data(), static_cast<int>(resealed.size()), SQLITE_STATIC);
    sqlite3_bind_int64(update, 2, row);
    const int rc = sqlite3_step(update);
    sqlite3_finalize(update);
    const int changed = sqlite3_changes(db);
    sqlite3_close(db);
    ASSERT_EQ(rc, SQLITE_DONE);
    ASSERT_EQ(changed, 1);
  } else {
    std::fstream f(journal, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size / 2));
    const std::string garbage(4096, '\xA5');
    f.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
  }
  if (!bus.start(descriptor(port, 0, "journal.db", kAdminHttp), {port})) {
    // Refused: the log names the journal and says why.
    EXPECT_NE(bus.err().find("journal.db"), std::string::npos) << bus.err();
    std::cout << damage << " journal: the bus refused to start:\n" << bus.err() << std::endl;
    return;
  }
  const int admin = bus.adminPort();
  AmqpTestClient subscriber(client(port, "damage-sub"));
  ASSERT_TRUE(subscriber.waitOpen());
  subscriber.subscribe("orders.#", "feed");
  ASSERT_TRUE(subscriber.waitFor([&] { return subscriber.links_open["feed"] == 1; }));
  // The redelivery, counted once it is over (a second without a message).
  const size_t got = testing::settledValue([&] { return receivedCount(subscriber, "feed"); },
                                           std::chrono::seconds(1));
  const std::string flows = testing::httpGet(admin, "/api/flows");
  std::cout << damage << " journal: started; redelivered " << got << " of 40" << std::endl;
  if (damage == std::string("record")) {
    EXPECT_EQ(got, 39u);
  }
  if (got < 40) {
    EXPECT_EQ(flows.find("\"corrupt\":0"), std::string::npos) << flows;
    EXPECT_NE(bus.err().find("does not decode"), std::string::npos) << bus.err();
  }
  EXPECT_TRUE(bus.stop());
}

INSTANTIATE_TEST_SUITE_P(Damage, DamagedJournalTest,
                         ::testing::Values("truncated", "overwritten", "record"));

}  // namespace
}  // namespace cepbus
