// Scale-out end to end: real `cepbus run` nodes on a real 3-node RabbitMQ
// cluster (started once for this program), events published with `cepbus
// cluster publish`, composites read back by the independent Python
// collector (examples/cluster/collect.py, Debian's python3-qpid-proton).
// Every scenario compares the distinct composites with what `cepbus match`
// finds offline on the same stream: no composite lost, none invented,
// duplicates only as recognisable replays (counted by the collector).

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <proton/codec/map.hpp>
#include <proton/message.hpp>
#include <proton/scalar.hpp>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "services/cluster/cluster_spec.h"
#include "services/cluster/management_client.h"
#include "services/cluster/partitioner.h"
#include "services/cluster/topology.h"
#include "tests/integration/child_process.h"
#include "tests/testing/amqp_frame_filter.h"
#include "tests/testing/amqp_test_client.h"
#include "tests/testing/http_get.h"
#include "tests/testing/ports.h"
#include "tests/testing/rabbitmq_cluster.h"
#include "tests/testing/self_signed_pair.h"
#include "tests/testing/wait.h"

namespace cepbus::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

const std::string kCepbus = CEPBUS_BINARY;
const fs::path kSource = CEPBUS_TEST_SOURCE_DIR;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> sortedLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

// A program run to its end; its output and exit code.
struct Ran {
  int code;
  std::string out;
  std::string err;
};

Ran runToEnd(std::vector<std::string> argv, const fs::path& dir, seconds limit = seconds(120)) {
  fs::create_directories(dir);
  ChildProcess p(std::move(argv), dir);
  const int code = p.wait(limit);
  return Ran{code, p.out(), p.err()};
}

// One scenario's cluster: its own names on the shared brokers, its nodes,
// its stream, its collector.
class ClusterE2eTest : public ::testing::Test {
 protected:
  static RabbitMqCluster& rmq() { return RabbitMqCluster::shared(); }

