#include "services/http/http_listener.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bus/core/event_json.h"
#include "services/http/http_listener_config.h"
#include "tests/services/http/test_broker.h"
#include "tests/testing/peak_rss.h"
#include "tests/testing/stats.h"
#include "tests/testing/wait.h"
#include "tests/testing/websocket_feed_client.h"

namespace cepbus::services::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = asio::ip::tcp;
using nlohmann::json;
using namespace std::chrono_literals;

using cepbus::testing::FeedClient;
using cepbus::testing::peakRssKb;
using cepbus::testing::statValue;
using cepbus::testing::waitUntil;

struct Reply {
  int status = 0;
  std::string content_type;
  std::string allow;
  std::string body;
};

// A small blocking HTTP client: one connection, any number of requests.
class Client {
 public:
  explicit Client(int port) : stream_(ioc_) {
    stream_.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  }

  Reply call(bhttp::verb method, std::string_view target, std::string body = {},
             std::string authorization = {}) {
    bhttp::request<bhttp::string_body> request(
        method, beast::string_view(target.data(), target.size()), 11);
    request.set(bhttp::field::host, "127.0.0.1");
    if (!authorization.empty()) request.set(bhttp::field::authorization, authorization);
    if (!body.empty()) request.body() = std::move(body);
    request.prepare_payload();
    bhttp::write(stream_, request);
    bhttp::response<bhttp::string_body> response;
    bhttp::read(stream_, buffer_, response);
    return Reply{static_cast<int>(response.result_int()),
                 std::string(response[bhttp::field::content_type]),
                 std::string(response[bhttp::field::allow]), response.body()};
  }
  Reply get(std::string_view target) { return call(bhttp::verb::get, target); }

 private:
  asio::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

// Sends raw bytes and reads everything until the server closes.
std::string rawExchange(int port, const std::string& bytes) {
  asio::io_context ioc;
  tcp::socket socket(ioc);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  asio::write(socket, asio::buffer(bytes));
  std::string out;
  beast::error_code ec;
  asio::read(socket, asio::dynamic_buffer(out), ec);
  EXPECT_EQ(ec, asio::error::eof) << ec.message();
  return out;
}

class HttpListenerTest : public ::testing::Test {
 protected:
  HttpListenerTest() {
    context_ =
        std::make_unique<ServiceContext>(ServiceContext{*bus_.broker, *bus_.registry, loader_});
  }
  ~HttpListenerTest() override {
    if (service_) service_->stop();
  }

  HttpListenerService& start(std::string token_env = {}, HttpListenerOptions options = {}) {
    services::http::HttpListenerConfig config;
    config.port = 0;
    config.token_env = std::move(token_env);
    service_ = std::make_unique<HttpListenerService>(config, options, *context_);
    Status started = service_->start();
    EXPECT_TRUE(started) << started.toString();
    EXPECT_GT(service_->port(), 0);
    return *service_;
  }

  TestBroker bus_;
  plugin::PluginLoader loader_{std::vector<std::string>{}};
  std::unique_ptr<ServiceContext> context_;
  std::unique_ptr<HttpListenerService> service_;
};

double sample(const std::string& metrics, const std::string& key) {
  std::istringstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(key + " ")) return std::stod(line.substr(key.size() + 1));
  }
  ADD_FAILURE() << "no sample " << key << " in\n" << metrics;
  return -1;
}

TEST_F(HttpListenerTest, ServesMetricsThatGrowAsEventsArePublished) {
  Recorder recorder(*bus_.broker, "rec", "stocks.#");
  Client client(start().port());
  const std::string key = "cepbus_component_delivered_total{name=\"rec\",kind=\"endpoint\"}";

  const Reply first = client.get("/metrics");
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(first.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(sample(first.body, key), 0);
  // Every sample's family was introduced by HELP and TYPE.
  std::set<std::string> helped, typed;
  std::istringstream in(first.body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("# HELP ")) helped.insert(line.substr(7, line.find(' ', 7) - 7));
    if (line.starts_with("# TYPE ")) typed.insert(line.substr(7, line.find(' ', 7) - 7));
    if (line.starts_with("#")) continue;
    const std::string family = line.substr(0, line.find_first_of("{ "));
    EXPECT_TRUE(helped.contains(family) && typed.contains(family)) << line;
  }
  EXPECT_EQ(helped, typed);

  for (int i = 0; i < 4; ++i) bus_.publish("stocks.ibm", i);
  const Reply second = client.get("/metrics");  // same connection: keep-alive
  EXPECT_EQ(sample(second.body, key), 4);
  EXPECT_EQ(sample(second.body, "cepbus_flow_sent_total{flow=\"st\"}"), 4);
}

