// End-to-end tests of the admin side of the real `cepbus` binary: the REST
// API (lists, deploy/undeploy, queries, route pause, the bearer token, the
// probes and the audit log),
// /metrics parsed as Prometheus text, and the dashboard in headless Chromium
// driven over the Chrome DevTools Protocol.
//
// Every wait polls with a generous deadline (the box may be loaded); no
// assertion is about time.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tests/integration/child_process.h"
#include "tests/testing/bus_process.h"
#include "tests/testing/wait.h"

namespace cepbus {
namespace {

namespace fs = std::filesystem;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using asio::ip::tcp;
using nlohmann::json;
using testing::BusProcess;
using testing::ChildProcess;
using ::testing::HasSubstr;

constexpr const char* kTokenEnv = "CEPBUS_E2E_ADMIN_TOKEN";
constexpr const char* kToken = "e2e-secret-token";

struct HttpResult {
  int status = 0;
  std::string body;
  std::string content_type;
  json parsed() const { return json::parse(body, nullptr, false); }
};

// One HTTP/1.1 request on a fresh connection; status 0 when it could not connect.
HttpResult request(int port, bhttp::verb method, const std::string& target,
                   const std::string& body = {}, const std::string& token = {}) {
  try {
    asio::io_context ioc;
    beast::tcp_stream stream(ioc);
    stream.expires_after(std::chrono::seconds(60));
    stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)));
    bhttp::request<bhttp::string_body> req(method, target, 11);
    req.set(bhttp::field::host, "127.0.0.1");
    if (!token.empty()) req.set(bhttp::field::authorization, "Bearer " + token);
    req.body() = body;
    req.prepare_payload();
    bhttp::write(stream, req);
    beast::flat_buffer buffer;
    bhttp::response<bhttp::string_body> res;
    bhttp::read(stream, buffer, res);
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    return {static_cast<int>(res.result_int()), res.body(),
            std::string(res[bhttp::field::content_type])};
  } catch (const std::exception&) {
    return {};
  }
}

HttpResult get(int port, const std::string& target) {
  return request(port, bhttp::verb::get, target);
}

// Polls `condition`, an HTTP request or a browser's answer, every 50 ms for
// up to a minute (a loaded box runs the bus and Chromium slowly).
::testing::AssertionResult eventually(std::string_view what,
                                      const std::function<bool()>& condition) {
  return testing::eventually(what, condition, std::chrono::seconds(60),
                             std::chrono::milliseconds(50));
}

class AdminE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv(kTokenEnv, kToken, 1); }

  // `n` stock ticks, ts 1..n, symbols cycling over four, prices repeating.
  void writeTicks(const std::string& name, int n) {
    std::ofstream out(bus_.dir() / name);
    static const char* kSymbols[] = {"IBM", "MSFT", "AAPL", "ORCL"};
    for (int i = 1; i <= n; ++i) {
      out << R"({"type":"Stock","ts":)" << i << R"(,"attrs":{"symbol":")" << kSymbols[i % 4]
          << R"(","price":)" << (100 + i % 3) << "}}\n";
    }
  }

  // Starts the bus: one SEDA stage for ticks, a CEP unit with no query, a
  // sink of the ticks, and the admin listener on an ephemeral port. A
  // deployed source feeds it. Returns the admin port (0 on failure).
  int startBus(const std::string& extra_assemblies = {}) {
    const std::string descriptor = R"(<cepbus name="admin-e2e">
  <listeners><http host="127.0.0.1" port="0" token-env=")" +
                                   std::string(kTokenEnv) + R"("/></listeners>
  <stages><stage name="dispatch" capacity="4096" max-threads="2"/></stages>
  <journal path="journal.db"/>
  <plugins><search-path>)" + std::string(CEPBUS_PLUGIN_DIR) +
                                   R"(</search-path><plugin name="nfa"/></plugins>
  <routes default-flow="st"><route address="ticks.#" flow="seda" stage="dispatch"/></routes>
  <service-assembly name="core">
    <service-unit name="cep" type="cep">
      <query name="pairs" engine="nfa" input="ticks.all" output="matches.pairs">
        <text>PATTERN SEQ(Stock a, Stock b) WHERE a.symbol = 'IBM' AND b.symbol = 'MSFT' WITHIN 5 RETURN Pair(a.price, b.price)</text>
      </query>
    </service-unit>
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="ticks-out.jsonl"/><subscribe address="ticks.all"/>
    </service-unit>
  </service-assembly>
)" + extra_assemblies + "</cepbus>\n";
    if (!bus_.start(descriptor)) return 0;
    return bus_.adminPort(std::chrono::seconds(60));
  }

  // Adds `query_xml` to the core's CEP unit over REST, with the token.
  static HttpResult addQuery(int port, const std::string& query_xml) {
    return request(port, bhttp::verb::post, "/api/queries/core.cep", query_xml, kToken);
  }

  // Events the sink's endpoint has been handed (the registry, over REST).
  static int64_t sinkDelivered(int port) {
    json sink = get(port, "/api/components/core.sink%3Ain").parsed();
    return sink.is_object() ? sink.value("delivered", int64_t{-1}) : -1;
  }

  static std::string sourceAssembly(const std::string& name, int rate) {
    return R"(<service-assembly name=")" + name + R"(">
  <service-unit name="feed" type="replay-source">
    <param name="file" value="ticks.jsonl"/><param name="rate" value=")" +
           std::to_string(rate) + R"("/>
    <publish address="ticks.all"/>
  </service-unit>
</service-assembly>
)";
  }

  static std::optional<json> findByName(const json& list, const std::string& name) {
    for (const json& item : list) {
      if (item.value("name", "") == name) return item;
    }
    return std::nullopt;
  }

  BusProcess bus_{CEPBUS_BINARY, "cepbus-admin"};
};