  void SetUp() override {
    ASSERT_TRUE(rmq().start());
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // Names of their own on each repetition (--gtest_repeat): the brokers
    // keep what an earlier one left in its queues and streams.
    static int repetition = 0;
    name_ = std::string("e2e-") + info->name() +
            (repetition++ == 0 ? "" : "-" + std::to_string(repetition));
    dir_ = fs::temp_directory_path() / ("cepbus-" + name_ + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    query_ = slurp(kSource / "examples/cluster/equal-prices.query");
    query_.erase(std::remove(query_.begin(), query_.end(), '\n'), query_.end());
  }

  void TearDown() override {
    for (auto& node : nodes_) {
      if (node.process) node.process->signal(SIGKILL);
    }
    nodes_.clear();
    if (collector_) collector_->signal(SIGKILL);
    // A scenario that failed between killing a broker and restarting it
    // must not leave the next ones a cluster of two.
    for (const int b : killed_brokers_) EXPECT_TRUE(rmq().restart(b));
    removeTopology();
    if (::testing::Test::HasFailure()) {
      std::cerr << "scenario files kept in " << dir_ << "\n";
    } else {
      fs::remove_all(dir_);
    }
  }

  // SIGKILLs broker `b` (1..3); TearDown() restarts it unless
  // restartBroker() did.
  ::testing::AssertionResult killBroker(int b) {
    killed_brokers_.insert(b);
    return rmq().kill(b);
  }
  ::testing::AssertionResult restartBroker(int b) {
    killed_brokers_.erase(b);
    return rmq().restart(b);
  }

  // The scenario's queues, streams and exchanges: a broker that keeps every
  // scenario's streams takes longer to restart with each (a node restarted
  // by a later scenario recovers them all).
  void removeTopology() {
    services::cluster::ClusterSpec spec;
    spec.name = name_;
    spec.brokers = rmq().brokers();
    const auto client = services::cluster::ManagementClient::forCluster(spec, "guest");
    for (const char* kind : {"queues", "exchanges"}) {
      auto list = client.getJson(std::string("/api/") + kind + "/%2F?columns=name");
      if (!list || !list->is_array()) continue;
      for (const auto& entry : *list) {
        const std::string name = entry.value("name", std::string());
        if (name.rfind(name_ + ".", 0) != 0) continue;
        (void)client.remove(std::string("/api/") + kind + "/%2F/" +
                            services::cluster::percentEncode(name));
      }
    }
  }

  static std::string brokerXml(int amqp_port, int management_port) {
    return "<broker host=\"127.0.0.1\" port=\"" + std::to_string(amqp_port) +
           "\" management-port=\"" + std::to_string(management_port) + "\"/>";
  }

  // Node `k`'s descriptor: its failover list starts at broker k (mod 3),
  // unless `brokers` holds its <broker> (and <tls>) elements.
  fs::path writeNode(int k, uint32_t partitions, const std::string& extra = "",
                     std::string brokers = "") {
    if (brokers.empty()) {
      for (int i = 0; i < RabbitMqCluster::kNodes; ++i) {
        const int b = (k - 1 + i) % RabbitMqCluster::kNodes + 1;
        brokers += brokerXml(rmq().amqpPort(b), rmq().managementPort(b));
      }
    }
    Node& node = this->node(k);
    node.http_port = reservedPort();
    if (ingress_) {
      node.ingress_port = reservedPort();
      brokers += "<ingress port=\"" + std::to_string(node.ingress_port) + "\" linger-ms=\"5\"/>";
    }
    const fs::path path = dir_ / ("node" + std::to_string(k) + ".xml");
    std::ofstream(path) << "<cepbus name=\"node" << k << "\"><logging level=\"information\"/>"
                        << "<listeners><http host=\"127.0.0.1\" port=\"" << node.http_port
                        << "\"/></listeners><cluster name=\"" << name_ << "\" node=\"node" << k
                        << "\" partitions=\"" << partitions << "\" key=\"" << key_
                        << "\" heartbeat=\"300\" idle-timeout=\"2000\" " << extra << ">" << brokers
                        << "<query name=\"q\" engine=\"" << engine_ << "\" output=\"out\">"
                        << options_xml_ << "<text><![CDATA[" << query_
                        << "]]></text></query></cluster></cepbus>\n";
    return path;
  }

  struct Node {
    int http_port = 0;
    int ingress_port = 0;  // with ingress_
    std::unique_ptr<ChildProcess> process;
  };

  Node& node(int k) {
    if (nodes_.size() < static_cast<size_t>(k)) nodes_.resize(k);
    return nodes_[k - 1];
  }

  void startNode(int k) {
    const fs::path run_dir = dir_ / ("node" + std::to_string(k) + "-run" + std::to_string(++runs_));
    fs::create_directories(run_dir);
    node(k).process = std::make_unique<ChildProcess>(
        std::vector<std::string>{kCepbus, "run", (dir_ / ("node" + std::to_string(k) + ".xml"))},
        run_dir);
    ASSERT_TRUE(waitListening(node(k).http_port)) << "node" << k << ": " << node(k).process->err();
  }

  // /api/cluster of node k (its one cluster node).
  nlohmann::json stats(int k) {
    const std::string response = httpGet(node(k).http_port, "/api/cluster");
    const size_t body = response.find("\r\n\r\n");
    if (body == std::string::npos) return nlohmann::json::object();
    auto j = nlohmann::json::parse(response.substr(body + 4), nullptr, false);
    if (!j.is_object() || j["nodes"].empty()) return nlohmann::json::object();
    return j["nodes"][0];
  }

  // Partitions node k is active on.
  int activeOn(int k) {
    int n = 0;
    for (const auto& p : stats(k).value("partitions", nlohmann::json::array())) {
      if (p.value("role", "") == "active") ++n;
    }
    return n;
  }

  // Every one of `partitions` has an active node among the started ones:
  // what is published from now on is consumed as it arrives. For nodes that
  // read streams, which hold their partitions by lease before any message;
  // on queues a node reports a partition active only from its first message.
  ::testing::AssertionResult waitAllActive(uint32_t partitions, seconds limit = seconds(60)) {
    return eventually(
        "every one of " + std::to_string(partitions) + " partitions active on a node",
        [&] {
          int active = 0;
          for (size_t k = 1; k <= nodes_.size(); ++k) {
            if (node(static_cast<int>(k)).process) active += activeOn(static_cast<int>(k));
          }
          return active == static_cast<int>(partitions);
        },
        limit, milliseconds(100));
  }

  void init(int k = 1) {
    Ran r = runToEnd({kCepbus, "cluster", "init", (dir_ / ("node" + std::to_string(k) + ".xml"))},
                     dir_ / "init");
    ASSERT_EQ(r.code, 0) << r.err;
  }

  fs::path generate(int events, int seed) {
    const fs::path path = dir_ / "events.jsonl";
    Ran r = runToEnd(
        {"/usr/bin/python3", (kSource / "examples/quickstart/generate_stocks.py"), "--events",
         std::to_string(events), "--every", "16", "--seed", std::to_string(seed)},
        dir_ / "generate");
    EXPECT_EQ(r.code, 0) << r.err;
    std::ofstream(path) << r.out;
    return path;
  }

  // Publishes with node `via`'s descriptor (its brokers).
  std::unique_ptr<ChildProcess> publish(const fs::path& events, int rate, int via = 1,
                                        std::vector<std::string> extra = {}) {
    fs::create_directories(dir_ / "publish");
    const fs::path descriptor = dir_ / ("node" + std::to_string(via) + ".xml");
    std::vector<std::string> argv{kCepbus,          "cluster", "publish", descriptor,
                                  "--events",       events,    "--rate",  std::to_string(rate),
                                  "--end-of-stream"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<ChildProcess>(std::move(argv), dir_ / "publish");
  }

  void startCollector() {
    std::string brokers;
    for (int b = 1; b <= RabbitMqCluster::kNodes; ++b) {
      brokers += (brokers.empty() ? "" : ",") + std::string("127.0.0.1:") +
                 std::to_string(rmq().amqpPort(b));
    }
    fs::create_directories(dir_ / "collector");
    collector_ = std::make_unique<ChildProcess>(
        std::vector<std::string>{
            "/usr/bin/python3", (kSource / "examples/cluster/collect.py"), "--brokers", brokers,
            "--queue", name_ + ".composites", "--out", (dir_ / "composites.jsonl"), "--summary",
            (dir_ / "collector.json"), "--stop-file", (dir_ / "done"), "--quiet", "2"},
        dir_ / "collector");
  }

  // Every partition queue empty: every input processed and accepted, which
  // a node does only after its composites were accepted by the broker.
  //
  // The management API's queue lengths are samples up to a statistics
  // interval old (1 s in scripts/rabbitmq-cluster.sh): waiting two first
  // means no sample from before the last message was published is read.
  ::testing::AssertionResult waitDrained(uint32_t partitions, seconds limit = seconds(300)) {
    std::this_thread::sleep_for(seconds(2));
    services::cluster::ClusterSpec spec;
    spec.name = name_;
    spec.brokers = rmq().brokers();
    const auto client = services::cluster::ManagementClient::forCluster(spec, "guest");
    auto queue = [&](uint32_t p) {
      return client.getJson("/api/queues/%2F/" + services::cluster::percentEncode(
                                                     services::cluster::partitionQueue(name_, p)));
    };
    uint64_t left = 0;
    const bool drained = waitUntil(
        [&] {
          left = 0;
          for (uint32_t p = 0; p < partitions; ++p) {
            auto q = queue(p);
            left += q ? q->value("messages", uint64_t{1}) : 1;
          }
          return left == 0;
        },
        limit, milliseconds(300));
    if (drained) return ::testing::AssertionSuccess();
    auto failure = ::testing::AssertionFailure()
                   << left << " messages still in the partition queues";
    for (uint32_t p = 0; p < partitions; ++p) {
      auto q = queue(p);
      if (!q) continue;
      failure << "\npartition " << p << ": ready " << q->value("messages_ready", uint64_t{0})
              << ", unacked " << q->value("messages_unacknowledged", uint64_t{0}) << ", consumers "
              << q->value("consumers", uint64_t{0}) << ", leader "
              << q->value("leader", std::string()) << ", single active consumer "
              << q->value("single_active_consumer_tag", nlohmann::json()).dump();
    }
    printNodeStats(failure);
    return failure;
  }

  // Each live node's /api/cluster status, for a failure message.
  void printNodeStats(::testing::AssertionResult& failure) {
    for (size_t k = 1; k <= nodes_.size(); ++k) {
      if (node(static_cast<int>(k)).process) {
        failure << "\nnode" << k << ": " << stats(static_cast<int>(k)).dump();
      }
    }
  }

  // With stream input the streams keep every event: a partition is done
  // when a live node is active on it past its end-of-stream marker with
  // nothing held and its lease moved up to where it stands.
  ::testing::AssertionResult waitStreamsDone(uint32_t partitions, seconds limit = seconds(300)) {
    std::set<uint32_t> done;
    const bool all = waitUntil(
        [&] {
          done.clear();
          for (size_t k = 1; k <= nodes_.size(); ++k) {
            if (!node(static_cast<int>(k)).process) continue;
            for (const auto& p :
                 stats(static_cast<int>(k)).value("partitions", nlohmann::json::array())) {
              if (p.value("role", "") == "active" && p.value("stream_ended", false) &&
                  p.value("held", 1) == 0 && p.value("unaccepted_outputs", 1) == 0 &&
                  p.contains("lease_offset") && p["lease_offset"] == p["resume_from"]) {
                done.insert(p.value("partition", 0u));
              }
            }
          }
          return done.size() == partitions;
        },
        limit, milliseconds(300));
    if (all) return ::testing::AssertionSuccess();
    auto failure = ::testing::AssertionFailure()
                   << done.size() << " of " << partitions << " partitions done with their streams";
    printNodeStats(failure);
    for (uint32_t p = 0; p < partitions; ++p) {
      for (int b = 1; b <= RabbitMqCluster::kNodes; ++b) {
        failure << "\n"
                << partitionStreamName(p) << " seen by broker " << b << ":\n"
                << rmq().streamStatus(b, partitionStreamName(p));
      }
    }
    return failure;
  }

  // Three nodes on stream input running the query with a window of about
  // 500 events (WITHIN 8000 at the scenarios' rates), 60 times what
  // max-unsettled="4" lets a partition queue hold, and spanning more than
  // the heartbeats between two checkpoints: a kill cuts through partial
  // matches. The collector runs.
  void startLongWindowsOnStreams(uint32_t partitions) {
    streams_ = true;
    const size_t within = query_.find("WITHIN 1000");
    ASSERT_NE(within, std::string::npos) << query_;
    query_.replace(within, 11, "WITHIN 8000");
    for (int k = 1; k <= 3; ++k) {
      writeNode(k, partitions, "input=\"stream\" retention=\"1h\" max-unsettled=\"4\"");
    }
    init();
    startCollector();
    for (int k = 1; k <= 3; ++k) startNode(k);
  }

  // Two nodes with an <ingress> each, attached to their partitions, and the
  // collector.
  void startIngressNodes(uint32_t partitions) {
    ingress_ = true;
    for (int k = 1; k <= 2; ++k) writeNode(k, partitions);
    init();
    startCollector();
    for (int k = 1; k <= 2; ++k) {
      startNode(k);
      ASSERT_TRUE(waitListening(node(k).ingress_port)) << "node" << k;
    }
    // Time for the nodes to attach (see RepeatedNodeKillsAndABrokerKillLoseNoComposite).
    std::this_thread::sleep_for(seconds(2));
  }

  std::string partitionStreamName(uint32_t p) const {
    return services::cluster::partitionStream(name_, p);
  }

  // The broker (1..3) that leads partition p's stream, 0 if none is listed.
  int streamLeader(uint32_t p) {
    services::cluster::ClusterSpec spec;
    spec.name = name_;
    spec.brokers = rmq().brokers();
    const auto client = services::cluster::ManagementClient::forCluster(spec, "guest");
    auto q = client.getJson("/api/queues/%2F/" +
                            services::cluster::percentEncode(partitionStreamName(p)));
    // A stream lists its leader as its "node" (quorum queues as "leader").
    const std::string leader = q ? q->value("node", std::string()) : std::string();
    for (int b = 1; b <= RabbitMqCluster::kNodes; ++b) {
      if (rmq().nodeName(b) == leader) return b;
    }
    return 0;
  }

  struct Collected {
    std::vector<std::string> composites;  // sorted
    nlohmann::json summary;
  };

  Collected finishCollector() {
    std::ofstream(dir_ / "done") << "";
    const int code = collector_->wait(seconds(60));
    EXPECT_EQ(code, 0) << collector_->err();
    collector_.reset();
    return Collected{sortedLines(slurp(dir_ / "composites.jsonl")),
                     nlohmann::json::parse(slurp(dir_ / "collector.json"), nullptr, false)};
  }

  std::vector<std::string> offline(const fs::path& events) {
    std::vector<std::string> argv{kCepbus,   "match", "--engine", engine_,
                                  "--query", query_,  "--events", events};
    argv.insert(argv.end(), offline_options_.begin(), offline_options_.end());
    Ran r = runToEnd(argv, dir_ / "offline");
    EXPECT_EQ(r.code, 0) << r.err;
    return sortedLines(r.out);
  }

  // Publishes (waits for `publisher` unless it is null: waited for already),
  // waits for the drained queues, and compares.
  void expectSameAsOffline(const fs::path& events, std::unique_ptr<ChildProcess> publisher,
                           uint32_t partitions) {
    if (publisher) {
      ASSERT_EQ(publisher->wait(seconds(180)), 0) << publisher->err();
      std::cout << "publisher: " << publisher->out();
    }
    ASSERT_TRUE(streams_ ? waitStreamsDone(partitions) : waitDrained(partitions));
    printNodeCounters();
    Collected got = finishCollector();
    const std::vector<std::string> expected = offline(events);
    ASSERT_FALSE(expected.empty());
    EXPECT_EQ(got.composites.size(), expected.size());
    EXPECT_EQ(got.composites, expected) << "missing: " << difference(expected, got.composites)
                                        << "\nextra: " << difference(got.composites, expected);
    std::cout << "composites " << got.composites.size() << ", collector " << got.summary.dump()
              << "\n";
  }

  // What the live nodes counted that explains a difference from offline.
  void printNodeCounters() {
    for (size_t k = 1; k <= nodes_.size(); ++k) {
      if (!node(static_cast<int>(k)).process) continue;
      const nlohmann::json s = stats(static_cast<int>(k));
      std::cout << "node" << k << ":";
      for (const char* counter :
           {"received", "replayed", "duplicates", "late", "takeovers", "out_of_order",
            "sequence_gaps", "stream_refreshes", "stream_broker_switches", "reconnects"}) {
        std::cout << " " << counter << "=" << s.value(counter, uint64_t{0});
      }
      std::cout << "\n";
    }
  }

  // The lines of sorted `a` that sorted `b` lacks.
  static std::string difference(const std::vector<std::string>& a,
                                const std::vector<std::string>& b) {
    std::vector<std::string> only;
    std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(only));
    std::string text;
    for (const std::string& line : only) text += "\n  " + line;
    return text;
  }

  std::string name_;
  fs::path dir_;
  std::set<int> killed_brokers_;  // SIGKILLed by killBroker(), not restarted yet
  // The cluster's query: by default the equal-prices query partitioned by price.
  std::string key_ = "price";
  std::string engine_ = "nfa";
  std::string query_;
  std::string options_xml_;                   // <option> elements of the query
  std::vector<std::string> offline_options_;  // the same for `cepbus match`
  bool streams_ = false;                      // the nodes' descriptors say input="stream"
  bool ingress_ = false;                      // the nodes' descriptors have an <ingress>
  std::vector<Node> nodes_;
  int runs_ = 0;
  std::unique_ptr<ChildProcess> collector_;
};

TEST_F(ClusterE2eTest, RepeatedNodeKillsAndABrokerKillLoseNoComposite) {
  constexpr uint32_t kPartitions = 6;
  for (int k = 1; k <= 3; ++k) writeNode(k, kPartitions);
  init();
  startCollector();
  for (int k = 1; k <= 3; ++k) startNode(k);
  const fs::path events = generate(6000, 5);
  // Time for the nodes to attach to the partition queues. There is nothing
  // to poll for: on queues (unlike streams) a node reports a partition active
  // only once its first message arrives, so waitAllActive() would wait in vain.
  std::this_thread::sleep_for(seconds(2));
  auto publisher = publish(events, 700);

  // Three SIGKILLs of cepbus nodes at random moments (seeded: reproducible),
  // each restarted a second later, and one of a RabbitMQ node.
  std::mt19937 rng(20261201);
  std::vector<int> victims{1, 2, 3};
  std::shuffle(victims.begin(), victims.end(), rng);
  std::uniform_int_distribution<int> pause_ms(300, 1500);
  for (const int k : victims) {
    // Time passing on purpose: the kill lands at a random point of the stream.
    std::this_thread::sleep_for(milliseconds(pause_ms(rng)));
    node(k).process->signal(SIGKILL);
    node(k).process->wait(seconds(10));
    std::cout << "SIGKILL cepbus node" << k << "\n";
    std::this_thread::sleep_for(seconds(1));
    startNode(k);
  }
  ASSERT_TRUE(killBroker(3));
  std::cout << "SIGKILL RabbitMQ node 3\n";
  expectSameAsOffline(events, std::move(publisher), kPartitions);
  uint64_t replayed = 0;
  for (int k = 1; k <= 3; ++k) replayed += stats(k).value("replayed", uint64_t{0});
  std::cout << "replayed on the live nodes: " << replayed << "\n";
  ASSERT_TRUE(restartBroker(3));
}

// The quickstart stream as one-event messages for an ingress: the plain
// event mapping, with message-id i + 1 for line i (the event id the nodes
// drop a resent copy by).
std::vector<proton::message> ingressMessages(const fs::path& events) {
  std::vector<proton::message> messages;
  std::istringstream lines(slurp(events));
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    const auto e = nlohmann::json::parse(line);
    proton::message m;
    m.id(proton::message_id(static_cast<uint64_t>(messages.size() + 1)));
    m.subject(e["type"].get<std::string>());
    m.properties().put("ts", e["ts"].get<int64_t>());
    std::map<std::string, proton::scalar> attrs;
    for (const auto& [name, value] : e["attrs"].items()) {
      if (value.is_string()) {
        attrs[name] = value.get<std::string>();
      } else if (value.is_number_integer()) {
        attrs[name] = value.get<int64_t>();
      } else {
        attrs[name] = value.get<double>();
      }
    }
    m.body(proton::value(attrs));
    messages.push_back(std::move(m));
  }
  return messages;
}

