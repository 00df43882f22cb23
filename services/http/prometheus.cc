#include "services/http/prometheus.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <vector>

#include "bus/core/wire_names.h"
#include "flows/abstract_flow.h"
#include "flows/reliable_flow.h"
#include "flows/seda_flow.h"
#include "services/http/http_listener.h"

namespace cepbus::services::http {
namespace {

void appendNumber(std::string& out, uint64_t value) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, end);
}

void appendNumber(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  out.append(buf, end);
}

using Labels = std::vector<std::pair<std::string_view, std::string_view>>;

void appendLabels(std::string& out, const Labels& labels) {
  out += '{';
  bool first = true;
  for (const auto& [key, value] : labels) {
    if (!first) out += ',';
    first = false;
    out += key;
    out += "=\"";
    out += escapeLabelValue(value);
    out += '"';
  }
  out += '}';
}

void appendHeader(std::string& out, std::string_view name, std::string_view type,
                  std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;  // the help texts are ours: no backslash or line feed to escape
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

// One family: its header, then a sample per item.
template <typename Item, typename Number>
void appendFamily(std::string& out, std::string_view name, std::string_view type,
                  std::string_view help, const std::vector<Item>& items,
                  const std::function<Labels(const Item&)>& labels,
                  const std::function<Number(const Item&)>& value) {
  appendHeader(out, name, type, help);
  for (const Item& item : items) {
    out += name;
    appendLabels(out, labels(item));
    out += ' ';
    appendNumber(out, value(item));
    out += '\n';
  }
}

// A family per field of a snapshot struct M that each item is or holds:
// counters and gauges read straight off a metrics struct.
template <typename M, typename Number>
struct FieldFamily {
  std::string_view name;
  std::string_view help;
  Number M::*field;
};

template <typename Item, typename M, typename Number>
void appendFieldFamilies(std::string& out, std::string_view type,
                         std::initializer_list<FieldFamily<M, Number>> families,
                         const std::vector<Item>& items,
                         const std::function<Labels(const Item&)>& labels,
                         const M& (*snapshot)(const Item&)) {
  for (const FieldFamily<M, Number>& family : families) {
    appendFamily<Item, uint64_t>(
        out, family.name, type, family.help, items, labels,
        [&](const Item& item) { return static_cast<uint64_t>(snapshot(item).*family.field); });
  }
}

template <typename T>
const T& itself(const T& item) {
  return item;
}

void appendComponents(std::string& out, const std::vector<router::ComponentSnapshot>& components) {
  using C = router::ComponentSnapshot;
  const std::function<Labels(const C&)> labels = [](const C& c) {
    return Labels{{"name", c.name}, {"kind", router::componentKindName(c.kind)}};
  };
  appendFieldFamilies<C, C, uint64_t>(
      out, "counter",
      {
          {"cepbus_component_delivered_total", "Deliveries the component completed.",
           &C::delivered},
          {"cepbus_component_failed_total", "Deliveries that failed at the component.", &C::failed},
          {"cepbus_component_rejected_total", "Deliveries to the component refused by admission.",
           &C::rejected},
      },
      components, labels, &itself<C>);
  appendFamily<C, uint64_t>(out, "cepbus_component_queue_length", "gauge",
                            "Events waiting in the component's queues.", components, labels,
                            [](const C& c) { return c.queue_length; });
  appendFamily<C, double>(out, "cepbus_component_throughput_per_second", "gauge",
                          "Deliveries per second over the last sampling interval.", components,
                          labels, [](const C& c) { return c.throughput_per_s; });
}

void appendRoutes(std::string& out, const std::vector<router::RouteStatsSnapshot>& routes) {
  using R = router::RouteStatsSnapshot;
  const std::function<Labels(const R&)> labels = [](const R& r) {
    return Labels{{"route", r.pattern.empty() ? kDefaultRouteLabel : std::string_view(r.pattern)},
                  {"flow", r.flow}};
  };
  appendFieldFamilies<R, R, uint64_t>(
      out, "counter",
      {
          {"cepbus_route_published_total", "Exchanges routed by the route.", &R::published},
          {"cepbus_route_delivered_total", "Target deliveries finished before publish returned.",
           &R::delivered},
          {"cepbus_route_queued_total", "Target deliveries accepted by a queueing flow.",
           &R::queued},
          {"cepbus_route_rejected_total", "Target deliveries refused by admission.", &R::rejected},
          {"cepbus_route_failed_total", "Target deliveries that failed.", &R::failed},
          {"cepbus_route_unrouted_total", "Exchanges no subscriber wanted.", &R::unrouted},
          {"cepbus_route_refused_paused_total",
           "Exchanges refused (Unavailable) while the route was paused.", &R::refused_paused},
      },
      routes, labels, &itself<R>);
  appendFamily<R, uint64_t>(out, "cepbus_route_paused", "gauge",
                            "1 while the route is paused (refusing new exchanges).", routes, labels,
                            [](const R& r) { return r.paused ? 1u : 0u; });
}

void appendStages(std::string& out, const std::vector<FlowStage>& stages) {
  using S = FlowStage;
  using M = stages::StageMetricsSnapshot;
  const std::function<Labels(const S&)> labels = [](const S& s) {
    return Labels{{"flow", s.flow}, {"stage", s.metrics.name}};
  };
  appendFieldFamilies<S, M, uint64_t>(
      out, "counter",
      {
          {"cepbus_stage_offered_total", "Items offered to the stage.", &M::offered},
          {"cepbus_stage_ran_inline_total", "Items the idle stage handled on the offering thread.",
           &M::ran_inline},
          {"cepbus_stage_processed_total", "Items the stage's handler completed.", &M::processed},
          {"cepbus_stage_failed_total", "Items the handler failed or threw on.", &M::failed},
          {"cepbus_stage_rejected_total", "Items refused by admission control.", &M::rejected},
          {"cepbus_stage_degraded_total", "Items admitted while degraded.", &M::degraded},
      },
      stages, labels, [](const S& s) -> const M& { return s.metrics; });
  appendFieldFamilies<S, M, size_t>(
      out, "gauge",
      {
          {"cepbus_stage_queue_length", "Items waiting in the stage's queue.", &M::queue_length},
          {"cepbus_stage_capacity", "The stage queue's capacity.", &M::capacity},
          {"cepbus_stage_threads", "Worker threads the stage runs now.", &M::threads},
      },
      stages, labels, [](const S& s) -> const M& { return s.metrics; });
  constexpr std::string_view kLatency = "cepbus_stage_latency_seconds";
  appendHeader(out, kLatency, "summary",
               "Queueing plus service time of the items the stage handled.");
  for (const S& s : stages) {
    const stages::LatencySummary& l = s.metrics.latency;
    for (const auto& [quantile, ns] : {std::pair<std::string_view, uint64_t>{"0.5", l.p50_ns},
                                       {"0.9", l.p90_ns},
                                       {"0.99", l.p99_ns}}) {
      out += kLatency;
      Labels with_quantile = labels(s);
      with_quantile.emplace_back("quantile", quantile);
      appendLabels(out, with_quantile);
      out += ' ';
      appendNumber(out, static_cast<double>(ns) / 1e9);
      out += '\n';
    }
    out += kLatency;
    out += "_sum";
    appendLabels(out, labels(s));
    out += ' ';
    appendNumber(out, l.mean_ns * static_cast<double>(l.count) / 1e9);
    out += '\n';
    out += kLatency;
    out += "_count";
    appendLabels(out, labels(s));
    out += ' ';
    appendNumber(out, l.count);
    out += '\n';
  }
}

void appendFlows(std::string& out, const std::vector<flows::FlowMetricsSnapshot>& flow_metrics) {
  using F = flows::FlowMetricsSnapshot;
  const std::function<Labels(const F&)> labels = [](const F& f) {
    return Labels{{"flow", f.name}};
  };
  appendFieldFamilies<F, F, uint64_t>(
      out, "counter",
      {
          {"cepbus_flow_sent_total", "Exchanges handed to the flow.", &F::sent},
          {"cepbus_flow_delivered_total", "Target deliveries that succeeded.", &F::delivered},
          {"cepbus_flow_failed_total", "Target deliveries that failed.", &F::failed},
          {"cepbus_flow_rejected_total", "Target admissions refused.", &F::rejected},
          {"cepbus_flow_degraded_total", "Reliable deliveries degraded to best effort.",
           &F::degraded},
          {"cepbus_flow_invalid_total", "Exchanges refused by validation.", &F::invalid},
          {"cepbus_flow_duplicates_total", "Deliveries suppressed as duplicates.", &F::duplicates},
          {"cepbus_flow_listener_errors_total", "Outcomes the sender's listener threw on.",
           &F::listener_errors},
      },
      flow_metrics, labels, &itself<F>);
}

// A reliable flow's journal numbers and the flow's name.
struct FlowJournal {
  std::string flow;
  flows::ReliableMetricsSnapshot metrics;
};

void appendJournals(std::string& out, const std::vector<FlowJournal>& journals) {
  using J = FlowJournal;
  using M = flows::ReliableMetricsSnapshot;
  const std::function<Labels(const J&)> labels = [](const J& j) {
    return Labels{{"flow", j.flow}};
  };
  appendFieldFamilies<J, M, uint64_t>(
      out, "counter",
      {
          {"cepbus_journal_journaled_total", "Records the journal committed.", &M::journaled},
          {"cepbus_journal_commits_total", "Journal transactions written.", &M::commits},
          {"cepbus_journal_acknowledged_total",
           "Acknowledgements committed (row removed, or only the id kept if cancelled).",
           &M::acknowledged},
          {"cepbus_journal_cancelled_total",
           "Records acknowledged by their target before the journal wrote them.", &M::cancelled},
          {"cepbus_journal_redelivered_total", "Records found in the journal and dispatched again.",
           &M::redelivered},
          {"cepbus_journal_retries_total", "Deliveries tried again after a fault or a full stage.",
           &M::retries},
          {"cepbus_journal_abandoned_total",
           "Records that used up their attempts (journaled until the next start).", &M::abandoned},
          {"cepbus_journal_corrupt_total",
           "Journal records (removed) or delivered-id batches (skipped) that did not decode.",
           &M::corrupt},
          {"cepbus_journal_errors_total", "Journal transactions that failed.", &M::journal_errors},
      },
      journals, labels, [](const J& j) -> const M& { return j.metrics; });
  appendFieldFamilies<J, M, size_t>(
      out, "gauge",
      {
          {"cepbus_journal_in_flight", "Journaled deliveries not acknowledged yet in this run.",
           &M::in_flight},
          {"cepbus_journal_backlog", "Records waiting for a journal commit.", &M::backlog},
          {"cepbus_journal_held_back", "Deliveries waiting for their target's next retry.",
           &M::held_back},
      },
      journals, labels, [](const J& j) -> const M& { return j.metrics; });
}

// The process-wide budget of names clients may create (bus/core/wire_names.h):
// a rising refused count means a client sends ever new types or attribute names.
void appendWireNames(std::string& out) {
  const WireNameStats stats = wireNameStats();
  const std::pair<std::string_view, std::pair<std::string_view, uint64_t>> families[] = {
      {"cepbus_wire_names_refused_total",
       {"Event types and attribute names from clients refused: the budget of new names was "
        "spent",
        stats.refused}},
      {"cepbus_wire_names_created", {"Names clients created in the symbol table", stats.created}},
      {"cepbus_wire_names_budget", {"How many names clients may create", stats.budget}},
  };
  for (const auto& [name, family] : families) {
    appendHeader(out, name, name.ends_with("_total") ? "counter" : "gauge", family.first);
    out += name;
    out += ' ';
    appendNumber(out, family.second);
    out += '\n';
  }
}

// The HTTP listeners' counters, read from the metadata of their registry
// entries (services/http/http_listener.h, statsFields), label {name}.
void appendHttpListeners(std::string& out,
                         const std::vector<router::ComponentSnapshot>& components) {
  using C = router::ComponentSnapshot;
  const auto metadata = [](const C& c, std::string_view key) -> std::string_view {
    for (const auto& [k, value] : c.metadata) {
      if (k == key) return value;
    }
    return {};
  };
  std::vector<C> listeners;
  for (const C& c : components) {
    if (metadata(c, "type") == kHttpListenerType) listeners.push_back(c);
  }
  const std::function<Labels(const C&)> labels = [](const C& c) {
    return Labels{{"name", c.name}};
  };
  struct Family {
    std::string_view field;  // the metadata key
    std::string_view type;
    std::string_view help;
  };
  constexpr Family kFamilies[] = {
      {"connections", "counter", "HTTP connections accepted, refused ones included."},
      {"connections_refused", "counter", "HTTP connections answered 503 beyond max-connections."},
      {"ws_refused", "counter", "WebSocket upgrades answered 503 beyond max-ws-clients."},
      {"request_timeouts", "counter", "HTTP requests not read within request-timeout (408)."},
      {"open_connections", "gauge", "HTTP connections open now, WebSocket feeds included."},
      {"ws_clients", "gauge", "WebSocket feeds open now."},
  };
  for (const Family& family : kFamilies) {
    const std::string name =
        "cepbus_http_" + std::string(family.field) + (family.type == "counter" ? "_total" : "");
    appendFamily<C, uint64_t>(
        out, name, family.type, family.help, listeners, labels, [&](const C& c) {
          const std::string_view text = metadata(c, family.field);
          uint64_t value = 0;  // stays 0 when absent
          (void)std::from_chars(text.data(), text.data() + text.size(), value);
          return value;
        });
  }
}

// What each CEP query's detector holds, read from the metadata of its
// registry entry (services/cep/cep_service.h), label {name}. A query whose
// engine does not count has no sample.
void appendQueryPartials(std::string& out,
                         const std::vector<router::ComponentSnapshot>& components) {
  using C = router::ComponentSnapshot;
  struct Sample {
    const C* query;
    uint64_t kept = 0;
    uint64_t peak = 0;
  };
  std::vector<Sample> samples;
  for (const C& c : components) {
    Sample s{&c};
    bool is_query = false;
    bool counted = false;
    for (const auto& [key, value] : c.metadata) {
      const char* end = value.data() + value.size();
      if (key == "type") {
        is_query = value == "cep-query";
      } else if (key == "partial_matches") {
        counted = std::from_chars(value.data(), end, s.kept).ec == std::errc();
      } else if (key == "partial_matches_peak") {
        (void)std::from_chars(value.data(), end, s.peak);
      }
    }
    if (is_query && counted) samples.push_back(s);
  }
  const std::function<Labels(const Sample&)> labels = [](const Sample& s) {
    return Labels{{"name", s.query->name}};
  };
  appendFamily<Sample, uint64_t>(
      out, "cepbus_query_partial_matches", "gauge",
      "Partial matches the query's detector holds, in its engine's unit.", samples, labels,
      [](const Sample& s) { return s.kept; });
  appendFamily<Sample, uint64_t>(out, "cepbus_query_partial_matches_peak", "gauge",
                                 "The most partial matches the query's detector held at once.",
                                 samples, labels, [](const Sample& s) { return s.peak; });
}

}  // namespace