TEST_F(HttpListenerTest, RestListsTheRegistrysComponents) {
  Recorder recorder(*bus_.broker, "rec", "stocks.#");
  Client client(start().port());
  const Reply reply = client.get("/api/components");
  ASSERT_EQ(reply.status, 200);
  EXPECT_EQ(reply.content_type, "application/json");
  std::set<std::string> names, expected;
  const json components = json::parse(reply.body).at("components");
  for (const json& c : components) names.insert(c.at("name"));
  for (const auto& c : bus_.registry->snapshot()) expected.insert(c.name);
  EXPECT_EQ(names, expected);
  EXPECT_TRUE(names.contains("rec"));

  const Reply one = client.get("/api/components/rec");
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(json::parse(one.body).at("kind"), "endpoint");
  EXPECT_EQ(json::parse(client.get("/api/routes").body).at("routes").size(), 2u);
  EXPECT_EQ(json::parse(client.get("/api/flows").body).at("flows").size(), 2u);
}

TEST_F(HttpListenerTest, UnknownPathsAndMethodsGetJsonErrors) {
  Client client(start().port());
  const Reply missing = client.get("/nothing/here");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.content_type, "application/json");
  EXPECT_FALSE(json::parse(missing.body).at("error").get<std::string>().empty());

  const Reply wrong = client.call(bhttp::verb::put, "/metrics", "x");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(wrong.allow, "GET");
  EXPECT_TRUE(json::parse(wrong.body).contains("error"));
  // The connection survived both errors.
  EXPECT_EQ(client.get("/api/flows").status, 200);
}

TEST_F(HttpListenerTest, MalformedRequestsGetAJsonErrorAndAClosedConnection) {
  const int port = start().port();
  const std::string garbage = rawExchange(port, "THIS IS NOT HTTP\r\n\r\n");
  EXPECT_TRUE(garbage.starts_with("HTTP/1.1 400")) << garbage;
  EXPECT_NE(garbage.find("{\"error\":\"malformed request"), std::string::npos) << garbage;

  const std::string huge_header =
      rawExchange(port, "GET /metrics HTTP/1.1\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n");
  EXPECT_TRUE(huge_header.starts_with("HTTP/1.1 431")) << huge_header.substr(0, 100);

  HttpListenerOptions small;
  EXPECT_GT(std::string(100 * 1024, 'b').size(), small.max_body_bytes);
  const std::string huge_body =
      rawExchange(port, "POST /api/events/a HTTP/1.1\r\nContent-Length: 102400\r\n\r\n" +
                            std::string(100 * 1024, 'b'));
  EXPECT_TRUE(huge_body.starts_with("HTTP/1.1 413")) << huge_body.substr(0, 100);

  // The listener carries on.
  EXPECT_EQ(Client(port).get("/metrics").status, 200);
}

TEST_F(HttpListenerTest, RefusesStateChangesWithoutAConfiguredToken) {
  Recorder recorder(*bus_.broker, "rec", "stocks.#");
  ::unsetenv("CEPBUS_HTTP_TEST_NO_TOKEN");
  Client client(start("CEPBUS_HTTP_TEST_NO_TOKEN").port());
  const Reply refused = client.call(bhttp::verb::post, "/api/events/stocks.ibm",
                                    R"({"type":"Stock","ts":1})", "Bearer guess");
  EXPECT_EQ(refused.status, 403);
  EXPECT_NE(refused.body.find("CEPBUS_HTTP_TEST_NO_TOKEN"), std::string::npos);
  EXPECT_TRUE(recorder.events().empty());
}