// Ingress through any node: an ordinary AMQP 1.0 producer, one event per
// message, sends into node 1's ingress; the composites are offline's.
TEST_F(ClusterE2eTest, AProducerThroughANodesIngressGivesTheSameCompositesAsOffline) {
  constexpr uint32_t kPartitions = 4;
  ASSERT_NO_FATAL_FAILURE(startIngressNodes(kPartitions));
  const fs::path events = generate(3000, 7);
  const std::vector<proton::message> messages = ingressMessages(events);
  AmqpTestClient producer(node(1).ingress_port, "producer");
  ASSERT_TRUE(producer.waitOpen());
  producer.send(name_ + ".in", messages);
  ASSERT_TRUE(producer.waitFor([&] { return producer.accepted == messages.size(); }, seconds(120)))
      << producer.read<std::string>([&] {
           return "accepted " + std::to_string(producer.accepted) + ", released " +
                  std::to_string(producer.released) + ", rejected " +
                  std::to_string(producer.rejected);
         });
  EXPECT_EQ(producer.read<size_t>([&] { return producer.rejected + producer.released; }), 0u);
  // The node's counters (/api/cluster, published every heartbeat) say the same.
  nlohmann::json counted;
  EXPECT_TRUE(eventually(
      "node 1 to count every delivery accepted",
      [&] {
        counted = stats(1);
        return counted.value("ingress_accepted", 0u) == messages.size();
      },
      seconds(10), milliseconds(100)))
      << counted.dump();
  EXPECT_EQ(counted.value("ingress_received", 0u), messages.size()) << counted.dump();
  EXPECT_EQ(counted.value("ingress_rejected", 1u), 0u) << counted.dump();
  // The ends of the partitions' streams, through `cluster publish`.
  std::ofstream(dir_ / "none.jsonl") << "";
  expectSameAsOffline(events, publish(dir_ / "none.jsonl", 0), kPartitions);
}

