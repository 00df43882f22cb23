#include "services/http/prometheus.h"

#include <gtest/gtest.h>

#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "bus/base/stats/store.h"
#include "bus/core/event_json.h"
#include "bus/core/wire_names.h"
#include "flows/flow_stats.h"
#include "services/cep/cep_stats.h"
#include "services/cluster/cluster_stats.h"
#include "services/http/http_listener.h"
#include "tests/services/http/test_broker.h"

namespace cepbus::services::http {
namespace {

// A scrape read back line by line, checking the exposition format on the way.
struct Scrape {
  std::map<std::string, std::string> type;  // family -> counter/gauge
  std::map<std::string, double> samples;    // `name{labels}` -> value
  std::vector<std::string> errors;          // what is wrong with the text
};

Scrape parseScrape(const std::string& text) {
  Scrape scrape;
  std::set<std::string> helped;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("# HELP ")) {
      helped.insert(line.substr(7, line.find(' ', 7) - 7));
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      std::istringstream words(line.substr(7));
      std::string family, type;
      words >> family >> type;
      if (!helped.contains(family)) scrape.errors.push_back("TYPE before HELP: " + line);
      scrape.type[family] = type;
      continue;
    }
    const size_t space = line.rfind(' ');
    if (line.empty() || line[0] == '#' || space == std::string::npos) {
      scrape.errors.push_back("unexpected line: " + line);
      continue;
    }
    const std::string key = line.substr(0, space);
    std::string family = key.substr(0, key.find('{'));
    // A summary's _sum and _count samples belong to its family.
    for (const std::string_view suffix : {"_sum", "_count"}) {
      const std::string base = family.substr(0, family.size() - suffix.size());
      if (family.ends_with(suffix) && scrape.type.contains(base) &&
          scrape.type[base] == "summary") {
        family = base;
      }
    }
    if (!scrape.type.contains(family)) scrape.errors.push_back("sample without TYPE: " + line);
    if (scrape.type[family] == "counter" && !family.ends_with("_total")) {
      scrape.errors.push_back("counter not named _total: " + line);
    }
    scrape.samples[key] = std::stod(line.substr(space + 1));
  }
  return scrape;
}

constexpr const char* kJournalCounters[] = {
    "cepbus_journal_journaled_total",    "cepbus_journal_commits_total",
    "cepbus_journal_acknowledged_total", "cepbus_journal_cancelled_total",
    "cepbus_journal_redelivered_total",  "cepbus_journal_retries_total",
    "cepbus_journal_abandoned_total",    "cepbus_journal_corrupt_total",
    "cepbus_journal_departed_total",     "cepbus_journal_errors_total"};
constexpr const char* kJournalGauges[] = {"cepbus_journal_in_flight", "cepbus_journal_backlog",
                                          "cepbus_journal_held_back", "cepbus_journal_orphans"};
constexpr const char* kHttpCounters[] = {
    "cepbus_http_connections_total", "cepbus_http_connections_refused_total",
    "cepbus_http_ws_refused_total", "cepbus_http_request_timeouts_total"};
constexpr const char* kHttpGauges[] = {"cepbus_http_open_connections", "cepbus_http_ws_clients"};