TEST_F(HttpListenerTest, PublishesWithTheTokenFromTheEnvironment) {
  Recorder recorder(*bus_.broker, "rec", "stocks.#");
  ::setenv("CEPBUS_HTTP_TEST_TOKEN", "t0ken", 1);
  Client client(start("CEPBUS_HTTP_TEST_TOKEN").port());
  const std::string event = R"({"type":"Stock","ts":9})";
  EXPECT_EQ(client.call(bhttp::verb::post, "/api/events/stocks.ibm", event).status, 401);
  EXPECT_EQ(client.call(bhttp::verb::post, "/api/events/stocks.ibm", event, "Bearer nope").status,
            401);
  EXPECT_TRUE(recorder.events().empty());
  EXPECT_EQ(client.call(bhttp::verb::post, "/api/events/stocks.ibm", event, "Bearer t0ken").status,
            200);
  ASSERT_EQ(recorder.events().size(), 1u);
  EXPECT_EQ(recorder.events()[0]->ts(), 9);
}

TEST_F(HttpListenerTest, WebSocketFeedSendsPublishedEventsInOrder) {
  const int port = start().port();
  const size_t endpoints_before = bus_.registry->size();
  FeedClient feed(port, "/ws?address=stocks.%23");
  // Subscribed before the handshake was answered.
  EXPECT_EQ(bus_.registry->size(), endpoints_before + 1);
  for (int i = 0; i < 50; ++i) bus_.publish(i % 2 ? "stocks.ibm" : "stocks.sap", i, i * 0.5);
  bus_.publish("bonds.x", 100);
  for (int i = 0; i < 50; ++i) {
    Result<EventPtr> event = decodeEvent(feed.read());
    ASSERT_TRUE(event) << event.status().toString();
    EXPECT_EQ((*event)->ts(), i);
  }
  feed.close();
  // Closing removes the endpoint and its subscription.
  EXPECT_TRUE(waitUntil([&] { return bus_.registry->size() == endpoints_before; }));
  EXPECT_EQ(bus_.publish("stocks.ibm", 200).targets, 0u);
}

TEST_F(HttpListenerTest, WebSocketFeedClosesOnATooSlowClient) {
  HttpListenerOptions options;
  options.ws_buffer = 4;
  const int port = start({}, options).port();
  const size_t endpoints_before = bus_.registry->size();
  FeedClient feed(port, "/ws?address=big");
  // The client reads nothing: once the socket buffers are full the feed's
  // buffer fills and a delivery is refused instead of blocking the flow.
  const std::string padding(16 * 1024, 'x');
  bool refused = false;
  for (int i = 0; i < 100000 && !refused; ++i) {
    flows::Exchange exchange;
    exchange.event = EventBuilder("Big").at(i).set("pad", Value(padding)).build();
    exchange.address = Symbol::intern("big");
    refused = bus_.broker->publish(exchange).failed > 0;
  }
  ASSERT_TRUE(refused);
  const websocket::close_reason reason = feed.readUntilClosed();
  EXPECT_EQ(reason.code, websocket::close_code::try_again_later);
  EXPECT_NE(std::string(reason.reason.c_str()).find("too slow"), std::string::npos);
  EXPECT_EQ(bus_.registry->size(), endpoints_before);  // unsubscribed before the close frame
}

TEST_F(HttpListenerTest, WebSocketFeedNeedsAValidPattern) {
  const int port = start().port();
  EXPECT_THROW(FeedClient(port, "/ws"), beast::system_error);
  EXPECT_THROW(FeedClient(port, "/ws?address=a..b"), beast::system_error);
  EXPECT_EQ(Client(port).get("/ws?address=a").status, 400);  // not an upgrade
}