// SIGKILL of the ingress node mid-stream: what it had not accepted, the
// producer sends again through another node's ingress; nothing accepted
// is lost, and the copies of what had landed anyway are dropped by id.
TEST_F(ClusterE2eTest, AnIngressNodesKillLosesNoAcceptedEvent) {
  constexpr uint32_t kPartitions = 4;
  ASSERT_NO_FATAL_FAILURE(startIngressNodes(kPartitions));
  const fs::path events = generate(3000, 9);
  const std::vector<proton::message> messages = ingressMessages(events);
  std::set<uint64_t> accepted;
  {
    AmqpTestClient producer(node(1).ingress_port, "producer-1");
    ASSERT_TRUE(producer.waitOpen());
    // 1,000 events/s in steps of 50; node 1 is killed half-way.
    for (size_t i = 0; i < messages.size(); i += 50) {
      if (i == messages.size() / 2) {
        node(1).process->signal(SIGKILL);
        node(1).process->wait(seconds(10));
        std::cout << "SIGKILL cepbus node1 after " << i << " events sent\n";
        break;
      }
      producer.send(name_ + ".in", std::vector<proton::message>(
                                       messages.begin() + i,
                                       messages.begin() + std::min(i + 50, messages.size())));
      std::this_thread::sleep_for(milliseconds(50));
    }
    ASSERT_TRUE(producer.waitFor([&] { return producer.transport_closed; }, seconds(30)));
    producer.read<int>([&] {
      for (const proton::message_id& id : producer.accepted_ids) {
        accepted.insert(proton::get<uint64_t>(id));
      }
      return 0;
    });
  }
  std::vector<proton::message> rest;
  for (const proton::message& m : messages) {
    if (!accepted.contains(proton::get<uint64_t>(m.id()))) rest.push_back(m);
  }
  std::cout << "node1 accepted " << accepted.size() << " events; " << rest.size()
            << " go through node2\n";
  ASSERT_FALSE(accepted.empty());
  AmqpTestClient producer(node(2).ingress_port, "producer-2");
  ASSERT_TRUE(producer.waitOpen());
  producer.send(name_ + ".in", rest);
  ASSERT_TRUE(producer.waitFor([&] { return producer.accepted == rest.size(); }, seconds(120)));
  std::ofstream(dir_ / "none.jsonl") << "";
  expectSameAsOffline(events, publish(dir_ / "none.jsonl", 0), kPartitions);
}