TEST_F(AdminE2eTest, ListsDeploysUndeploysAndManagesQueries) {
  writeTicks("ticks.jsonl", 200000);
  const int port = startBus();
  ASSERT_NE(port, 0) << bus_.err();
  EXPECT_THAT(bus_.err(), HasSubstr("dashboard: http://127.0.0.1:" + std::to_string(port) + "/"));

  // Lists.
  json services = get(port, "/api/services").parsed();
  ASSERT_TRUE(services.contains("services")) << services;
  EXPECT_TRUE(findByName(services["services"], "core.cep"));
  EXPECT_TRUE(findByName(services["services"], "core.sink"));
  json assemblies = get(port, "/api/assemblies").parsed();
  ASSERT_EQ(assemblies["assemblies"].size(), 1u) << assemblies;
  EXPECT_EQ(assemblies["assemblies"][0]["name"], "core");
  json plugins = get(port, "/api/plugins").parsed();
  ASSERT_TRUE(findByName(plugins["plugins"], "nfa")) << plugins;
  EXPECT_EQ(findByName(plugins["plugins"], "nfa")->value("state", ""), "started");
  json queries = get(port, "/api/queries").parsed();
  ASSERT_EQ(queries["queries"].size(), 1u) << queries;
  EXPECT_EQ(queries["queries"][0]["name"], "pairs");
  EXPECT_EQ(queries["queries"][0]["engine"], "nfa");
  EXPECT_EQ(get(port, "/api/routes").parsed()["routes"][0]["route"], "ticks.#");
  EXPECT_TRUE(get(port, "/api/endpoints").parsed().contains("endpoints"));
  EXPECT_TRUE(get(port, "/api/stages").parsed().contains("stages"));

  // Without the token, or with a wrong one, nothing changes.
  const std::string source = sourceAssembly("feed", 2000);
  HttpResult refused = request(port, bhttp::verb::post, "/api/assemblies", source);
  EXPECT_EQ(refused.status, 401);
  EXPECT_TRUE(refused.parsed().contains("error"));
  EXPECT_EQ(request(port, bhttp::verb::post, "/api/assemblies", source, "wrong").status, 401);
  EXPECT_EQ(request(port, bhttp::verb::delete_, "/api/assemblies/core").status, 401);
  EXPECT_EQ(get(port, "/api/assemblies").parsed()["assemblies"].size(), 1u);

  // A bad fragment: 400 naming the line.
  HttpResult bad = request(port, bhttp::verb::post, "/api/assemblies",
                           "<service-assembly name=\"b\">\n\n  <service-unit name=\"u\" "
                           "type=\"nope\"/>\n</service-assembly>",
                           kToken);
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.parsed().value("error", ""), HasSubstr(":3"));

  // Deploy a source: its events reach the sink.
  HttpResult deployed = request(port, bhttp::verb::post, "/api/assemblies", source, kToken);
  ASSERT_EQ(deployed.status, 201) << deployed.body;
  EXPECT_EQ(request(port, bhttp::verb::post, "/api/assemblies", source, kToken).status, 409);
  ASSERT_TRUE(eventually("200 events at the sink", [&] { return sinkDelivered(port) >= 200; }))
      << sinkDelivered(port);
  EXPECT_TRUE(findByName(get(port, "/api/services").parsed()["services"], "feed.feed"));

  // A query added at run time consumes the ticks; removed, it is gone.
  HttpResult added = addQuery(port,
                              "<query name=\"orcl\" engine=\"nfa\" input=\"ticks.all\" "
                              "output=\"matches.orcl\">\n<text>PATTERN Stock s WHERE s.symbol = "
                              "'ORCL' RETURN Orcl(s.price)</text></query>");
  ASSERT_EQ(added.status, 201) << added.body;
  EXPECT_EQ(addQuery(port,
                     "<query name=\"x\" engine=\"nfa\" input=\"ticks.all\" output=\"o\">\n"
                     "<text>PATTERN SEQ(</text></query>")
                .status,
            400);
  EXPECT_EQ(request(port, bhttp::verb::post, "/api/queries/no.such", "<query/>", kToken).status,
            404);
  ASSERT_TRUE(eventually("the added query to match more than 10", [&] {
    auto q = findByName(get(port, "/api/queries").parsed()["queries"], "orcl");
    return q && q->value("matches", 0) > 10;
  }));
  HttpResult removed =
      request(port, bhttp::verb::delete_, "/api/queries/core.cep/orcl", {}, kToken);
  EXPECT_EQ(removed.status, 200) << removed.body;
  EXPECT_FALSE(findByName(get(port, "/api/queries").parsed()["queries"], "orcl"));
  EXPECT_EQ(request(port, bhttp::verb::delete_, "/api/queries/core.cep/orcl", {}, kToken).status,
            404);

  // Pausing the route refuses the source's publishes; resuming lets them through.
  EXPECT_EQ(request(port, bhttp::verb::post, "/api/routes/ticks.%23/pause").status, 401);
  ASSERT_EQ(request(port, bhttp::verb::post, "/api/routes/ticks.%23/pause", {}, kToken).status,
            200);
  ASSERT_TRUE(eventually("the paused route to refuse a publish", [&] {
    return get(port, "/api/routes").parsed()["routes"][0].value("refused_paused", 0) > 0;
  }));
  EXPECT_TRUE(get(port, "/api/routes").parsed()["routes"][0].value("paused", false));
  ASSERT_EQ(request(port, bhttp::verb::post, "/api/routes/ticks.%23/resume", {}, kToken).status,
            200);
  EXPECT_EQ(request(port, bhttp::verb::post, "/api/routes/nope/pause", {}, kToken).status, 404);

  // Undeploy the source: the sink stops growing.
  HttpResult undeployed = request(port, bhttp::verb::delete_, "/api/assemblies/feed", {}, kToken);
  ASSERT_EQ(undeployed.status, 200) << undeployed.body;
  EXPECT_FALSE(findByName(get(port, "/api/services").parsed()["services"], "feed.feed"));
  EXPECT_EQ(request(port, bhttp::verb::delete_, "/api/assemblies/feed", {}, kToken).status, 404);
  // What the stage still held reaches the sink, then nothing more comes: a
  // second of quiet after the count settled, in which the source, were it
  // still deployed, would have published 2,000 more.
  const int64_t settled =
      testing::settledValue([&] { return sinkDelivered(port); }, std::chrono::milliseconds(500));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_EQ(sinkDelivered(port), settled);

  EXPECT_TRUE(bus_.stop(std::chrono::seconds(60)));
}