// A client that opens connections and sends nothing: past max_connections
// each new one is answered 503 and closed at once, and a client is served
// again as soon as one of the idle connections goes.
TEST_F(HttpListenerTest, ConnectionsBeyondTheLimitGet503AndTheListenerServesAgainAfter) {
  HttpListenerOptions options;
  options.max_connections = 3;
  HttpListenerService& service = start({}, options);
  asio::io_context ioc;
  std::vector<tcp::socket> idle;
  for (int i = 0; i < 3; ++i) {
    idle.emplace_back(ioc).connect(
        tcp::endpoint(asio::ip::make_address("127.0.0.1"), service.port()));
  }
  ASSERT_TRUE(waitUntil([&] { return service.stats().open_connections == 3; }));
  for (int i = 0; i < 2000; ++i) {
    const std::string refused = rawExchange(service.port(), "");
    ASSERT_NE(refused.find("HTTP/1.1 503"), std::string::npos) << refused;
    ASSERT_NE(refused.find("max-connections=3"), std::string::npos) << refused;
  }
  EXPECT_EQ(service.stats().connections_refused, 2000u);
  EXPECT_EQ(service.stats().open_connections, 3u);
  idle.pop_back();
  ASSERT_TRUE(waitUntil([&] { return service.stats().open_connections == 2; }));
  // Operators see the refusals: in the listener's component (numbers, not
  // strings) and in /metrics, both counting this client's own connection.
  Client client(service.port());
  const Reply entry = client.get("/api/components/http");
  ASSERT_EQ(entry.status, 200);
  const json parsed = json::parse(entry.body);
  EXPECT_EQ(parsed.at("kind"), "service");
  EXPECT_EQ(parsed.at("metadata").at("type"), "http-listener");
  const json& stats = parsed.at("stats");
  EXPECT_EQ(stats.at("connections_refused"), 2000);
  EXPECT_EQ(stats.at("connections"), 2004);
  EXPECT_EQ(stats.at("open_connections"), 3);
  const Reply metrics = client.get("/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_EQ(sample(metrics.body, "cepbus_http_connections_refused_total{name=\"http\"}"), 2000);
  EXPECT_EQ(sample(metrics.body, "cepbus_http_open_connections{name=\"http\"}"), 3);
  std::cout << "{\"hostile_client\":\"2000 HTTP connections\",\"peak_rss_kb\":" << peakRssKb()
            << "}\n";
}

// Feeds beyond max_ws_clients are refused (503) before anything subscribes;
// one closing makes room.
TEST_F(HttpListenerTest, WebSocketClientsBeyondTheLimitGet503) {
  HttpListenerOptions options;
  options.max_ws_clients = 2;
  HttpListenerService& service = start({}, options);
  const size_t endpoints_before = bus_.registry->size();
  auto first = std::make_unique<FeedClient>(service.port(), "/ws?address=a");
  FeedClient second(service.port(), "/ws?address=a");
  EXPECT_THROW(FeedClient(service.port(), "/ws?address=a"), beast::system_error);
  const std::string refused = rawExchange(
      service.port(),
      "GET /ws?address=a HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
      "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
  EXPECT_NE(refused.find("HTTP/1.1 503"), std::string::npos) << refused;
  EXPECT_NE(refused.find("max-ws-clients=2"), std::string::npos) << refused;
  EXPECT_EQ(service.stats().ws_refused, 2u);
  EXPECT_EQ(service.stats().ws_clients, 2u);
  EXPECT_EQ(bus_.registry->size(), endpoints_before + 2);
  const stats::Labels http = {{"name", "http"}};
  EXPECT_EQ(statValue(bus_.registry->stats(), kHttpSchema.component, http, "ws_refused"), 2);
  EXPECT_EQ(statValue(bus_.registry->stats(), kHttpSchema.component, http, "ws_clients"), 2);
  first->close();
  first.reset();
  ASSERT_TRUE(waitUntil([&] { return service.stats().ws_clients == 1; }));
  FeedClient third(service.port(), "/ws?address=a");
  bus_.publish("a", 7);
  Result<EventPtr> event = decodeEvent(third.read());
  ASSERT_TRUE(event) << event.status().toString();
  EXPECT_EQ((*event)->ts(), 7);
}

// A slow body: the header and part of the body, then nothing. The request
// is answered 408 at request_timeout and the connection closed, while
// another client is served meanwhile.
TEST_F(HttpListenerTest, ARequestNotReadWithinTheTimeoutGets408) {
  HttpListenerOptions options;
  options.request_timeout = 300ms;
  HttpListenerService& service = start({}, options);
  asio::io_context ioc;
  tcp::socket slow(ioc);
  slow.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), service.port()));
  asio::write(slow, asio::buffer(std::string("POST /api/events/a HTTP/1.1\r\nHost: x\r\n"
                                             "Content-Length: 1000\r\n\r\n{\"type\":")));
  EXPECT_EQ(Client(service.port()).get("/metrics").status, 200);
  std::string out;
  beast::error_code ec;
  asio::read(slow, asio::dynamic_buffer(out), ec);
  EXPECT_EQ(ec, asio::error::eof) << ec.message();
  EXPECT_NE(out.find("HTTP/1.1 408"), std::string::npos) << out;
  EXPECT_NE(out.find("request-timeout=300 ms"), std::string::npos) << out;
  EXPECT_EQ(service.stats().request_timeouts, 1u);
  const Reply entry = Client(service.port()).get("/api/components/http");
  ASSERT_EQ(entry.status, 200);
  EXPECT_EQ(json::parse(entry.body).at("stats").at("request_timeouts"), 1);
}

