// A flood of new names against the real `cepbus` with real AMQP clients:
// one client publishes events whose event types and property names are all
// new, each batch through links to new target addresses it closes after
// the batch, then disconnects. The names were held only while their events
// and links lived (bus/core/wire_names.h), so the names clients hold come
// back to what they were before, the bus's resident set to within 16 MB,
// and a second client publishing new names to new addresses is accepted
// throughout and after.
//
// The suite floods 200,000 names; CEPBUS_FLOOD_NAMES=N floods N (the long
// run of docs/operations.md: 2,000,000).
//
// A replay file is another door: a file whose every line names a new
// attribute is replayed in the memory of one that repeats its names.
//
// tests/bench/wire_name_flood_bench.py runs the 2,000,000-name flood
// against any cepbus binary and prints JSON.

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <proton/message.hpp>
#include <string>
#include <vector>

#include "tests/testing/amqp_test_client.h"
#include "tests/testing/bus_process.h"
#include "tests/testing/http_get.h"
#include "tests/testing/ports.h"
#include "tests/testing/wait.h"

namespace cepbus {
namespace {

// Under a sanitizer the allocator is the sanitizer's: AddressSanitizer keeps
// freed blocks in its quarantine, and both keep what they mapped, so the
// bus's resident set cannot show names given back. Those builds flood (the
// hold and give-back paths under the sanitizer, the other client served
// throughout) without the RSS bound, which the regular build checks.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kRssComparable = false;
#else
constexpr bool kRssComparable = true;
#endif

using testing::AmqpTestClient;
using testing::BusProcess;
using testing::httpGet;
using testing::reservedPort;

proton::message event(const std::string& type, int64_t ts, const std::string& property) {
  proton::message m;
  m.subject(type);
  m.properties().put("ts", ts);
  m.properties().put(property, ts);
  return m;
}

// The bus's resident set now (VmRSS), in kB.
uint64_t rssKb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmRSS:")) return std::stoull(line.substr(6));
  }
  return 0;
}

// A metric's value in a /metrics scrape (0 when it is missing).
uint64_t metric(const std::string& scrape, const std::string& name) {
  const size_t at = scrape.find("\n" + name + " ");
  return at == std::string::npos ? 0 : std::stoull(scrape.substr(at + name.size() + 2));
}

uint64_t floodNames() {
  const char* n = std::getenv("CEPBUS_FLOOD_NAMES");
  return n != nullptr ? std::stoull(n) : 200'000;
}

