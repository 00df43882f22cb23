// services/http: the cost of a scrape and of the live feed.
//
//   http_bench [--seconds S]
//
// - metrics_render: renderMetrics() over a registry of C components (100,
//   1,000), repeated for S seconds (default 1); scrapes_per_s.
// - metrics_http: GET /metrics over one keep-alive connection to the listener
//   (same registries); scrapes_per_s.
// - ws_feed: events published straight-through to one WebSocket feed client
//   reading on its own thread; events_per_s from the first publish to the
//   last frame read.

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "bus/core/event.h"
#include "flows/st_flow.h"
#include "router/broker.h"
#include "router/delivery_policy.h"
#include "router/registry.h"
#include "services/http/http_listener.h"
#include "services/http/http_listener_config.h"
#include "services/http/prometheus.h"

namespace {

using namespace cepbus;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Bus {
  Bus() {
    auto policy = std::make_unique<router::DeliveryPolicy>("st");
    mustOk(policy->addFlow(std::make_unique<flows::StFlow>("st", registry->stats())));
    broker = std::make_unique<router::Broker>(std::move(policy), registry);
    mustOk(broker->start());
  }
  // A bus that cannot be set up measures nothing: stop.
  static void mustOk(const Status& s) {
    if (!s) {
      std::fprintf(stderr, "bench set-up: %s\n", s.toString().c_str());
      std::exit(1);
    }
  }
  ~Bus() { broker->stop(); }
  std::shared_ptr<router::Registry> registry = std::make_shared<router::Registry>();
  std::unique_ptr<router::Broker> broker;
};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

void report(const char* bench, int components, double per_s, size_t bytes) {
  std::printf(
      "{\"bench\":\"%s\",\"params\":{\"components\":%d},\"scrapes_per_s\":%.1f,"
      "\"bytes\":%zu}\n",
      bench, components, per_s, bytes);
}

}  // namespace

int main(int argc, char** argv) {
  double run_s = 1;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--seconds") == 0) run_s = std::stod(argv[++i]);
  }
  for (int components : {100, 1000}) {
    Bus bus;
    for (int i = 0; i < components; ++i) {
      auto entry = bus.registry->add("component-" + std::to_string(i),
                                     router::ComponentKind::kEndpoint, "bench");
      (*entry)->addDelivered(static_cast<uint64_t>(i) * 1000);
    }
    size_t bytes = 0;
    long scrapes = 0;
    auto start = Clock::now();
    while (seconds(Clock::now() - start) < run_s) {
      bytes = services::http::renderMetrics(*bus.registry).size();
      ++scrapes;
    }
    report("metrics_render", components, scrapes / seconds(Clock::now() - start), bytes);

    plugin::PluginLoader loader{std::vector<std::string>{}};
    services::ServiceContext context{*bus.broker, *bus.registry, loader};
    services::http::HttpListenerConfig config;
    config.port = 0;
    services::http::HttpListenerService service(config, {}, context);
    if (!service.start()) return 1;
    asio::io_context ioc;
    beast::tcp_stream stream(ioc);
    stream.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), service.port()));
    beast::flat_buffer buffer;
    scrapes = 0;
    start = Clock::now();
    while (seconds(Clock::now() - start) < run_s) {
      bhttp::request<bhttp::empty_body> request(bhttp::verb::get, "/metrics", 11);
      bhttp::write(stream, request);
      bhttp::response<bhttp::string_body> response;
      bhttp::read(stream, buffer, response);
      bytes = response.body().size();
      ++scrapes;
    }
    report("metrics_http", components, scrapes / seconds(Clock::now() - start), bytes);
  }

  // The feed: buffer large enough that the reader never falls behind by more.
  constexpr int kEvents = 200000;
  Bus bus;
  plugin::PluginLoader loader{std::vector<std::string>{}};
  services::ServiceContext context{*bus.broker, *bus.registry, loader};
  services::http::HttpListenerConfig config;
  config.port = 0;
  services::http::HttpListenerOptions options;
  options.ws_buffer = kEvents;
  services::http::HttpListenerService service(config, options, context);
  if (!service.start()) return 1;
  asio::io_context ioc;
  websocket::stream<tcp::socket> ws(ioc);
  ws.next_layer().connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), service.port()));
  ws.handshake("127.0.0.1", "/ws?address=stocks.%23");
  std::vector<EventPtr> events;
  for (int i = 0; i < kEvents; ++i) {
    events.push_back(EventBuilder("Stock").at(i).set("price", Value(i * 0.5)).build());
  }
  const Symbol address = Symbol::intern("stocks.ibm");
  const auto start = Clock::now();
  std::thread reader([&] {
    beast::flat_buffer frame;
    for (int i = 0; i < kEvents; ++i) {
      ws.read(frame);
      frame.consume(frame.size());
    }
  });
  int refused = 0;
  for (const EventPtr& event : events) {
    flows::Exchange exchange;
    exchange.event = event;
    exchange.address = address;
    refused += bus.broker->publish(exchange).failed;
  }
  if (refused > 0) {
    // Cannot happen with the buffer sized to the run; the reader would wait forever.
    std::fprintf(stderr, "ws_feed: %d deliveries refused\n", refused);
    std::_Exit(1);
  }
  reader.join();
  const double elapsed = seconds(Clock::now() - start);
  std::printf(
      "{\"bench\":\"ws_feed\",\"params\":{\"events\":%d},\"events_per_s\":%.1f,"
      "\"refused\":%d}\n",
      kEvents, kEvents / elapsed, refused);
  return 0;
}