std::string escapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<FlowStage> flowStages(const router::Broker& broker) {
  std::vector<FlowStage> out;
  for (const auto& flow : broker.policy().flows()) {
    std::vector<stages::StageMetricsSnapshot> metrics;
    if (const auto* seda = dynamic_cast<const flows::SedaFlow*>(flow.get())) {
      metrics = seda->stageMetrics();
    } else if (const auto* reliable = dynamic_cast<const flows::ReliableFlow*>(flow.get())) {
      metrics = reliable->stageMetrics();
    }
    for (auto& m : metrics) out.push_back(FlowStage{flow->name(), std::move(m)});
  }
  return out;
}

std::optional<flows::ReliableMetricsSnapshot> journalMetrics(const flows::AbstractFlow& flow) {
  if (const auto* reliable = dynamic_cast<const flows::ReliableFlow*>(&flow)) {
    return reliable->reliableMetrics();
  }
  return std::nullopt;
}

// A cluster node's numbers, read from the JSON status its registry entry
// carries (services/cluster/cluster_node.h, clusterStatsJson).
struct ClusterNodeNumbers {
  std::string cluster;
  std::string node;
  nlohmann::json status;
};

void appendClusterNodes(std::string& out,
                        const std::vector<router::ComponentSnapshot>& components) {
  std::vector<ClusterNodeNumbers> nodes;
  for (const router::ComponentSnapshot& c : components) {
    if (!c.name.starts_with("cluster:")) continue;
    ClusterNodeNumbers n;
    for (const auto& [key, value] : c.metadata) {
      if (key == "status") n.status = nlohmann::json::parse(value, nullptr, false);
      if (key == "cluster") n.cluster = value;
    }
    if (!n.status.is_object()) continue;
    n.node = n.status.value("node", "");
    nodes.push_back(std::move(n));
  }
  // Labels view their strings, which stay in `nodes` (and `partitions`) meanwhile.
  const std::function<Labels(const ClusterNodeNumbers&)> node_labels =
      [](const ClusterNodeNumbers& n) {
        return Labels{{"cluster", n.cluster}, {"node", n.node}};
      };
  constexpr std::pair<std::string_view, std::string_view> kCounters[] = {
      {"received", "Input messages the node received from its partitions."},
      {"settled", "Input events the node let go (a message is accepted with its last)."},
      {"replayed", "Input messages that arrived redelivered (a takeover's replay)."},
      {"takeovers", "Partitions the node became the active consumer of."},
      {"handovers", "Partitions the node gave up to their owner while active."},
      {"duplicates", "Input events whose event id the partition already held."},
      {"late", "Events later than the slack, re-published as late."},
      {"rejected", "Input messages that were not events (refused)."},
      {"composites", "Composite events the node published."},
      {"reconnects", "Broker connections the node lost and made again."},
      {"stalls", "Times the watchdog found the node stalled past the idle timeout."},
      {"unconfirmed_handovers",
       "Handovers whose session end the broker did not confirm within the idle timeout."},
      {"window_full", "Times a partition queue held max-unsettled messages its windows need."},
      {"checkpoints", "Stream input: lease tokens (resume offsets) the broker accepted."},
      {"retention_gaps", "Stream input: offsets to replay that the stream no longer held."},
      {"out_of_order",
       "Stream input: messages stored after later ones of their publisher, held until those "
       "came."},
      {"sequence_gaps",
       "Stream input: messages of a publisher that never came while later ones waited."},
      {"stream_refreshes", "Stream input: stream links reopened after a silence."},
      {"stream_broker_switches",
       "Stream input: broker connections given up for delivering nothing from a stream that "
       "held more."},
      {"echo_timeouts",
       "Broker connections given up because the node's own heartbeats stopped coming back."},
  };
  for (const auto& [field, help] : kCounters) {
    const std::string name = "cepbus_cluster_" + std::string(field) + "_total";
    const std::string key(field);
    appendFamily<ClusterNodeNumbers, uint64_t>(
        out, name, "counter", help, nodes, node_labels,
        [&key](const ClusterNodeNumbers& n) { return n.status.value(key, uint64_t{0}); });
  }
  struct PartitionSample {
    const ClusterNodeNumbers* node;
    std::string partition;
    std::string role;
    uint64_t held;
  };
  std::vector<PartitionSample> partitions;
  for (const ClusterNodeNumbers& n : nodes) {
    for (const nlohmann::json& p : n.status.value("partitions", nlohmann::json::array())) {
      partitions.push_back({&n, std::to_string(p.value("partition", 0)), p.value("role", "none"),
                            p.value("held", uint64_t{0})});
    }
  }
  const std::function<Labels(const PartitionSample&)> partition_labels =
      [](const PartitionSample& p) {
        return Labels{{"cluster", p.node->cluster},
                      {"node", p.node->node},
                      {"partition", p.partition},
                      {"role", p.role}};
      };
  appendFamily<PartitionSample, uint64_t>(
      out, "cepbus_cluster_partition_active", "gauge",
      "1 while the node is the partition's active consumer.", partitions, partition_labels,
      [](const PartitionSample& p) { return p.role == "active" ? uint64_t{1} : uint64_t{0}; });
  appendFamily<PartitionSample, uint64_t>(
      out, "cepbus_cluster_partition_held", "gauge",
      "Input messages the node holds unsettled for the partition (the replay log).", partitions,
      partition_labels, [](const PartitionSample& p) { return p.held; });
}

std::string renderMetrics(const router::Broker& broker, const router::Registry& registry) {
  std::vector<flows::FlowMetricsSnapshot> flow_metrics;
  std::vector<FlowJournal> journals;
  for (const auto& flow : broker.policy().flows()) {
    flow_metrics.push_back(flow->metrics());
    if (auto journal = journalMetrics(*flow)) {
      journals.push_back(FlowJournal{flow->name(), *journal});
    }
  }
  std::string out;
  const std::vector<router::ComponentSnapshot> components = registry.snapshot();
  appendComponents(out, components);
  appendClusterNodes(out, components);
  appendHttpListeners(out, components);
  appendQueryPartials(out, components);
  appendRoutes(out, broker.routeStats());
  appendFlows(out, flow_metrics);
  appendJournals(out, journals);
  appendStages(out, flowStages(broker));
  appendWireNames(out);
  return out;
}

}  // namespace cepbus::services::http
