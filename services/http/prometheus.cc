#include "services/http/prometheus.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

namespace cepbus::services::http {
namespace {

using stats::Labels;
using stats::MetricKind;

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

// `labels`, and `extra` after them, in braces; nothing when there are none.
void appendLabels(std::string& out, const Labels& labels,
                  const std::pair<std::string_view, std::string_view>* extra = nullptr) {
  if (labels.empty() && extra == nullptr) return;
  out += '{';
  bool first = true;
  auto append = [&](std::string_view key, std::string_view value) {
    if (!first) out += ',';
    first = false;
    out += key;
    out += "=\"";
    out += escapeLabelValue(value);
    out += '"';
  };
  for (const auto& [key, value] : labels) append(key, value);
  if (extra != nullptr) append(extra->first, extra->second);
  out += '}';
}

void appendHeader(std::string& out, std::string_view name, std::string_view type,
                  std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void appendSample(std::string& out, std::string_view name, const Labels& labels, double value,
                  const std::pair<std::string_view, std::string_view>* extra = nullptr) {
  out += name;
  appendLabels(out, labels, extra);
  out += ' ';
  appendNumber(out, value);
  out += '\n';
}

std::string familyName(const stats::Family& family) {
  std::string name = "cepbus_" + family.component + "_" + family.name;
  if (family.kind == MetricKind::kCounter) name += "_total";
  if (family.kind == MetricKind::kHistogram) name += "_seconds";
  return name;
}

std::string_view typeName(MetricKind kind) {
  switch (kind) {
    case MetricKind::kCounter:
      return "counter";
    case MetricKind::kGauge:
      return "gauge";
    case MetricKind::kHistogram:
      return "summary";
  }
  return "untyped";
}

// A histogram of nanoseconds as a summary in seconds.
void appendSummary(std::string& out, const std::string& name, const Labels& labels,
                   const stats::HistogramSummary& s) {
  for (const auto& [quantile, ns] : {std::pair<std::string_view, uint64_t>{"0.5", s.p50_ns},
                                     {"0.9", s.p90_ns},
                                     {"0.99", s.p99_ns}}) {
    const std::pair<std::string_view, std::string_view> q{"quantile", quantile};
    appendSample(out, name, labels, static_cast<double>(ns) / 1e9, &q);
  }
  appendSample(out, name + "_sum", labels, s.mean_ns * static_cast<double>(s.count) / 1e9);
  appendSample(out, name + "_count", labels, static_cast<double>(s.count));
}

// ---------------------------------------------------------------------------
// The cluster nodes do not report into stats scopes yet: what they keep in
// their registry entries' metadata, read back here.

using Sample = std::pair<Labels, double>;

void appendFamily(std::string& out, std::string_view name, std::string_view type,
                  std::string_view help, const std::vector<Sample>& samples) {
  appendHeader(out, name, type, help);
  for (const auto& [labels, value] : samples) appendSample(out, name, labels, value);
}

// A cluster node's numbers, from the JSON status its registry entry carries
// (services/cluster/cluster_node.h, clusterStatsJson), labels {cluster, node}.
void appendClusterNodes(std::string& out,
                        const std::vector<router::ComponentSnapshot>& components) {
  struct Node {
    Labels labels;
    nlohmann::json status;
  };
  std::vector<Node> nodes;
  for (const router::ComponentSnapshot& c : components) {
    if (!c.name.starts_with("cluster:")) continue;
    std::string cluster;
    nlohmann::json status;
    for (const auto& [key, value] : c.metadata) {
      if (key == "status") status = nlohmann::json::parse(value, nullptr, false);
      if (key == "cluster") cluster = value;
    }
    if (!status.is_object()) continue;
    nodes.push_back({{{"cluster", cluster}, {"node", status.value("node", "")}}, status});
  }
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
    std::vector<Sample> samples;
    samples.reserve(nodes.size());
    const std::string key(field);
    for (const Node& n : nodes) {
      samples.push_back({n.labels, static_cast<double>(n.status.value(key, uint64_t{0}))});
    }
    appendFamily(out, "cepbus_cluster_" + key + "_total", "counter", help, samples);
  }
  std::vector<Sample> active;
  std::vector<Sample> held;
  for (const Node& n : nodes) {
    for (const nlohmann::json& p : n.status.value("partitions", nlohmann::json::array())) {
      Labels labels = n.labels;
      labels.emplace_back("partition", std::to_string(p.value("partition", 0)));
      const std::string role = p.value("role", "none");
      labels.emplace_back("role", role);
      active.push_back({labels, role == "active" ? 1.0 : 0.0});
      held.push_back({std::move(labels), static_cast<double>(p.value("held", uint64_t{0}))});
    }
  }
  appendFamily(out, "cepbus_cluster_partition_active", "gauge",
               "1 while the node is the partition's active consumer.", active);
  appendFamily(out, "cepbus_cluster_partition_held", "gauge",
               "Input messages the node holds unsettled for the partition (the replay log).", held);
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

std::string renderPrometheus(const stats::Store& store) {
  const std::vector<stats::ScopeSnapshot> scopes = store.scopes();
  // Each family's samples, sorted by labels; of two scopes with the same
  // labels only the older one, which the store gives first.
  using Sample = std::pair<const Labels*, const stats::MetricValue*>;
  std::map<std::pair<std::string_view, std::string_view>, std::vector<Sample>> samples;
  for (const stats::ScopeSnapshot& scope : scopes) {
    for (const stats::MetricValue& metric : scope.metrics) {
      samples[{scope.component, metric.name}].emplace_back(&scope.labels, &metric);
    }
  }
  for (auto& [family, list] : samples) {
    std::stable_sort(list.begin(), list.end(),
                     [](const Sample& a, const Sample& b) { return *a.first < *b.first; });
    list.erase(std::unique(list.begin(), list.end(),
                           [](const Sample& a, const Sample& b) { return *a.first == *b.first; }),
               list.end());
  }
  std::string out;
  for (const stats::Family& family : store.families()) {
    const std::string name = familyName(family);
    appendHeader(out, name, typeName(family.kind), family.help);
    const auto found = samples.find({family.component, family.name});
    if (found == samples.end()) continue;
    for (const auto& [labels, metric] : found->second) {
      if (family.kind == MetricKind::kHistogram) {
        appendSummary(out, name, *labels, metric->summary);
      } else {
        appendSample(out, name, *labels, metric->value);
      }
    }
  }
  return out;
}

std::string renderMetrics(const router::Registry& registry) {
  std::string out = renderPrometheus(registry.stats());
  const std::vector<router::ComponentSnapshot> components = registry.snapshot();
  appendClusterNodes(out, components);
  return out;
}

}  // namespace cepbus::services::http
