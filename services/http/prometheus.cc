#include "services/http/prometheus.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
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
  return renderPrometheus(registry.stats());
}

}  // namespace cepbus::services::http