// The probes, the index and the single-resource reads a load balancer or an
// operator's script uses, on the real process; a change is audited in the
// bus's log with who made it.
TEST_F(AdminE2eTest, ProbesIndexOneResourceAndTheAuditLineOnTheRunningBus) {
  const int port = startBus();
  ASSERT_NE(port, 0) << bus_.err();

  HttpResult health = get(port, "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.parsed(), json({{"status", "ok"}}));
  ASSERT_TRUE(eventually("/ready to answer 200", [&] { return get(port, "/ready").status == 200; }))
      << get(port, "/ready").body;

  const json index = get(port, "/api/").parsed();
  ASSERT_TRUE(index.contains("resources")) << index;
  std::set<std::string> paths;
  for (const json& r : index["resources"]) paths.insert(r.value("path", ""));
  EXPECT_TRUE(paths.count("/ready") && paths.count("/api/queries/{service}/{query}")) << index;

  HttpResult query = get(port, "/api/queries/core.cep/pairs");
  ASSERT_EQ(query.status, 200) << query.body;
  EXPECT_EQ(query.parsed().value("name", ""), "pairs");
  EXPECT_EQ(query.parsed().value("engine", ""), "nfa");
  EXPECT_EQ(get(port, "/api/queries/core.cep/nope").status, 404);
  HttpResult service = get(port, "/api/services/core.sink");
  ASSERT_EQ(service.status, 200) << service.body;
  EXPECT_EQ(service.parsed().value("name", ""), "core.sink");

  // A paused route makes the bus not ready, naming the route; the pause and
  // the refused anonymous resume are audited.
  ASSERT_EQ(request(port, bhttp::verb::post, "/api/routes/ticks.%23/pause", {}, kToken).status,
            200);
  HttpResult paused = get(port, "/ready");
  EXPECT_EQ(paused.status, 503);
  EXPECT_THAT(paused.body, HasSubstr("ticks.#"));
  EXPECT_EQ(request(port, bhttp::verb::post, "/api/routes/ticks.%23/resume").status, 401);
  ASSERT_EQ(request(port, bhttp::verb::post, "/api/routes/ticks.%23/resume", {}, kToken).status,
            200);
  EXPECT_EQ(get(port, "/ready").status, 200);
  ASSERT_TRUE(eventually("the audit lines in the bus's log", [&] {
    return bus_.err().find("POST /api/routes/ticks.%23/resume by " + std::string(kTokenEnv) +
                           ": 200") != std::string::npos;
  })) << bus_.err();
  EXPECT_THAT(bus_.err(),
              HasSubstr("POST /api/routes/ticks.%23/pause by " + std::string(kTokenEnv) + ": 200"));
  EXPECT_THAT(bus_.err(), HasSubstr("POST /api/routes/ticks.%23/resume by anonymous: 401"));

  EXPECT_TRUE(bus_.stop(std::chrono::seconds(60)));
}

// Family name of a sample: the metric name without a summary's suffixes.
std::string familyOf(const std::string& metric, const std::set<std::string>& families) {
  if (families.count(metric)) return metric;
  for (const char* suffix : {"_sum", "_count"}) {
    const std::string s = suffix;
    if (metric.size() > s.size() && metric.ends_with(s) &&
        families.count(metric.substr(0, metric.size() - s.size()))) {
      return metric.substr(0, metric.size() - s.size());
    }
  }
  return metric;
}

// Parses Prometheus text: every sample's family has HELP and TYPE before it.
// Returns the samples (name{labels} -> value) and the family types.
std::map<std::string, double> parseMetrics(const std::string& text,
                                           std::map<std::string, std::string>& types) {
  std::map<std::string, double> samples;
  std::set<std::string> helped;
  std::set<std::string> families;
  std::istringstream in(text);
  const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$)");
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    std::istringstream words(line);
    std::string hash, kind, name, rest;
    if (line.starts_with("# HELP ")) {
      words >> hash >> kind >> name;
      helped.insert(name);
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      words >> hash >> kind >> name >> rest;
      EXPECT_TRUE(helped.count(name)) << "TYPE before HELP: " << name;
      types[name] = rest;
      families.insert(name);
      continue;
    }
    std::smatch m;
    EXPECT_TRUE(std::regex_match(line, m, sample)) << "not a sample: " << line;
    if (m.empty()) continue;
    const std::string family = familyOf(m[1].str(), families);
    EXPECT_TRUE(types.count(family) && helped.count(family)) << "no HELP/TYPE for " << line;
    samples[m[1].str() + m[2].str()] = std::stod(m[3].str());
  }
  return samples;
}

