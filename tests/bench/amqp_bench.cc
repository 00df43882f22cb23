// AMQP binding throughput: one Proton C++ client connection publishes N
// messages to the bus's AMQP listener and receives them back on a
// subscribing link (publish -> message mapping -> broker (StFlow) -> endpoint
// outbox -> container thread -> subscriber). Measured for pre-settled and
// for unsettled (accepted after admission) publishing.
//
//   amqp_bench [messages]     (default 100000)

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <proton/codec/map.hpp>
#include <proton/connection.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/delivery_mode.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/tracker.hpp>
#include <string>

#include "flows/st_flow.h"
#include "router/broker.h"
#include "router/delivery_policy.h"
#include "router/registry.h"
#include "services/amqp/amqp_listener.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace cepbus;

class Client final : public proton::messaging_handler {
 public:
  Client(std::string url, size_t n, bool presettled)
      : url_(std::move(url)), n_(n), presettled_(presettled) {}

  double seconds() const { return std::chrono::duration<double>(done_ - start_).count(); }
  size_t received() const { return received_; }

 private:
  void on_container_start(proton::container& c) override { c.connect(url_); }
  void on_connection_open(proton::connection& c) override {
    c.open_receiver("bench.#", proton::receiver_options().credit_window(1000));
  }
  void on_receiver_open(proton::receiver& r) override {
    proton::sender_options options;
    if (presettled_) options.delivery_mode(proton::delivery_mode::AT_MOST_ONCE);
    r.connection().open_sender("bench.ticks", options);
    start_ = Clock::now();
  }
  void on_sendable(proton::sender& s) override {
    while (s.credit() > 0 && sent_ < n_) {
      proton::message m;
      m.subject("Tick");
      m.properties().put("ts", static_cast<int64_t>(sent_));
      m.properties().put("symbol", std::string("IBM"));
      m.body(proton::value(std::map<std::string, proton::scalar>{{"price", 10.5}}));
      s.send(m);
      ++sent_;
    }
  }
  void on_message(proton::delivery& d, proton::message&) override {
    if (++received_ == n_) {
      done_ = Clock::now();
      d.connection().close();
    }
  }

  const std::string url_;
  const size_t n_;
  const bool presettled_;
  size_t sent_ = 0;
  size_t received_ = 0;
  Clock::time_point start_;
  Clock::time_point done_;
};

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 100000;
  for (bool presettled : {true, false}) {
    auto policy = std::make_unique<router::DeliveryPolicy>("st");
    if (!policy->addFlow(std::make_unique<flows::StFlow>("st"))) return 1;
    auto registry = std::make_shared<router::Registry>();
    router::Broker broker(std::move(policy), registry);
    if (!broker.start()) return 1;
    plugin::PluginLoader loader({});
    services::ServiceContext context{broker, *registry, loader};
    descriptor::AmqpListener config;
    config.port = 0;
    config.allow_anonymous = true;
    services::amqp::AmqpListenerService listener(config, {}, context);
    if (Status s = listener.start(); !s) {
      std::fprintf(stderr, "%s\n", s.toString().c_str());
      return 1;
    }
    Client client("127.0.0.1:" + std::to_string(listener.port()), n, presettled);
    proton::container(client).run();
    listener.stop();
    broker.stop();
    std::printf(
        "{\"bench\":\"amqp_publish_subscribe\",\"params\":{\"messages\":%zu,\"settle\":\"%s\"},"
        "\"events_per_s\":%.0f,\"received\":%zu}\n",
        n, presettled ? "presettled" : "unsettled", client.received() / client.seconds(),
        client.received());
  }
  return 0;
}
