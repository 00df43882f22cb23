// examples/monitoring: every expression of the Prometheus alerting rules and
// of the Grafana dashboard names a metric family that a running bus serves.
// The families are read from the live /metrics of a real `cepbus run`, so a
// family renamed or removed in the bus fails here, not in someone's
// dashboard.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/testing/bus_process.h"
#include "tests/testing/http_get.h"
#include "tests/testing/ports.h"

namespace cepbus {
namespace {

namespace fs = std::filesystem;
using testing::BusProcess;
using testing::httpGet;
using testing::reservedPort;

const fs::path kMonitoring = fs::path(CEPBUS_TEST_SOURCE_DIR) / "examples/monitoring";

// Series Prometheus makes itself for every target, not the bus.
const std::set<std::string> kPrometheusOwn = {"up"};

// The metric names a PromQL expression reads: identifiers that are neither
// functions, keywords, label names nor inside strings, matchers or ranges.
std::set<std::string> metricNames(std::string expr) {
  // Strings, label matchers and ranges go first ({...} and [...] hold label
  // names, values and durations, never metric names).
  expr = std::regex_replace(expr, std::regex(R"("(\\.|[^"\\])*")"), "\"\"");
  expr = std::regex_replace(expr, std::regex(R"(\{[^}]*\})"), "");
  expr = std::regex_replace(expr, std::regex(R"(\[[^\]]*\])"), "");
  // So do the label lists of aggregations and vector matching.
  expr = std::regex_replace(
      expr, std::regex(R"(\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\))"), " ");
  static const std::set<std::string> kKeywords = {"and", "or",      "unless", "bool",    "offset",
                                                  "by",  "without", "on",     "ignoring"};
  std::set<std::string> names;
  for (size_t i = 0; i < expr.size();) {
    const unsigned char c = expr[i];
    if (std::isdigit(c) || c == '.') {  // a number, exponent included
      while (i < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[i])) ||
                                 expr[i] == '.' || expr[i] == '+' || expr[i] == '-')) {
        ++i;
      }
      continue;
    }
    if (!std::isalpha(c) && c != '_' && c != ':') {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[end])) ||
                                 expr[end] == '_' || expr[end] == ':')) {
      ++end;
    }
    const std::string word = expr.substr(i, end - i);
    size_t next = expr.find_first_not_of(" \t", end);
    const bool function = next != std::string::npos && expr[next] == '(';
    if (!function && !kKeywords.count(word)) names.insert(word);
    i = end;
  }
  return names;
}

TEST(MetricNamesTest, FindsTheMetricsOfAnExpression) {
  EXPECT_EQ(metricNames(R"(sum by (instance, route) (rate(a_total{x=~"$i", q="0.9"}[1m])) / )"
                        R"(on(instance) b > 0.75 and bool c offset 5m unless topk(10, d))"),
            (std::set<std::string>{"a_total", "b", "c", "d"}));
  EXPECT_EQ(metricNames("histogram_quantile(0.99, e_bucket) > 1e-3"),
            (std::set<std::string>{"e_bucket"}));
}

class MonitoringTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bus_ = new BusProcess(CEPBUS_BINARY, "cepbus-monitoring");
    const int http = reservedPort();
    // A bus with every kind of component the families describe: an admin
    // listener, a stage, a journaled route, a query, a replay.
    std::ofstream(bus_->dir() / "in.jsonl") << R"({"type":"A","ts":1,"attrs":{"x":1}}
{"type":"A","ts":2,"attrs":{"x":2}}
)";
    ASSERT_TRUE(bus_->start(R"(<cepbus name="monitoring">
  <journal path="journal.db"/>
  <listeners><http host="127.0.0.1" port=")" +
                                std::to_string(http) +
                                R"("/></listeners>
  <stages><stage name="s" capacity="64"/></stages>
  <plugins><plugin name="nfa"/></plugins>
  <routes>
    <route address="in.#" flow="seda" stage="s"/>
    <route address="out.#" flow="reliable"/>
  </routes>
  <service-assembly name="a">
    <service-unit name="src" type="replay-source">
      <param name="file" value="in.jsonl"/>
      <publish address="in.a"/>
    </service-unit>
    <service-unit name="q" type="cep">
      <query name="pairs" engine="nfa" input="in.a" output="out.pairs">
        <text>PATTERN SEQ(A a, A b) WITHIN 10 RETURN Pair(a.x, b.x)</text>
      </query>
    </service-unit>
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="out.jsonl"/>
      <subscribe address="out.#"/>
    </service-unit>
  </service-assembly>
</cepbus>
)",
                            {http}));
    const std::string metrics = httpGet(http, "/metrics");
    ASSERT_THAT(metrics, ::testing::HasSubstr("200 OK"));
    std::istringstream in(metrics);
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (!std::regex_match(line, m, std::regex(R"(# TYPE (\S+) (\S+)\r?)"))) continue;
      families_.insert(m[1]);
      if (m[2] == "summary" || m[2] == "histogram") {
        for (const char* suffix : {"_sum", "_count", "_bucket"})
          families_.insert(m[1].str() + suffix);
      }
    }
  }
  static void TearDownTestSuite() {
    EXPECT_TRUE(bus_->stop());
    delete bus_;
  }

  // Every name of `expr` is served (or Prometheus's own).
  static void expectServed(const std::string& where, const std::string& expr) {
    const std::set<std::string> names = metricNames(expr);
    EXPECT_FALSE(names.empty()) << where << ": no metric in " << expr;
    for (const std::string& name : names) {
      EXPECT_TRUE(families_.count(name) || kPrometheusOwn.count(name))
          << where << ": " << name << " is not served on /metrics (expression: " << expr << ")";
    }
  }

  static inline BusProcess* bus_ = nullptr;
  static inline std::set<std::string> families_;
};

TEST_F(MonitoringTest, TheBusServesFamilies) {
  EXPECT_GT(families_.size(), 30u);
  EXPECT_TRUE(families_.count("cepbus_stage_queue_length"));
}

// The rules file keeps each expression on its line (see its header), so it
// is read without a YAML library.
TEST_F(MonitoringTest, EveryAlertingRuleNamesServedFamilies) {
  std::ifstream in(kMonitoring / "cepbus-alerts.yml");
  ASSERT_TRUE(in) << kMonitoring / "cepbus-alerts.yml";
  int rules = 0, exprs = 0, line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    std::smatch m;
    if (std::regex_search(line, std::regex(R"(^\s*- alert: \S)"))) ++rules;
    if (!std::regex_match(line, m, std::regex(R"(\s*expr:\s*(.*))"))) continue;
    ++exprs;
    const std::string expr = m[1];
    ASSERT_FALSE(expr.empty() || expr == "|" || expr == ">")
        << "cepbus-alerts.yml:" << line_no << ": keep the expression on the expr: line";
    expectServed("cepbus-alerts.yml:" + std::to_string(line_no), expr);
  }
  EXPECT_GE(rules, 10);
  EXPECT_EQ(rules, exprs);
}

// Each panel's queries, and the dashboard's variables (label_values(METRIC,
// LABEL) reads METRIC).
TEST_F(MonitoringTest, EveryDashboardQueryNamesServedFamilies) {
  std::ifstream in(kMonitoring / "cepbus-dashboard.json");
  ASSERT_TRUE(in);
  const nlohmann::json dashboard = nlohmann::json::parse(in);
  int queries = 0;
  std::function<void(const nlohmann::json&, const std::string&)> walk =
      [&](const nlohmann::json& j, const std::string& where) {
        if (j.is_object()) {
          if (j.contains("expr") && j["expr"].is_string()) {
            ++queries;
            expectServed(where, j["expr"]);
          }
          for (const auto& [key, value] : j.items()) walk(value, where + "/" + key);
        } else if (j.is_array()) {
          for (size_t i = 0; i < j.size(); ++i) walk(j[i], where + "/" + std::to_string(i));
        }
      };
  walk(dashboard["panels"], "panels");
  EXPECT_GE(queries, 20);
  for (const auto& variable : dashboard["templating"]["list"]) {
    const std::string definition = variable.value("definition", "");
    std::smatch m;
    if (std::regex_match(definition, m, std::regex(R"(label_values\((.+),\s*\w+\))"))) {
      expectServed("templating/" + variable["name"].get<std::string>(), m[1]);
    }
  }
}

}  // namespace
}  // namespace cepbus