// Windows longer than max-unsettled on stream input: each partition's
// window holds about 60 times max-unsettled="4" one-event messages, which a
// partition queue could not hold unsettled (it would stop at 4); the
// streams keep them and the lease carries the offset to replay from, so
// three node SIGKILLs lose nothing.
TEST_F(ClusterE2eTest, WindowsLongerThanMaxUnsettledSurviveNodeKillsOnStreams) {
  constexpr uint32_t kPartitions = 2;
  ASSERT_NO_FATAL_FAILURE(startLongWindowsOnStreams(kPartitions));
  const fs::path events = generate(3000, 8);
  ASSERT_TRUE(waitAllActive(kPartitions));
  auto publisher = publish(events, 800, 1, {"--batch", "1"});
  std::mt19937 rng(20261203);
  std::uniform_int_distribution<int> pause_ms(400, 1200);
  for (const int k : {1, 2, 3}) {
    // Time passing on purpose: the kill lands at a random point of the stream.
    std::this_thread::sleep_for(milliseconds(pause_ms(rng)));
    node(k).process->signal(SIGKILL);
    node(k).process->wait(seconds(10));
    std::cout << "SIGKILL cepbus node" << k << "\n";
    startNode(k);
  }
  expectSameAsOffline(events, std::move(publisher), kPartitions);
  uint64_t peak = 0, takeovers = 0;
  for (int k = 1; k <= 3; ++k) {
    const nlohmann::json s = stats(k);
    takeovers += s.value("takeovers", uint64_t{0});
    for (const auto& p : s.value("partitions", nlohmann::json::array())) {
      peak = std::max(peak, p.value("held_messages_peak", uint64_t{0}));
    }
  }
  std::cout << "held messages peak " << peak << ", takeovers on the live nodes " << takeovers
            << "\n";
  EXPECT_GT(peak, 4u) << "the windows never needed more than max-unsettled messages";
}

// Stream input with the streams' leader broker SIGKILLed mid-stream and kept
// down until every partition is done: the streams elect new leaders; the
// publisher reads the streams back on its next connection and before it
// returns, and resends what is in doubt or was accepted and lost (RabbitMQ
// 3.10 lost accepted messages here), one message per partition until the
// new broker accepts one (it may leave one unanswered and store later
// ones); the nodes read on, and one whose broker stopped routing its
// heartbeats reconnects elsewhere (docs/cluster.md, "Stream input").
// A broker may also refuse a message ("nodedown") after it stored the
// next ones of its partition; the nodes put each stream back in its
// publisher's order by the place every message carries.
TEST_F(ClusterE2eTest, StreamsSurviveTheirLeaderBrokersKill) {
  constexpr uint32_t kPartitions = 2;
  ASSERT_NO_FATAL_FAILURE(startLongWindowsOnStreams(kPartitions));
  const fs::path events = generate(3000, 9);
  ASSERT_TRUE(waitAllActive(kPartitions));
  int leader = 0;
  waitUntil([&] { return (leader = streamLeader(0)) > 0; }, seconds(30), milliseconds(200));
  ASSERT_GT(leader, 0) << "no leader listed for stream " << partitionStreamName(0);
  auto publisher = publish(events, 800, leader, {"--batch", "1"});
  // Time passing on purpose: the leader dies in the middle of the stream.
  std::this_thread::sleep_for(milliseconds(1500));
  ASSERT_TRUE(killBroker(leader));
  std::cout << "SIGKILL RabbitMQ node " << leader << ", the leader of " << partitionStreamName(0)
            << " (the publisher's broker)\n";
  ASSERT_EQ(publisher->wait(seconds(180)), 0) << publisher->err();
  const nlohmann::json report = nlohmann::json::parse(publisher->out(), nullptr, false);
  std::cout << "publisher: " << publisher->out();
  EXPECT_GE(report.value("read_backs", 0), 2) << "no read-back after the failover";
  expectSameAsOffline(events, nullptr, kPartitions);
  ASSERT_TRUE(restartBroker(leader));
}

// P4's cloned plates on the join engine, partitioned by plate: uncertain
// readings (their probabilities cross AMQP) joined under a travel-time matrix
// and a probability threshold.
TEST_F(ClusterE2eTest, AJoinOfUncertainReadingsGivesTheSamePairsAsOffline) {
  constexpr uint32_t kPartitions = 4;
  Ran made =
      runToEnd({"/usr/bin/python3", (kSource / "examples/cloned-plates/generate.py"), "--cars",
                "300", "--cloned", "6", "--hours", "2", "--seed", "4", "--out", dir_},
               dir_ / "generate");
  ASSERT_EQ(made.code, 0) << made.err;
  key_ = "plate";
  engine_ = "join";
  query_ = "PATTERN AND(Reading a, Reading b) WHERE a.plate = b.plate WITHIN 3600";
  const std::string matrix = (dir_ / "time_matrix.csv").string();
  options_xml_ = "<option name=\"time_matrix\" value=\"" + matrix +
                 "\"/><option name=\"site\" value=\"site\"/>"
                 "<option name=\"threshold\" value=\"0.7\"/>";
  offline_options_ = {"--option", "time_matrix=" + matrix, "--option", "site=site",
                      "--option", "threshold=0.7"};
  for (int k = 1; k <= 2; ++k) writeNode(k, kPartitions);
  init();
  startCollector();
  startNode(1);
  startNode(2);
  auto publisher = publish(dir_ / "readings.jsonl", 2000);
  // Time passing on purpose: node 2 dies in the middle of the stream.
  std::this_thread::sleep_for(milliseconds(700));
  node(2).process->signal(SIGKILL);
  std::cout << "SIGKILL cepbus node2\n";
  expectSameAsOffline(dir_ / "readings.jsonl", std::move(publisher), kPartitions);
}