TEST_F(HttpListenerTest, StopClosesFeedsAndRefusesRestart) {
  HttpListenerService& service = start();
  const size_t endpoints_before = bus_.registry->size();
  FeedClient feed(service.port(), "/ws?address=stocks.%23");
  EXPECT_EQ(bus_.registry->size(), endpoints_before + 1);
  ASSERT_TRUE(bus_.registry->find("http"));
  service.stop();
  // The feed's endpoint and the listener's own entry are gone.
  EXPECT_EQ(bus_.registry->size(), endpoints_before - 1);
  EXPECT_FALSE(bus_.registry->find("http"));
  EXPECT_FALSE(service.start());
}

// The bus's listener (makeHttpListener) reports as "http-listener", the
// name the operations guide gives, while it runs.
TEST_F(HttpListenerTest, TheBussListenerHasTheRegistryEntryHttpListener) {
  services::http::HttpListenerConfig config;
  config.port = 0;
  const std::unique_ptr<Service> service = makeHttpListener(config, *context_);
  ASSERT_TRUE(service->start());
  const std::optional<router::ComponentSnapshot> entry = bus_.registry->snapshotOf("http-listener");
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->kind, router::ComponentKind::kService);
  EXPECT_EQ(entry->state, router::ComponentState::kStarted);
  const std::map<std::string, std::string> metadata(entry->metadata.begin(), entry->metadata.end());
  EXPECT_EQ(metadata.at("type"), "http-listener");
  // Its numbers are the scope "http" {name="http-listener"}: every family.
  const std::vector<stats::ScopeSnapshot> scopes =
      bus_.registry->stats().scopes(kHttpSchema.component);
  ASSERT_EQ(scopes.size(), 1u);
  EXPECT_EQ(scopes[0].labels, (stats::Labels{{"name", "http-listener"}}));
  EXPECT_EQ(scopes[0].metrics.size(), std::size(http_stats::kAll));
  service->stop();
  EXPECT_FALSE(bus_.registry->find("http-listener"));
}

TEST_F(HttpListenerTest, NamesTheDescriptorLocationWhenItCannotListen) {
  const int taken = start().port();
  services::http::HttpListenerConfig config;
  config.port = static_cast<uint16_t>(taken);
  config.where = descriptor::Location{"bus.xml", 7};
  HttpListenerService second(config, {}, *context_);
  const Status started = second.start();
  EXPECT_FALSE(started);
  EXPECT_NE(started.message().find("bus.xml:7"), std::string::npos) << started.toString();
  EXPECT_NE(started.message().find(std::to_string(taken)), std::string::npos);
  EXPECT_EQ(second.port(), 0);
}

}  // namespace
}  // namespace cepbus::services::http