TEST_F(AdminE2eTest, MetricsAreValidPrometheusTextAndCountersGrow) {
  writeTicks("ticks.jsonl", 200000);
  const int port = startBus(sourceAssembly("feed", 500));
  ASSERT_NE(port, 0) << bus_.err();
  std::map<std::string, std::string> types;
  HttpResult first = get(port, "/metrics");
  ASSERT_EQ(first.status, 200);
  EXPECT_THAT(first.content_type, HasSubstr("text/plain; version=0.0.4"));
  const auto before = parseMetrics(first.body, types);
  for (const char* family : {"cepbus_component_delivered_total", "cepbus_route_published_total",
                             "cepbus_flow_sent_total", "cepbus_stage_processed_total",
                             "cepbus_stage_latency_seconds", "cepbus_route_paused"}) {
    EXPECT_TRUE(types.count(family)) << family;
  }
  EXPECT_EQ(types["cepbus_stage_latency_seconds"], "summary");
  const std::string published =
      R"(cepbus_route_published_total{route="ticks.#",flow="seda:dispatch"})";
  std::map<std::string, double> after;
  ASSERT_TRUE(eventually("the published counter to grow by 50", [&] {
    std::map<std::string, std::string> t;
    after = parseMetrics(get(port, "/metrics").body, t);
    return after.count(published) && before.count(published) &&
           after[published] > before.at(published) + 50;
  }));
  // No counter ever goes down.
  for (const auto& [name, value] : before) {
    const std::string metric = name.substr(0, name.find('{'));
    if (types[metric] == "counter" && after.count(name)) {
      EXPECT_GE(after[name], value) << name;
    }
  }
}