// A window query grouped by the cluster key: each group lies in one
// partition, so the nodes give what one process gives on the whole stream,
// across a node's SIGKILL (its successor replays the windows' messages).
TEST_F(ClusterE2eTest, AWindowQueryGroupedByTheKeyGivesTheSameResultsAsOffline) {
  constexpr uint32_t kPartitions = 4;
  key_ = "symbol";
  engine_ = "window";
  query_ =
      "FROM Stock s WINDOW SLIDING 800 EVERY 200 GROUP BY s.symbol "
      "RETURN Volume(s.symbol AS symbol, count(s) AS n, sum(s.volume) AS volume, "
      "max(s.price) AS high)";
  for (int k = 1; k <= 2; ++k) writeNode(k, kPartitions);
  init();
  startCollector();
  startNode(1);
  startNode(2);
  const fs::path events = generate(4000, 7);
  // Time for the nodes to attach to the partition queues (see
  // RepeatedNodeKillsAndABrokerKillLoseNoComposite).
  std::this_thread::sleep_for(seconds(2));
  auto publisher = publish(events, 1000);
  // Time passing on purpose: node 2 dies in the middle of the stream.
  std::this_thread::sleep_for(milliseconds(1500));
  node(2).process->signal(SIGKILL);
  std::cout << "SIGKILL cepbus node2\n";
  expectSameAsOffline(events, std::move(publisher), kPartitions);
}