TEST(WireNameFloodTest, AFloodOfNewNamesIsGivenBackAndAnotherClientIsServedThroughout) {
  BusProcess bus(CEPBUS_BINARY, "cepbus-wire-name-flood");
  const int port = reservedPort();
  const int http_port = reservedPort();
  // max-names far below the flood: only names given back let it through.
  ASSERT_TRUE(bus.start("<cepbus name=\"flood\"><listeners><amqp host=\"127.0.0.1\" port=\"" +
                            std::to_string(port) +
                            "\" allow-anonymous=\"true\" max-names=\"1000\"/>"
                            "<http host=\"127.0.0.1\" port=\"" +
                            std::to_string(http_port) +
                            "\"/></listeners>"
                            "<routes default-flow=\"st\"/></cepbus>\n",
                        {port, http_port}));
  auto namesHeld = [&] { return metric(httpGet(http_port, "/metrics"), "cepbus_wire_names_held"); };
  AmqpTestClient other(port, "other");
  ASSERT_TRUE(other.waitOpen());
  size_t other_sent = 0;
  // A new address, a new type and a new property, subscribed to and published.
  auto serveOther = [&] {
    const std::string n = std::to_string(other_sent);
    const std::string address = "other.a" + n;
    other.subscribe(address);
    ASSERT_TRUE(other.waitFor([&] { return other.links_open.count(address) > 0; }));
    other.send(address, {event("OtherType" + n, 1, "other_" + n)});
    ++other_sent;
    ASSERT_TRUE(other.waitFor([&] { return other.accepted + other.rejected == other_sent; }));
    EXPECT_EQ(other.read<size_t>([&] { return other.rejected; }), 0u);
    EXPECT_TRUE(other.waitFor([&] { return other.received[address].size() == 1; }));
  };

  const uint64_t total = floodNames() / 2;  // a new type and a new property per event
  constexpr uint64_t kBatch = 10'000;
  constexpr uint64_t kAddressesPerBatch = 100;  // new target addresses, one link each
  // What clients hold before the flood: the other client's names, if any.
  const uint64_t held_at_start = namesHeld();
  uint64_t before_kb = 0;
  uint64_t addresses = 0;
  {
    AmqpTestClient greedy(port, "greedy");
    ASSERT_TRUE(greedy.waitOpen());
    uint64_t sent = 0;
    auto flood = [&](uint64_t n) {
      std::vector<std::vector<proton::message>> batches(kAddressesPerBatch);
      for (uint64_t i = 0; i < n; ++i, ++sent) {
        const std::string k = std::to_string(sent);
        batches[i % kAddressesPerBatch].push_back(
            event("FloodType" + k, static_cast<int64_t>(sent), "flood_property_" + k));
      }
      std::vector<std::string> targets;
      for (auto& batch : batches) {
        targets.push_back("flood.a" + std::to_string(addresses++));
        greedy.send(targets.back(), std::move(batch));
      }
      ASSERT_TRUE(greedy.waitFor([&] { return greedy.accepted + greedy.rejected == sent; },
                                 std::chrono::minutes(2)));
      EXPECT_EQ(greedy.read<size_t>([&] { return greedy.rejected; }), 0u)
          << greedy.read<std::string>([&] {
               return greedy.rejections.empty() ? std::string() : greedy.rejections.front().what();
             });
      // The links go, and with them what holds their addresses.
      for (const std::string& target : targets) greedy.closeSenders(target);
    };
    // Warm up: the allocator's arenas, the idle names kept for reuse.
    flood(kBatch);
    serveOther();
    before_kb = rssKb(bus.pid());
    while (sent < kBatch + total) {
      flood(std::min(kBatch, kBatch + total - sent));
      serveOther();
    }
  }
  serveOther();
  // Every name the flood created, addresses included, is given back once
  // the greedy client's links and events are gone. The other client, still
  // there, holds the addresses it subscribes and publishes to.
  EXPECT_TRUE(testing::waitUntil([&] { return namesHeld() <= held_at_start + other_sent; }))
      << namesHeld() << " names held, " << held_at_start << " before the flood, " << other_sent
      << " addresses of the other client";
  const uint64_t after_kb = rssKb(bus.pid());
  std::cout << "{\"flood_names\":" << 2 * total + addresses << ",\"flood_addresses\":" << addresses
            << ",\"names_held_before\":" << held_at_start << ",\"names_held_after\":" << namesHeld()
            << ",\"other_addresses\":" << other_sent << ",\"rss_before_kb\":" << before_kb
            << ",\"rss_after_kb\":" << after_kb << ",\"rss_peak_kb\":" << bus.peakRssKb()
            << ",\"rss_compared\":" << (kRssComparable ? "true" : "false") << "}\n";
  if (kRssComparable) {
    EXPECT_LE(after_kb, before_kb + 16 * 1024);
  }
  EXPECT_TRUE(bus.stop());
}