// A minimal Chrome DevTools Protocol client over one page's WebSocket.
class DevTools {
 public:
  // `ws_url` as /json/list gives it; only its path is used (the host part
  // echoes the Host header of the listing request).
  DevTools(int port, const std::string& ws_url) : ws_(ioc_) {
    const std::regex url(R"(ws://[^/]+(/.*))");
    std::smatch m;
    if (!std::regex_match(ws_url, m, url)) throw std::runtime_error("bad ws url " + ws_url);
    ws_.next_layer().connect(
        tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<uint16_t>(port)));
    // A read that never ends fails the test instead of hanging it.
    timeval tv{120, 0};
    ::setsockopt(ws_.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ws_.handshake("127.0.0.1:" + std::to_string(port), m[1].str());
  }

  // Sends a command and returns its result; events read meanwhile are kept.
  json call(const std::string& method, json params = json::object()) {
    const int id = ++next_id_;
    ws_.write(asio::buffer(json{{"id", id}, {"method", method}, {"params", params}}.dump()));
    for (;;) {
      beast::flat_buffer buffer;
      ws_.read(buffer);
      json message = json::parse(beast::buffers_to_string(buffer.data()), nullptr, false);
      if (message.contains("id") && message["id"] == id) {
        if (message.contains("error")) throw std::runtime_error(message["error"].dump());
        return message["result"];
      }
      if (message.contains("method")) events_.push_back(std::move(message));
    }
  }

  json evaluate(const std::string& expression) {
    json result = call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}});
    return result["result"].value("value", json());
  }

  // Console errors, uncaught exceptions and error log entries seen so far.
  std::vector<std::string> errors() const {
    std::vector<std::string> out;
    for (const json& e : events_) {
      const std::string method = e.value("method", "");
      const json& p = e["params"];
      if (method == "Runtime.exceptionThrown") out.push_back(p.dump());
      if (method == "Runtime.consoleAPICalled" &&
          (p.value("type", "") == "error" || p.value("type", "") == "assert")) {
        out.push_back(p.dump());
      }
      if (method == "Log.entryAdded" && p["entry"].value("level", "") == "error") {
        out.push_back(p.dump());
      }
    }
    return out;
  }

 private:
  asio::io_context ioc_;
  beast::websocket::stream<tcp::socket> ws_;
  int next_id_ = 0;
  std::vector<json> events_;
};