TEST(EscapeLabelValueTest, EscapesBackslashQuoteAndLineFeed) {
  EXPECT_EQ(escapeLabelValue("plain.name-1"), "plain.name-1");
  EXPECT_EQ(escapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

constexpr stats::MetricSpec kSent = stats::MetricSpec::counter("sent", "Things sent.");
constexpr stats::MetricSpec kQueued = stats::MetricSpec::gauge("queued", "Things \\ waiting.");
constexpr stats::MetricSpec kLatency = stats::MetricSpec::histogram("latency", "Time to send.");
constexpr stats::MetricSpec kPipeMetrics[] = {kSent, kQueued, kLatency};
constexpr stats::Schema kPipe{"pipe", kPipeMetrics};
constexpr stats::MetricSpec kOpen = stats::MetricSpec::gauge("open", "1 while open.");
constexpr stats::MetricSpec kValveMetrics[] = {kOpen};
constexpr stats::Schema kValve{"valve", kValveMetrics};

// The whole text for a small store: families sorted by component and name,
// each with HELP and TYPE even without samples, samples sorted by labels, a
// histogram as a summary in seconds, a scope without labels without braces.
TEST(RenderPrometheusTest, RendersASmallStoreExactly) {
  stats::Store store;
  store.declare(kValve);
  stats::ScopePtr b = store.scope(kPipe, {{"pipe", "b"}, {"kind", "x\"y"}});
  stats::ScopePtr a = store.scope(kPipe, {{"pipe", "a"}, {"kind", "plain"}});
  a->counter(kSent).add(3);
  a->gauge(kQueued).set(-2);
  b->counter(kSent).add(12345678901);
  b->gauge(kQueued, [] { return 0.25; });
  stats::Histogram& latency = a->histogram(kLatency);
  latency.record(1023);  // the upper bound of its bucket: rendered exactly
  latency.record(3000);  // the maximum: the bounds above it are clamped to it
  stats::ScopePtr bare = store.scope(kValve);
  bare->gauge(kOpen).set(1);

  EXPECT_EQ(renderPrometheus(store),
            "# HELP cepbus_pipe_latency_seconds Time to send.\n"
            "# TYPE cepbus_pipe_latency_seconds summary\n"
            "cepbus_pipe_latency_seconds{pipe=\"a\",kind=\"plain\",quantile=\"0.5\"} 1.023e-06\n"
            "cepbus_pipe_latency_seconds{pipe=\"a\",kind=\"plain\",quantile=\"0.9\"} 3e-06\n"
            "cepbus_pipe_latency_seconds{pipe=\"a\",kind=\"plain\",quantile=\"0.99\"} 3e-06\n"
            "cepbus_pipe_latency_seconds_sum{pipe=\"a\",kind=\"plain\"} 4.023e-06\n"
            "cepbus_pipe_latency_seconds_count{pipe=\"a\",kind=\"plain\"} 2\n"
            "# HELP cepbus_pipe_queued Things \\\\ waiting.\n"
            "# TYPE cepbus_pipe_queued gauge\n"
            "cepbus_pipe_queued{pipe=\"a\",kind=\"plain\"} -2\n"
            "cepbus_pipe_queued{pipe=\"b\",kind=\"x\\\"y\"} 0.25\n"
            "# HELP cepbus_pipe_sent_total Things sent.\n"
            "# TYPE cepbus_pipe_sent_total counter\n"
            "cepbus_pipe_sent_total{pipe=\"a\",kind=\"plain\"} 3\n"
            "cepbus_pipe_sent_total{pipe=\"b\",kind=\"x\\\"y\"} 12345678901\n"
            "# HELP cepbus_valve_open 1 while open.\n"
            "# TYPE cepbus_valve_open gauge\n"
            "cepbus_valve_open 1\n");

  // Gone with its scope; the family stays.
  bare.reset();
  const std::string text = renderPrometheus(store);
  EXPECT_NE(text.find("# TYPE cepbus_valve_open gauge\n"), std::string::npos);
  EXPECT_EQ(text.find("\ncepbus_valve_open 1\n"), std::string::npos);
}

TEST(RenderPrometheusTest, TwoScopesWithTheSameLabelsRenderTheOlderOnce) {
  stats::Store store;
  stats::ScopePtr old_one = store.scope(kValve, {{"valve", "v"}});
  stats::ScopePtr new_one = store.scope(kValve, {{"valve", "v"}});
  old_one->gauge(kOpen).set(1);
  new_one->gauge(kOpen).set(0);
  const Scrape scrape = parseScrape(renderPrometheus(store));
  ASSERT_TRUE(scrape.errors.empty()) << scrape.errors.front();
  EXPECT_EQ(scrape.samples.size(), 1u);
  EXPECT_EQ(scrape.samples.at("cepbus_valve_open{valve=\"v\"}"), 1);
}

TEST(RenderMetricsTest, EveryFamilyHasHelpAndTypeBeforeAnySample) {
  TestBroker bus;
  // Declared as a bus declares every kind of component it may build.
  bus.registry->stats().declare(flows::kJournalSchema);
  bus.registry->stats().declare(kHttpSchema);
  const Scrape scrape = parseScrape(renderMetrics(*bus.registry));
  EXPECT_TRUE(scrape.errors.empty()) << scrape.errors.front();
  // Families show up even before anything was published.
  for (const char* family :
       {"cepbus_component_delivered_total", "cepbus_component_failed_total",
        "cepbus_component_rejected_total", "cepbus_route_published_total",
        "cepbus_route_unrouted_total", "cepbus_flow_sent_total", "cepbus_flow_delivered_total"}) {
    EXPECT_EQ(scrape.type.at(family), "counter") << family;
  }
  EXPECT_EQ(scrape.type.at("cepbus_component_queue_length"), "gauge");
  EXPECT_EQ(scrape.type.at("cepbus_component_throughput_per_second"), "gauge");
  // The journal families too, without samples: no flow here is reliable.
  for (const char* family : kJournalCounters) {
    EXPECT_EQ(scrape.type.at(family), "counter") << family;
  }
  for (const char* family : kJournalGauges) EXPECT_EQ(scrape.type.at(family), "gauge") << family;
  // And the HTTP listener's: no listener runs here.
  for (const char* family : kHttpCounters) EXPECT_EQ(scrape.type.at(family), "counter") << family;
  for (const char* family : kHttpGauges) EXPECT_EQ(scrape.type.at(family), "gauge") << family;
  for (const auto& [key, value] : scrape.samples) {
    EXPECT_FALSE(key.starts_with("cepbus_journal_")) << key;
    EXPECT_FALSE(key.starts_with("cepbus_http_")) << key;
  }
}

TEST(RenderMetricsTest, CountersFollowWhatIsPublished) {
  TestBroker bus;
  Recorder recorder(*bus.broker, "rec", "stocks.#");
  const Scrape before = parseScrape(renderMetrics(*bus.registry));
  ASSERT_TRUE(before.errors.empty()) << before.errors.front();
  EXPECT_EQ(before.samples.at("cepbus_component_delivered_total{name=\"rec\",kind=\"endpoint\"}"),
            0);

  for (int i = 0; i < 3; ++i) bus.publish("stocks.ibm", i);
  for (int i = 0; i < 2; ++i) bus.publish("slow.nobody", i);

  const Scrape after = parseScrape(renderMetrics(*bus.registry));
  ASSERT_TRUE(after.errors.empty()) << after.errors.front();
  EXPECT_EQ(after.samples.at("cepbus_component_delivered_total{name=\"rec\",kind=\"endpoint\"}"),
            3);
  EXPECT_EQ(after.samples.at("cepbus_component_failed_total{name=\"rec\",kind=\"endpoint\"}"), 0);
  EXPECT_EQ(after.samples.at("cepbus_component_queue_length{name=\"rec\",kind=\"endpoint\"}"), 0);
  EXPECT_EQ(after.samples.at("cepbus_route_published_total{route=\"(default)\",flow=\"st\"}"), 3);
  EXPECT_EQ(after.samples.at("cepbus_route_delivered_total{route=\"(default)\",flow=\"st\"}"), 3);
  EXPECT_EQ(after.samples.at("cepbus_route_unrouted_total{route=\"slow.#\",flow=\"st2\"}"), 2);
  EXPECT_EQ(after.samples.at("cepbus_route_unrouted_total{route=\"(default)\",flow=\"st\"}"), 0);
  EXPECT_EQ(after.samples.at("cepbus_route_paused{route=\"(default)\",flow=\"st\"}"), 0);
  EXPECT_EQ(after.samples.at("cepbus_flow_delivered_total{flow=\"st\"}"), 3);
  EXPECT_EQ(after.samples.at("cepbus_flow_delivered_total{flow=\"st2\"}"), 0);
}

TEST(RenderMetricsTest, AReliableFlowsJournalHasASamplePerFamily) {
  ReliableTestBroker bus;
  // The journal's sample of `family`; the other flows have none.
  auto journal = [](const Scrape& scrape, const std::string& family) {
    for (const auto& [key, value] : scrape.samples) {
      if (key.starts_with(family + "{")) {
        EXPECT_EQ(key, family + "{flow=\"reliable\"}");
      }
    }
    const auto it = scrape.samples.find(family + "{flow=\"reliable\"}");
    EXPECT_NE(it, scrape.samples.end()) << family;
    return it == scrape.samples.end() ? -1.0 : it->second;
  };
  bus.publishAndSettle();
  const Scrape running = parseScrape(renderMetrics(*bus.registry));
  ASSERT_TRUE(running.errors.empty()) << running.errors.front();
  for (const char* family : kJournalCounters) EXPECT_EQ(running.type.at(family), "counter");
  for (const char* family : kJournalGauges) EXPECT_EQ(running.type.at(family), "gauge");
  EXPECT_EQ(journal(running, "cepbus_journal_journaled_total"), ReliableTestBroker::kPublished);
  EXPECT_GE(journal(running, "cepbus_journal_commits_total"), 1);
  EXPECT_EQ(journal(running, "cepbus_journal_cancelled_total"), 0);  // commits, then dispatches
  EXPECT_EQ(journal(running, "cepbus_journal_redelivered_total"), 0);
  EXPECT_EQ(journal(running, "cepbus_journal_retries_total"), 1);
  EXPECT_EQ(journal(running, "cepbus_journal_abandoned_total"), 1);
  EXPECT_EQ(journal(running, "cepbus_journal_corrupt_total"), 0);
  EXPECT_EQ(journal(running, "cepbus_journal_errors_total"), 0);
  EXPECT_EQ(journal(running, "cepbus_journal_in_flight"), 1);  // the held acknowledgement
  EXPECT_EQ(journal(running, "cepbus_journal_backlog"), 0);
  EXPECT_EQ(journal(running, "cepbus_journal_held_back"), 0);

  bus.releaseHeld();
  bus.broker->stop();  // commits the last acknowledgements
  const Scrape stopped = parseScrape(renderMetrics(*bus.registry));
  ASSERT_TRUE(stopped.errors.empty()) << stopped.errors.front();
  EXPECT_EQ(journal(stopped, "cepbus_journal_journaled_total"), ReliableTestBroker::kPublished);
  EXPECT_EQ(journal(stopped, "cepbus_journal_acknowledged_total"),
            ReliableTestBroker::kPublished - 1);  // not the abandoned one
  EXPECT_EQ(journal(stopped, "cepbus_journal_abandoned_total"), 1);
  EXPECT_EQ(journal(stopped, "cepbus_journal_in_flight"), 0);
  EXPECT_EQ(journal(stopped, "cepbus_journal_backlog"), 0);
}

// The stages of a queueing flow, {flow, stage}, and their latency summary.
TEST(RenderMetricsTest, AQueueingFlowsStagesHaveTheirSamples) {
  ReliableTestBroker bus;
  bus.publishAndSettle();
  const std::string labels = "{flow=\"reliable\",stage=\"reliable/orders\"}";
  // The stage samples an item's latency once its handler returned, which
  // may be after the flow counted the delivery publishAndSettle() waits for.
  Scrape scrape;
  EXPECT_TRUE(cepbus::testing::waitUntil([&] {
    scrape = parseScrape(renderMetrics(*bus.registry));
    return scrape.samples["cepbus_stage_latency_seconds_count" + labels] == 5;
  })) << "latency samples: "
      << scrape.samples["cepbus_stage_latency_seconds_count" + labels];
  ASSERT_TRUE(scrape.errors.empty()) << scrape.errors.front();
  EXPECT_EQ(scrape.type.at("cepbus_stage_latency_seconds"), "summary");
  // Two acknowledged, one held, and the failing one's two attempts.
  EXPECT_EQ(scrape.samples.at("cepbus_stage_offered_total" + labels), 5);
  EXPECT_EQ(scrape.samples.at("cepbus_stage_capacity" + labels), 4096);
  EXPECT_EQ(scrape.samples.at("cepbus_stage_queue_length" + labels), 0);
  EXPECT_EQ(scrape.samples.at("cepbus_stage_pressure" + labels), 0);
  EXPECT_TRUE(
      scrape.samples.contains("cepbus_stage_latency_seconds{flow=\"reliable\","
                              "stage=\"reliable/orders\",quantile=\"0.99\"}"));
}

TEST(RenderMetricsTest, EscapesComponentNamesInLabels) {
  TestBroker bus;
  ASSERT_TRUE(bus.registry->add("odd\"name\\with\nbreak", router::ComponentKind::kService));
  const std::string text = renderMetrics(*bus.registry);
  const Scrape scrape = parseScrape(text);
  EXPECT_TRUE(scrape.errors.empty()) << scrape.errors.front();
  EXPECT_TRUE(scrape.samples.contains(
      "cepbus_component_delivered_total{name=\"odd\\\"name\\\\with\\nbreak\",kind=\"service\"}"))
      << text;
}

// A registry entry's numbers leave /metrics with the entry.
TEST(RenderMetricsTest, ARemovedComponentHasNoSamples) {
  TestBroker bus;
  ASSERT_TRUE(bus.registry->add("passing", router::ComponentKind::kService));
  const std::string sample = "cepbus_component_delivered_total{name=\"passing\",kind=\"service\"}";
  EXPECT_TRUE(parseScrape(renderMetrics(*bus.registry)).samples.contains(sample));
  ASSERT_TRUE(bus.registry->remove("passing"));
  EXPECT_FALSE(parseScrape(renderMetrics(*bus.registry)).samples.contains(sample));
}

// The budget of names clients may create is visible to operators: a rising
// refused count means a client sends ever new event types or attribute names.
TEST(RenderMetricsTest, ExportsTheWireNameBudget) {
  TestBroker bus;
  setWireNameBudget(wireNameStats().held);  // no new name from clients
  const bool refused = !decodeEvent(R"({"type":"PromNeverSeenType","ts":1})").isOk();
  const Scrape scrape = parseScrape(renderMetrics(*bus.registry));
  const WireNameStats stats = wireNameStats();
  setWireNameBudget(kDefaultWireNameBudget);
  EXPECT_TRUE(refused);
  ASSERT_TRUE(scrape.errors.empty()) << scrape.errors.front();
  EXPECT_EQ(scrape.type.at("cepbus_wire_names_refused_total"), "counter");
  EXPECT_EQ(scrape.type.at("cepbus_wire_names_held"), "gauge");
  EXPECT_GE(scrape.samples.at("cepbus_wire_names_refused_total"), 1);
  EXPECT_EQ(scrape.samples.at("cepbus_wire_names_refused_total"),
            static_cast<double>(stats.refused));
  EXPECT_EQ(scrape.samples.at("cepbus_wire_names_budget"), static_cast<double>(stats.held));
}

// The CEP queries' families keep the names and labels they had when /metrics
// read them from registry metadata.
TEST(RenderMetricsTest, QueriesShowTheirMatchesAndThoseThatCountThePartialMatchesTheyHold) {
  TestBroker bus;
  namespace q = cep::query_stats;
  const stats::Store& store = bus.registry->stats();
  stats::ScopePtr counting = store.scope(cep::kQuerySchema, {{"name", "a.cep/seq:detector"}});
  counting->counter(q::kMatches).add(12);
  counting->gauge(q::kPartialMatches).set(5);
  counting->gauge(q::kPartialMatchesPeak).set(9);
  counting->counter(q::kStateEvictions).add(4);
  counting->gauge(q::kStateBytes).set(640);
  // An engine that does not count registers no partial matches: no sample.
  stats::ScopePtr silent = store.scope(cep::kQuerySchema, {{"name", "a.cep/join:detector"}});
  silent->counter(q::kMatches).add(3);

  const Scrape scrape = parseScrape(renderMetrics(*bus.registry));
  ASSERT_TRUE(scrape.errors.empty()) << scrape.errors.front();
  EXPECT_EQ(scrape.type.at("cepbus_query_partial_matches"), "gauge");
  EXPECT_EQ(scrape.type.at("cepbus_query_partial_matches_peak"), "gauge");
  EXPECT_EQ(scrape.samples.at("cepbus_query_partial_matches{name=\"a.cep/seq:detector\"}"), 5);
  EXPECT_EQ(scrape.samples.at("cepbus_query_partial_matches_peak{name=\"a.cep/seq:detector\"}"), 9);
  EXPECT_EQ(scrape.type.at("cepbus_query_state_evictions_total"), "counter");
  EXPECT_EQ(scrape.samples.at("cepbus_query_state_evictions_total{name=\"a.cep/seq:detector\"}"),
            4);
  EXPECT_EQ(scrape.samples.at("cepbus_query_state_bytes{name=\"a.cep/seq:detector\"}"), 640);
  size_t samples = 0;
  for (const auto& [key, value] : scrape.samples) {
    if (key.starts_with("cepbus_query_partial_matches")) ++samples;
  }
  EXPECT_EQ(samples, 2u);
  // Every query has its matches, whether or not its engine counts what it holds.
  EXPECT_EQ(scrape.type.at("cepbus_query_matches_total"), "counter");
  EXPECT_EQ(scrape.samples.at("cepbus_query_matches_total{name=\"a.cep/seq:detector\"}"), 12);
  EXPECT_EQ(scrape.samples.at("cepbus_query_matches_total{name=\"a.cep/join:detector\"}"), 3);
  // A query that goes takes its samples with it.
  silent.reset();
  EXPECT_FALSE(parseScrape(renderMetrics(*bus.registry))
                   .samples.contains("cepbus_query_matches_total{name=\"a.cep/join:detector\"}"));
}

// The cluster's families keep the names and labels they had when /metrics
// read them from the nodes' registry metadata.
TEST(RenderMetricsTest, ClusterNodesExportTheirCountersAndPartitions) {
  TestBroker bus;
  namespace c = cluster::cluster_stats;
  namespace p = cluster::cluster_partition_stats;
  stats::ScopePtr node = bus.registry->stats().scope(cluster::kClusterSchema,
                                                     {{"cluster", "trades"}, {"node", "node1"}});
  node->counter(c::kReceived).add(40);
  node->counter(c::kTakeovers).add(2);
  node->counter(c::kWindowFull).add(3);
  stats::ScopePtr active =
      node->child(cluster::kClusterPartitionSchema, {{"partition", "0"}, {"role", "active"}});
  active->gauge(p::kActive).set(1);
  active->gauge(p::kHeld).set(12);
  stats::ScopePtr standby =
      node->child(cluster::kClusterPartitionSchema, {{"partition", "1"}, {"role", "standby"}});
  standby->gauge(p::kActive).set(0);

  const Scrape scrape = parseScrape(renderMetrics(*bus.registry));
  ASSERT_TRUE(scrape.errors.empty()) << scrape.errors.front();
  const std::string labels = "{cluster=\"trades\",node=\"node1\"}";
  EXPECT_EQ(scrape.type.at("cepbus_cluster_received_total"), "counter");
  EXPECT_EQ(scrape.samples.at("cepbus_cluster_received_total" + labels), 40);
  EXPECT_EQ(scrape.samples.at("cepbus_cluster_takeovers_total" + labels), 2);
  EXPECT_EQ(scrape.samples.at("cepbus_cluster_window_full_total" + labels), 3);
  EXPECT_EQ(scrape.type.at("cepbus_cluster_partition_held"), "gauge");
  EXPECT_EQ(scrape.samples.at("cepbus_cluster_partition_held{cluster=\"trades\",node=\"node1\","
                              "partition=\"0\",role=\"active\"}"),
            12);
  EXPECT_EQ(scrape.samples.at("cepbus_cluster_partition_active{cluster=\"trades\",node=\"node1\","
                              "partition=\"1\",role=\"standby\"}"),
            0);
}

}  // namespace
}  // namespace cepbus::services::http