// Links a client opens and closes on one connection are freed as they
// close, not when the connection goes (Proton keeps them until then unless
// the bus frees them: some 2.6 kB a link): a connection that stays and
// opens a link per batch leaves the bus as it found it. Every link goes to
// one address, so no name is involved.
TEST(WireNameFloodTest, LinksOpenedAndClosedOnOneConnectionAreNotKept) {
  BusProcess bus(CEPBUS_BINARY, "cepbus-link-churn");
  const int port = reservedPort();
  ASSERT_TRUE(bus.start("<cepbus name=\"churn\"><listeners><amqp host=\"127.0.0.1\" port=\"" +
                            std::to_string(port) +
                            "\" allow-anonymous=\"true\"/></listeners>"
                            "<routes default-flow=\"st\"/></cepbus>\n",
                        {port}));
  AmqpTestClient client(port, "churn");
  ASSERT_TRUE(client.waitOpen());
  constexpr uint64_t kLinksPerRound = 100;
  uint64_t sent = 0;
  // `links` links opened, each sending one event, and closed.
  auto churn = [&](uint64_t links) {
    for (uint64_t round = 0; round < links / kLinksPerRound; ++round) {
      for (uint64_t i = 0; i < kLinksPerRound; ++i, ++sent) {
        client.publish("churn.a", {event("Churn", static_cast<int64_t>(sent), "p")});
      }
      ASSERT_TRUE(client.waitFor([&] { return client.accepted + client.rejected == sent; }));
      client.closeSenders("churn.a");
    }
    // The bus reads a connection's frames in order: once this link's event
    // is answered, it has read every close before it.
    client.publish("churn.b", {event("Churn", static_cast<int64_t>(sent++), "p")});
    ASSERT_TRUE(client.waitFor([&] { return client.accepted + client.rejected == sent; }));
    client.closeSenders("churn.b");
  };
  churn(1'000);  // warm up
  const uint64_t before_kb = rssKb(bus.pid());
  churn(4'000);
  const uint64_t after_kb = rssKb(bus.pid());
  EXPECT_EQ(client.read<size_t>([&] { return client.rejected; }), 0u);
  std::cout << "{\"links\":4000,\"rss_before_kb\":" << before_kb << ",\"rss_after_kb\":" << after_kb
            << ",\"rss_compared\":" << (kRssComparable ? "true" : "false") << "}\n";
  if (kRssComparable) {
    // Freed, they left 0.25-0.85 MB in runs here (the allocator's own
    // churn); kept, they took 9.4 MB.
    EXPECT_LE(after_kb, before_kb + 4 * 1024);
  }
  EXPECT_TRUE(bus.stop());
}

// The peak resident set (kB) of a bus that replays `lines` events to a
// replay sink, each event's attribute named by `name(i)`; the sink's file
// must hold every event.
uint64_t replayPeakKb(uint64_t lines, const std::function<std::string(uint64_t)>& name) {
  BusProcess bus(CEPBUS_BINARY, "cepbus-replay-flood");
  {
    std::ofstream in(bus.dir() / "in.jsonl");
    for (uint64_t i = 0; i < lines; ++i) {
      in << R"({"type":"Reading","ts":)" << i << R"(,"attrs":{")" << name(i) << R"(":)" << i
         << "}}\n";
    }
  }
  const bool started = bus.start(R"(<cepbus name="replay-flood">
  <service-assembly name="a">
    <service-unit name="src" type="replay-source">
      <param name="file" value="in.jsonl"/>
      <publish address="readings"/>
    </service-unit>
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="out.jsonl"/>
      <subscribe address="readings"/>
    </service-unit>
  </service-assembly>
</cepbus>
)");
  EXPECT_TRUE(started);
  if (!started) return 0;
  const std::string done = "replayed " + std::to_string(lines) + " events";
  EXPECT_TRUE(testing::waitUntil([&] { return bus.err().find(done) != std::string::npos; },
                                 std::chrono::minutes(2)))
      << bus.err();
  const uint64_t peak_kb = bus.peakRssKb();
  EXPECT_TRUE(bus.stop());
  std::ifstream out(bus.dir() / "out.jsonl");
  uint64_t written = 0;
  for (std::string line; std::getline(out, line);) ++written;
  EXPECT_EQ(written, lines);
  return peak_kb;
}

TEST(WireNameFloodTest, AReplayFileOfNewNamesIsReadInTheMemoryOfOneThatRepeatsThem) {
  const uint64_t lines = floodNames();
  // 120 characters: kept for good, 200,000 of them would take some 40 MB.
  const std::string pad(110, 'x');
  const uint64_t repeated_kb =
      replayPeakKb(lines, [&](uint64_t i) { return pad + std::to_string(i % 10); });
  const uint64_t distinct_kb =
      replayPeakKb(lines, [&](uint64_t i) { return pad + std::to_string(i); });
  std::cout << "{\"replay_names\":" << lines << ",\"peak_kb_repeated_names\":" << repeated_kb
            << ",\"peak_kb_new_names\":" << distinct_kb
            << ",\"rss_compared\":" << (kRssComparable ? "true" : "false") << "}\n";
  if (kRssComparable) {
    EXPECT_LE(distinct_kb, repeated_kb + 16 * 1024);
  }
}

}  // namespace
}  // namespace cepbus