std::string findChromium() {
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (fs::exists(path)) return path;
  }
  return {};
}

TEST_F(AdminE2eTest, DashboardShowsLiveNumbersInHeadlessChromiumWithoutErrors) {
  const std::string chromium = findChromium();
  // scripts/install-deps.sh installs it: a missing browser is a set-up fault, not a skip.
  ASSERT_FALSE(chromium.empty()) << "chromium is not installed (run scripts/install-deps.sh)";
  writeTicks("ticks.jsonl", 200000);
  const int port = startBus(sourceAssembly("feed", 300));
  ASSERT_NE(port, 0) << bus_.err();

  const fs::path profile = bus_.dir() / "chromium-profile";
  fs::create_directories(profile);
  fs::create_directories(bus_.dir() / "chromium");
  ChildProcess browser({chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--disable-dev-shm-usage", "--no-first-run", "--remote-debugging-port=0",
                        "--user-data-dir=" + profile.string(), "about:blank"},
                       bus_.dir() / "chromium");
  ASSERT_TRUE(browser.started());
  // Chromium writes the port it chose and the browser's path to this file.
  int devtools_port = 0;
  ASSERT_TRUE(eventually("Chromium's DevToolsActivePort", [&] {
    std::ifstream in(profile / "DevToolsActivePort");
    return static_cast<bool>(in >> devtools_port) && devtools_port > 0;
  })) << browser.err();
  std::string page_ws;
  ASSERT_TRUE(eventually("Chromium's page target", [&] {
    json targets = get(devtools_port, "/json/list").parsed();
    if (!targets.is_array()) return false;
    for (const json& t : targets) {
      if (t.value("type", "") == "page") page_ws = t.value("webSocketDebuggerUrl", "");
    }
    return !page_ws.empty();
  })) << browser.err();

  DevTools devtools(devtools_port, page_ws);
  devtools.call("Runtime.enable");
  devtools.call("Log.enable");
  devtools.call("Page.enable");
  devtools.call("Page.navigate", {{"url", "http://127.0.0.1:" + std::to_string(port) + "/"}});

  const std::string read_numbers =
      "window.cepbusDashboard ? JSON.stringify({polls: cepbusDashboard.polls,"
      " delivered: document.getElementById('total-delivered').textContent,"
      " stages: document.querySelectorAll('#stages tbody tr').length,"
      " queries: document.getElementById('queries').textContent,"
      " routes: document.getElementById('routes').textContent,"
      " journals: document.getElementById('journals').textContent,"
      " received: cepbusDashboard.received,"
      " events: document.querySelectorAll('#events li').length}) : ''";
  auto numbers = [&]() -> json {
    json text = devtools.evaluate(read_numbers);
    if (!text.is_string() || text.get<std::string>().empty()) return json();
    return json::parse(text.get<std::string>(), nullptr, false);
  };
  json first;
  ASSERT_TRUE(eventually("two dashboard polls",
                         [&] {
                           first = numbers();
                           return first.is_object() && first["polls"].get<int>() >= 2;
                         }))
      << "the dashboard never polled; console: " << ::testing::PrintToString(devtools.errors());
  EXPECT_THAT(first["queries"].get<std::string>(), HasSubstr("pairsnfaticks.all"));
  EXPECT_THAT(first["routes"].get<std::string>(), HasSubstr("ticks.#"));
  // The journal makes a reliable flow, listed with its numbers.
  EXPECT_THAT(first["journals"].get<std::string>(), HasSubstr("reliable"));
  EXPECT_GE(first["stages"].get<int>(), 1);
  // A query with a maximum delay of 5 and a source whose third event is 150
  // behind the newest ts: the dashboard shows its late count, flagged, and
  // its watermark (200 - 5), and "\u2014" before its first event.
  HttpResult added = addQuery(port,
                              "<query name=\"lagging\" engine=\"nfa\" input=\"lag.in\" "
                              "output=\"matches.lag\"><option name=\"max_delay\" value=\"5\"/>"
                              "<text>PATTERN Stock s RETURN Seen(s.price)</text></query>");
  ASSERT_EQ(added.status, 201) << added.body;
  // The cells of a query's row by column header, with whether it is flagged.
  auto queryRow = [&](const std::string& query) -> json {
    json text = devtools.evaluate(
        "(() => { const t = document.getElementById('queries');"
        " const heads = [...t.tHead.rows[0].cells].map((c) => c.textContent);"
        " const row = [...t.tBodies[0].rows].find((r) => r.cells[0].textContent === '" +
        query +
        "');"
        " if (!row) return '';"
        " const out = {flagged: row.classList.contains('late'),"
        " badge: row.querySelector('.badge.late') !== null};"
        " heads.forEach((h, i) => { out[h] = row.cells[i].textContent; });"
        " return JSON.stringify(out); })()");
    if (!text.is_string() || text.get<std::string>().empty()) return json();
    return json::parse(text.get<std::string>(), nullptr, false);
  };
  json lagging;
  EXPECT_TRUE(eventually("the new query on the dashboard, no watermark yet", [&] {
    lagging = queryRow("lagging");
    return lagging.is_object() && lagging.value("watermark", "") == "\u2014";
  })) << lagging;
  EXPECT_EQ(lagging.value("late", ""), "0") << lagging;
  EXPECT_FALSE(lagging.value("flagged", true)) << lagging;
  {
    std::ofstream out(bus_.dir() / "lag.jsonl");
    for (int ts : {100, 200, 50}) {
      out << R"({"type":"Stock","ts":)" << ts << R"(,"attrs":{"symbol":"IBM","price":1}})"
          << "\n";
    }
  }
  HttpResult lag_source = request(port, bhttp::verb::post, "/api/assemblies",
                                  R"(<service-assembly name="lag">
  <service-unit name="feed" type="replay-source">
    <param name="file" value="lag.jsonl"/><publish address="lag.in"/>
  </service-unit>
</service-assembly>)",
                                  kToken);
  ASSERT_EQ(lag_source.status, 201) << lag_source.body;
  EXPECT_TRUE(eventually("the late event on the dashboard", [&] {
    lagging = queryRow("lagging");
    return lagging.is_object() && lagging.value("late", "") == "1";
  })) << lagging;
  EXPECT_EQ(lagging.value("watermark", ""), "195") << lagging;
  EXPECT_TRUE(lagging.value("flagged", false)) << lagging;
  EXPECT_TRUE(lagging.value("badge", false)) << lagging;
  // The ticks come in ts order: none late, nothing flagged, a watermark.
  json pairs = queryRow("pairs");
  EXPECT_EQ(pairs.value("late", ""), "0") << pairs;
  EXPECT_FALSE(pairs.value("flagged", true)) << pairs;
  EXPECT_THAT(pairs.value("watermark", ""), ::testing::MatchesRegex("[0-9]+")) << pairs;

  json later;
  EXPECT_TRUE(eventually("the dashboard's delivered count to change",
                         [&] {
                           later = numbers();
                           return later.is_object() && later["delivered"] != first["delivered"];
                         }))
      << first << " then " << later;
  // Composite events arrive live over the WebSocket feed.
  EXPECT_TRUE(eventually("composite events on the WebSocket feed", [&] {
    later = numbers();
    return later.is_object() && later["received"].get<int>() > 0 && later["events"].get<int>() > 0;
  })) << later;
  // The net panel can be opened on the query (no model: a message, no error).
  devtools.evaluate(
      "[...document.querySelectorAll('#queries tbody tr')]"
      ".find((r) => r.cells[0].textContent === 'pairs').click()");
  EXPECT_TRUE(eventually("the net panel on core.cep/pairs", [&] {
    json title = devtools.evaluate("document.getElementById('net-title').textContent");
    return title.is_string() && title.get<std::string>() == "core.cep/pairs";
  }));
  // A few more dashboard polls, in which errors that must not come would
  // show: there is nothing to wait for.
  std::this_thread::sleep_for(std::chrono::seconds(2));
  devtools.evaluate("1");
  EXPECT_THAT(devtools.errors(), ::testing::IsEmpty());
  // The check itself sees a console error.
  devtools.evaluate("console.error('probe')");
  devtools.evaluate("1");
  EXPECT_EQ(devtools.errors().size(), 1u);
  browser.signal(SIGTERM);
  browser.wait(std::chrono::seconds(30));
}

}  // namespace
}  // namespace cepbus