// Event time on partitions, with real Proton clients publishing straight to
// the brokers: SEQ(A a, NOT(B b)) WITHIN 1 s on ts in milliseconds near the
// wall clock, A(k) for k = 1..20 and a B for each even k. Two publishers
// take turns with pairs of the sorted stream, each pair swapped (out of
// order within max-delay): the composites are the sorted stream's. The
// last lonely A's window closes after the last event: its composite comes
// only because the quiet partitions follow the wall clock, and never
// before the window and max-delay passed (the delay is reported, not
// asserted). Afterwards an event behind that wall-clock time is late, and
// every input is settled.
TEST_F(ClusterE2eTest, QuietPartitionsFollowTheWallClockAndCloseTheirWindows) {
  constexpr uint32_t kPartitions = 2;
  constexpr int64_t kMaxDelay = 300;
  key_ = "id";
  query_ = "PATTERN SEQ(A a, NOT(B b)) WHERE b.id = a.id WITHIN 1 s RETURN Lonely(a.id)";
  offline_options_ = {"--time-unit", "ms"};
  writeNode(1, kPartitions,
            "time-unit=\"ms\" source-idle-timeout=\"1000\" max-delay=\"" +
                std::to_string(kMaxDelay) + "\"");
  init();
  startCollector();
  startNode(1);
  // Time for the node to attach to the partition queues (see
  // RepeatedNodeKillsAndABrokerKillLoseNoComposite).
  std::this_thread::sleep_for(seconds(2));

  auto wallMs = [] {
    return std::chrono::duration_cast<milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  struct Sent {
    std::string type;
    int64_t ts;
    int64_t id;
  };
  const int64_t t = wallMs() + 500;
  std::vector<Sent> sorted;
  for (int64_t k = 1; k <= 20; ++k) {
    sorted.push_back({"A", t + 100 * k, k});
    if (k % 2 == 0) sorted.push_back({"B", t + 100 * k + 40, k});
  }
  {
    std::ofstream file(dir_ / "sorted.jsonl");
    for (const Sent& e : sorted) {
      file << nlohmann::json{{"type", e.type}, {"ts", e.ts}, {"attrs", {{"id", e.id}}}}.dump()
           << "\n";
    }
  }
  uint64_t message_id = 0;
  auto message = [&](const Sent& e) {
    proton::message m;
    m.id(proton::message_id(++message_id));
    m.subject(e.type);
    m.properties().put("ts", e.ts);
    // A map body, as the AMQP binding maps events: RabbitMQ gives a message
    // without a body an empty binary one.
    m.body(proton::value(std::map<std::string, proton::scalar>{{"id", e.id}}));
    return m;
  };
  auto address = [&](int64_t id) {
    return "/exchange/" + name_ + ".in/p" +
           std::to_string(services::cluster::partitionOfKey(std::to_string(id), kPartitions));
  };
  AmqpClientOptions guest;
  guest.port = rmq().amqpPort(1);
  guest.user = "guest";
  guest.password = "guest";
  AmqpTestClient pa(guest);
  AmqpTestClient pb(guest);
  ASSERT_TRUE(pa.waitOpen());
  ASSERT_TRUE(pb.waitOpen());
  size_t sent_a = 0;
  size_t sent_b = 0;
  for (size_t i = 0; i + 1 < sorted.size(); i += 2) {
    AmqpTestClient& p = (i / 2) % 2 == 0 ? pa : pb;
    size_t& sent = (i / 2) % 2 == 0 ? sent_a : sent_b;
    for (const Sent* e : {&sorted[i + 1], &sorted[i]}) p.send(address(e->id), {message(*e)});
    sent += 2;
    ASSERT_TRUE(p.waitFor([&] { return p.accepted == sent; })) << "pair at " << i;
  }

  // The last lonely A, A(19): no event comes after its window.
  const int64_t closes = t + 1900 + 1000;
  const std::string last = "[" + std::to_string(t + 1900) + "]";
  int64_t arrived = 0;
  ASSERT_TRUE(eventually(
      "A(19)'s composite in the collector's output",
      [&] {
        if (slurp(dir_ / "composites.jsonl").find(last) == std::string::npos) return false;
        arrived = wallMs();
        return true;
      },
      seconds(30), milliseconds(20)));
  EXPECT_GE(arrived, closes + kMaxDelay) << "not before its window and the max-delay passed";
  std::cout << "trailing negation on a quiet partition: composite " << arrived - closes
            << " ms after its window closed (source-idle-timeout 1000 ms, max-delay " << kMaxDelay
            << " ms, heartbeat 300 ms)\n";
  RecordProperty("ms_after_window_end", std::to_string(arrived - closes));

  // Both partitions' time is past `closes` now: an A at t + 2500, after every
  // event sent, is late there, and goes out as late, not as a composite.
  const Sent behind{"A", t + 2500, 19};
  pa.send(address(behind.id), {message(behind)});
  ASSERT_TRUE(pa.waitFor([&] { return pa.accepted == sent_a + 1; }));
  EXPECT_TRUE(eventually(
      "the node to count a late event", [&] { return stats(1).value("late", 0) == 1; }, seconds(30),
      milliseconds(100)))
      << stats(1).dump();
  // Every input settled: the windows that held it closed with no later event.
  ASSERT_TRUE(waitDrained(kPartitions, seconds(60)));
  Collected got = finishCollector();
  const std::vector<std::string> expected = offline(dir_ / "sorted.jsonl");
  EXPECT_EQ(expected.size(), 10u);
  EXPECT_EQ(got.composites, expected) << "missing: " << difference(expected, got.composites)
                                      << "\nextra: " << difference(got.composites, expected);
  EXPECT_EQ(got.summary.value("late", 0), 1) << got.summary.dump();
}

TEST_F(ClusterE2eTest, AStoppedNodeLosesItsPartitionsWithinTheIdleTimeout) {
  constexpr uint32_t kPartitions = 4;
  for (int k = 1; k <= 2; ++k) writeNode(k, kPartitions);
  init();
  startCollector();
  startNode(1);
  startNode(2);
  // Slow enough that the stream still flows when node 2 stops: a node knows
  // it is active only when messages come.
  const fs::path events = generate(5000, 9);
  auto publisher = publish(events, 400);
  // Both nodes active on their shares.
  ASSERT_TRUE(eventually(
      "nodes 1 and 2 active on their shares", [&] { return activeOn(1) > 0 && activeOn(2) > 0; },
      seconds(60), milliseconds(100)));
  node(2).process->signal(SIGSTOP);
  const auto stopped = Clock::now();
  // The idle timeout is 2 s: node 2's stall watchdog closes its connection
  // and the broker moves its partitions to node 1, the standby.
  // The bound tells the watchdog's takeover (about 2.1 s here) from the
  // broker's own detection of a stopped consumer (tens of seconds, over a
  // minute at times: docs/cluster.md), with seconds to spare on a loaded box.
  ASSERT_TRUE(eventually(
      "every partition active on node 1",
      [&] { return activeOn(1) == static_cast<int>(kPartitions); }, seconds(30),
      milliseconds(100)));
  const auto takeover = std::chrono::duration_cast<milliseconds>(Clock::now() - stopped);
  std::cout << "takeover after SIGSTOP: " << takeover.count() << " ms\n";
  EXPECT_LT(takeover, seconds(15)) << "idle timeout 2000 ms, then the broker";
  // Time passing on purpose: node 2 stays stopped a while after it lost its
  // partitions, as a node paused by its host would.
  std::this_thread::sleep_for(seconds(1));
  node(2).process->signal(SIGCONT);
  // The continued node notices its stall and lets its stale partitions go.
  ASSERT_TRUE(eventually(
      "node 2 to count its stall", [&] { return stats(2).value("stalls", 0) >= 1; }, seconds(60),
      milliseconds(100)))
      << stats(2).dump();
  expectSameAsOffline(events, std::move(publisher), kPartitions);
}

TEST_F(ClusterE2eTest, NodesJoinAndLeaveWhileEventsFlow) {
  constexpr uint32_t kPartitions = 6;
  for (int k = 1; k <= 3; ++k) writeNode(k, kPartitions);
  init();
  startCollector();
  startNode(1);
  const fs::path events = generate(6000, 13);
  auto publisher = publish(events, 700);
  ASSERT_TRUE(eventually(
      "every partition active on node 1",
      [&] { return activeOn(1) == static_cast<int>(kPartitions); }, seconds(60),
      milliseconds(100)));
  startNode(2);
  startNode(3);
  // The newcomers take their rendezvous shares: node 1 hands them over.
  ASSERT_TRUE(eventually(
      "nodes 2 and 3 active", [&] { return activeOn(2) > 0 && activeOn(3) > 0; }, seconds(60),
      milliseconds(100)));
  EXPECT_GT(stats(1).value("handovers", 0), 0);
  // Node 1 leaves cleanly; the others take everything.
  node(1).process->signal(SIGTERM);
  EXPECT_EQ(node(1).process->wait(seconds(20)), 0);
  ASSERT_TRUE(eventually(
      "every partition on nodes 2 and 3",
      [&] { return activeOn(2) + activeOn(3) == static_cast<int>(kPartitions); }, seconds(60),
      milliseconds(100)));
  expectSameAsOffline(events, std::move(publisher), kPartitions);
}

// RabbitMQ has been seen to end a partition's session without sending its
// END back (docs/cluster.md, "At most one active node per partition"); here a proxy drops the END
// so that it happens every time. The node must give the handover up after the idle timeout and
// attach again as standby: otherwise the partition has no consumer left once the new owner dies.
TEST_F(ClusterE2eTest, AHandoverTheBrokerNeverConfirmsEndsAfterTheIdleTimeout) {
  constexpr uint32_t kPartitions = 4;
  AmqpFrameFilter filter(rmq().amqpPort(1), AmqpFrameFilter::kEnd);
  writeNode(1, kPartitions, "", brokerXml(filter.port(), rmq().managementPort(1)));
  writeNode(2, kPartitions);
  init(2);
  startCollector();
  startNode(1);
  const fs::path events = generate(8000, 21);
  auto publisher = publish(events, 500, 2);
  ASSERT_TRUE(eventually(
      "every partition active on node 1",
      [&] { return activeOn(1) == static_cast<int>(kPartitions); }, seconds(60),
      milliseconds(100)));
  filter.setDropping(true);
  startNode(2);
  ASSERT_TRUE(eventually(
      "node 1 to give up an unconfirmed handover",
      [&] { return stats(1).value("unconfirmed_handovers", 0) >= 1; }, seconds(60),
      milliseconds(100)))
      << stats(1).dump();
  ASSERT_TRUE(eventually(
      "node 2 active", [&] { return activeOn(2) > 0; }, seconds(60), milliseconds(100)));
  EXPECT_GE(filter.dropped(), 1u);
  filter.setDropping(false);
  node(2).process->signal(SIGKILL);
  ASSERT_TRUE(eventually(
      "every partition active on node 1",
      [&] { return activeOn(1) == static_cast<int>(kPartitions); }, seconds(30), milliseconds(100)))
      << stats(1).dump();
  std::cout << "node 1: " << stats(1).dump() << "\n";
  expectSameAsOffline(events, std::move(publisher), kPartitions);
}

// A broker that takes messages and never answers (RabbitMQ 3.10 does so
// for a stream whose leader's node died; here a proxy drops every
// disposition): the publisher gives the connection up after its confirm
// timeout, resends what is in doubt through the next broker, and the nodes
// drop the copies, so the composites are still exactly the offline ones.
TEST_F(ClusterE2eTest, APublisherGivesUpABrokerThatNeverConfirms) {
  constexpr uint32_t kPartitions = 2;
  AmqpFrameFilter silent(rmq().amqpPort(1), AmqpFrameFilter::kDisposition);
  silent.setDropping(true);
  writeNode(1, kPartitions);
  // The publisher's descriptor: the silent proxy first, then the brokers.
  writeNode(2, kPartitions, "",
            brokerXml(silent.port(), rmq().managementPort(1)) +
                brokerXml(rmq().amqpPort(2), rmq().managementPort(2)) +
                brokerXml(rmq().amqpPort(3), rmq().managementPort(3)));
  init();
  startCollector();
  startNode(1);
  const fs::path events = generate(1500, 17);
  // Time for node 1 to attach; see RepeatedNodeKillsAndABrokerKillLoseNoComposite.
  std::this_thread::sleep_for(seconds(2));
  auto publisher = publish(events, 0, 2);
  ASSERT_EQ(publisher->wait(seconds(120)), 0) << publisher->err();
  const std::string out = publisher->out();
  const auto report = nlohmann::json::parse(out.substr(0, out.find('\n')), nullptr, false);
  ASSERT_TRUE(report.is_object()) << out;
  EXPECT_GE(report.value("confirm_timeouts", 0), 1) << out;
  EXPECT_GT(report.value("resent", 0), 0) << out;
  EXPECT_GE(silent.dropped(), 1u);
  expectSameAsOffline(events, nullptr, kPartitions);
}

// Every connection to the brokers over TLS: the nodes' AMQP, the
// publisher's, and the management calls of init and of the nodes' checks.
TEST_F(ClusterE2eTest, NodesAndPublisherReachTheBrokersOverTls) {
  constexpr uint32_t kPartitions = 4;
  std::string brokers;
  for (int b = 1; b <= RabbitMqCluster::kNodes; ++b) {
    brokers += brokerXml(rmq().amqpsPort(b), rmq().managementTlsPort(b));
  }
  brokers += "<tls ca=\"" + rmq().tlsCa().string() + "\" peer-name=\"localhost\"/>";
  for (int k = 1; k <= 2; ++k) writeNode(k, kPartitions, "", brokers);
  init();
  startCollector();
  startNode(1);
  startNode(2);
  const fs::path events = generate(3000, 17);
  auto publisher = publish(events, 1500);
  ASSERT_TRUE(eventually(
      "a partition active over TLS", [&] { return activeOn(1) + activeOn(2) > 0; }, seconds(60),
      milliseconds(100)));
  expectSameAsOffline(events, std::move(publisher), kPartitions);
}

// A broker certificate the node's CA did not issue, or issued for another
// name, is refused before a password is sent, naming the check that failed.
TEST_F(ClusterE2eTest, ABrokerCertificateThatDoesNotVerifyIsRefused) {
  ASSERT_TRUE(writeSelfSignedPair(dir_));
  const std::string broker = brokerXml(rmq().amqpsPort(1), rmq().managementTlsPort(1));
  writeNode(1, 2, "", broker + "<tls ca=\"" + (dir_ / "cert.pem").string() + "\"/>");
  Ran wrong_ca = runToEnd({kCepbus, "cluster", "init", (dir_ / "node1.xml")}, dir_ / "init1");
  EXPECT_NE(wrong_ca.code, 0);
  EXPECT_NE(wrong_ca.err.find("https://127.0.0.1:" + std::to_string(rmq().managementTlsPort(1))),
            std::string::npos)
      << wrong_ca.err;
  EXPECT_NE(wrong_ca.err.find("TLS handshake: certificate verify failed"), std::string::npos)
      << wrong_ca.err;

  writeNode(1, 2, "",
            broker + "<tls ca=\"" + rmq().tlsCa().string() + "\" peer-name=\"rabbit.example\"/>");
  Ran wrong_name = runToEnd({kCepbus, "cluster", "init", (dir_ / "node1.xml")}, dir_ / "init2");
  EXPECT_NE(wrong_name.code, 0);
  EXPECT_NE(wrong_name.err.find("TLS handshake: certificate verify failed"), std::string::npos)
      << wrong_name.err;
}

TEST_F(ClusterE2eTest, BadConfigurationIsRefusedWithItsReason) {
  writeNode(1, 4);
  init();
  // A node whose partition count differs from the declared topology.
  writeNode(2, 8);
  Ran wrong_count =
      runToEnd({kCepbus, "run", (dir_ / "node2.xml")}, dir_ / "wrong-count", seconds(60));
  EXPECT_NE(wrong_count.code, 0);
  EXPECT_NE(wrong_count.err.find("topology does not match"), std::string::npos) << wrong_count.err;
  // `cepbus cluster init` with another count is refused too, changing nothing.
  Ran reinit = runToEnd({kCepbus, "cluster", "init", (dir_ / "node2.xml")}, dir_ / "reinit");
  EXPECT_EQ(reinit.code, 1);
  EXPECT_NE(reinit.err.find("4 partitions"), std::string::npos) << reinit.err;

  // Wrong credentials: the broker's refusal is named.
  const fs::path creds = writeNode(3, 4, "user=\"intruder\" password-env=\"CEPBUS_E2E_PW\"");
  setenv("CEPBUS_E2E_PW", "wrong", 1);
  Ran refused = runToEnd({kCepbus, "run", creds}, dir_ / "creds", seconds(60));
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.err.find("401"), std::string::npos) << refused.err;
  unsetenv("CEPBUS_E2E_PW");
  Ran unset_env = runToEnd({kCepbus, "run", creds}, dir_ / "unset", seconds(60));
  EXPECT_NE(unset_env.code, 0);
  EXPECT_NE(unset_env.err.find("$CEPBUS_E2E_PW, which is not set"), std::string::npos)
      << unset_env.err;

  // Unreachable brokers: every URL tried is named.
  const fs::path nowhere = dir_ / "nowhere.xml";
  const int closed = freePort();
  std::string text = slurp(dir_ / "node1.xml");
  for (int b = 1; b <= RabbitMqCluster::kNodes; ++b) {
    for (const int port : {rmq().amqpPort(b), rmq().managementPort(b)}) {
      const std::string from = "\"" + std::to_string(port) + "\"";
      for (size_t at; (at = text.find(from)) != std::string::npos;) {
        text.replace(at, from.size(), "\"" + std::to_string(closed) + "\"");
      }
    }
  }
  std::ofstream(nowhere) << text;
  Ran unreachable = runToEnd({kCepbus, "run", nowhere}, dir_ / "unreachable", seconds(90));
  EXPECT_NE(unreachable.code, 0);
  EXPECT_NE(unreachable.err.find("127.0.0.1:" + std::to_string(closed)), std::string::npos)
      << unreachable.err;

  // A query the cluster key does not partition: refused before any broker.
  std::string by_symbol = slurp(dir_ / "node1.xml");
  by_symbol.replace(by_symbol.find("key=\"price\""), 11, "key=\"symbol\"");
  std::ofstream(dir_ / "by-symbol.xml") << by_symbol;
  Ran wrong_key = runToEnd({kCepbus, "validate", (dir_ / "by-symbol.xml")}, dir_ / "wrong-key");
  EXPECT_EQ(wrong_key.code, 1);
  EXPECT_NE(wrong_key.err.find("cluster key \"symbol\" does not tie variable a to b"),
            std::string::npos)
      << wrong_key.err;
}

}  // namespace
}  // namespace cepbus::testing
