#include "services/amqp/amqp_bridge.h"

#include <Poco/Logger.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/duration.hpp>
#include <proton/error_condition.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/ssl.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>
#include <thread>
#include <utility>

#include "flows/reliable_flow.h"
#include "router/topic.h"
#include "services/amqp/message_mapping.h"
#include "services/amqp/sasl_plugin.h"
#include "services/service_factory_registry.h"

namespace cepbus::services::amqp {
namespace {

// An event on its way out; `ack` is its reliable flow's when journaled.
struct OutEntry {
  EventPtr event;
  flows::DeferredAck ack;
  uint32_t delivery_count = 0;
};

}  // namespace

struct AmqpBridge::Impl final : public proton::messaging_handler {
  Impl(AmqpBridgeConfig c, ServiceContext& ctx) : config(std::move(c)), context(ctx) {}

  std::string endpoint() const { return config.name + ":out"; }

  // ---- router threads (out) ----------------------------------------------

  Status offer(const EventPtr& event) {
    std::lock_guard lock(mu);
    if (closed) return Status::unavailable(config.name + ": bridge stopped");
    if (pending.size() >= config.buffer) {
      return Status::rejected(config.name + ": " + std::to_string(config.buffer) +
                              " events already wait for the peer");
    }
    OutEntry entry{event, {}, 0};
    if (auto ack = flows::ReliableFlow::deferAcknowledgement()) {
      entry.delivery_count = ack->previousDeliveries();
      entry.ack = std::move(*ack);
    }
    pending.push_back(std::move(entry));
    wake();
    return Status::ok();
  }

  void wake() {  // with mu held
    if (drain_scheduled || queue == nullptr) return;
    drain_scheduled = queue->add([this] { drain(); });
  }

  // ---- container thread ----------------------------------------------------

  void on_container_start(proton::container&) override { connect(); }

  void connect() {
    if (stopping) return;
    proton::connection_options options;
    options.handler(*this);
    if (config.user.empty()) {
      options.sasl_allowed_mechs("ANONYMOUS");
    } else {
      options.user(config.user).password(config.password).sasl_allowed_mechs("PLAIN");
      options.sasl_allow_insecure_mechs(true);
    }
    if (config.url.rfind("amqps://", 0) == 0) {
      options.ssl_client_options(
          config.ca.empty() ? proton::ssl_client_options()
                            : proton::ssl_client_options(config.ca, proton::ssl::VERIFY_PEER_NAME));
    }
    container->connect(config.url, options);
  }

  void on_connection_open(proton::connection& c) override {
    connection = c;
    connects.fetch_add(1, std::memory_order_relaxed);
    is_connected.store(true, std::memory_order_relaxed);
    if (config.outgoing) {
      sender = c.open_sender(config.remote_address);
      std::lock_guard lock(mu);
      queue = &c.work_queue();
      drain_scheduled = false;
      wake();
    } else {
      receiver = c.open_receiver(
          config.remote_address,
          proton::receiver_options().credit_window(config.credit_window).auto_accept(false));
    }
    Poco::Logger::get("cepbus.amqp")
        .information("%s: connected to %s (%s %s)", config.name, config.url,
                     std::string(config.outgoing ? "out to" : "in from"), config.remote_address);
  }

  void on_sendable(proton::sender&) override { drain(); }

  void drain() {
    {
      std::lock_guard lock(mu);
      drain_scheduled = false;
    }
    if (!sender || !sender.active()) return;
    while (sender.credit() > 0) {
      OutEntry entry;
      {
        std::lock_guard lock(mu);
        if (pending.empty()) return;
        entry = std::move(pending.front());
        pending.pop_front();
      }
      proton::message m = messageFromEvent(*entry.event);
      if (entry.delivery_count > 0) {
        m.delivery_count(entry.delivery_count);
        m.first_acquirer(false);
        resent.fetch_add(1, std::memory_order_relaxed);
      }
      unsettled.emplace(sender.send(m), std::move(entry));
      sent.fetch_add(1, std::memory_order_relaxed);
    }
  }

  bool take(proton::tracker& t, OutEntry& out) {
    auto it = unsettled.find(t);
    if (it == unsettled.end()) return false;
    out = std::move(it->second);
    unsettled.erase(it);
    return true;
  }
  // The peer accepted it, or rejected it (final: it will not take it later).
  void on_tracker_accept(proton::tracker& t) override {
    OutEntry entry;
    if (!take(t, entry)) return;
    accepted.fetch_add(1, std::memory_order_relaxed);
    if (entry.ack) entry.ack(Status::ok());
  }
  void on_tracker_reject(proton::tracker& t) override {
    OutEntry entry;
    if (take(t, entry) && entry.ack) entry.ack(Status::ok());
  }
  void on_tracker_release(proton::tracker& t) override {
    OutEntry entry;
    if (!take(t, entry)) return;
    putBack({std::move(entry)});
    drain();
  }

  void putBack(std::vector<OutEntry> entries) {
    std::lock_guard lock(mu);
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
      ++it->delivery_count;
      pending.push_front(std::move(*it));
    }
  }

  void on_message(proton::delivery& d, proton::message& m) override {
    received.fetch_add(1, std::memory_order_relaxed);
    MappedEvent mapped = eventFromMessage(m);
    if (!mapped.event) {
      refused.fetch_add(1, std::memory_order_relaxed);
      d.reject();
      return;
    }
    flows::Exchange exchange;
    exchange.event = std::move(mapped.event);
    exchange.address = local_symbol;
    exchange.qos = flows::Qos::kReliable;
    flows::SendOutcome out = context.broker.publish(exchange);
    if (out.rejected > 0 || out.failed > 0 || (!out.status && out.targets == 0)) {
      refused.fetch_add(1, std::memory_order_relaxed);
      d.release();
    } else {
      published.fetch_add(1, std::memory_order_relaxed);
      d.accept();
    }
  }

  // Proton frees the connection after this: every handle goes now. What was
  // sent and not settled is sent again on the next connection.
  void on_transport_close(proton::transport&) override {
    is_connected.store(false, std::memory_order_relaxed);
    {
      std::lock_guard lock(mu);
      queue = nullptr;
    }
    std::vector<OutEntry> back;
    for (auto& [tracker, entry] : unsettled) back.push_back(std::move(entry));
    unsettled.clear();
    putBack(std::move(back));
    sender = proton::sender();
    receiver = proton::receiver();
    connection = proton::connection();
    if (stopping) return;
    container->schedule(proton::duration(config.reconnect_delay_ms), [this] { connect(); });
  }
  // Failures end in on_transport_close, which reconnects; nothing to throw.
  void on_error(const proton::error_condition&) override {}

  // Runs on the container thread at stop(): no reconnect, handles released.
  void shutdown() {
    stopping = true;
    std::vector<OutEntry> back;
    for (auto& [tracker, entry] : unsettled) back.push_back(std::move(entry));
    unsettled.clear();
    putBack(std::move(back));
    if (connection) connection.close();
    sender = proton::sender();
    receiver = proton::receiver();
    connection = proton::connection();
    {
      std::lock_guard lock(mu);
      queue = nullptr;
    }
    shut.set_value();
  }

  const AmqpBridgeConfig config;
  ServiceContext& context;
  const Symbol local_symbol = Symbol::intern(config.local_address);
  std::unique_ptr<proton::container> container;
  std::thread thread;
  bool running = false;  // lifecycle thread
  bool registered = false;
  std::promise<void> shut;

  std::mutex mu;
  std::deque<OutEntry> pending;         // guarded by mu
  proton::work_queue* queue = nullptr;  // guarded by mu; the open connection's
  bool drain_scheduled = false;         // guarded by mu
  bool closed = false;                  // guarded by mu

  // Container thread only.
  bool stopping = false;
  proton::connection connection;
  proton::sender sender;
  proton::receiver receiver;
  std::map<proton::tracker, OutEntry> unsettled;

  std::atomic<bool> is_connected{false};
  std::atomic<uint64_t> connects{0}, sent{0}, accepted{0}, resent{0}, received{0}, published{0},
      refused{0};
};

AmqpBridge::AmqpBridge(AmqpBridgeConfig config, ServiceContext& context)
    : impl_(std::make_unique<Impl>(std::move(config), context)) {}

AmqpBridge::~AmqpBridge() { stop(); }

const std::string& AmqpBridge::name() const { return impl_->config.name; }

Status AmqpBridge::start() {
  Impl& impl = *impl_;
  if (impl.running) return Status::ok();
  if (impl.container) return Status::unavailable(impl.config.name + ": cannot be restarted");
  if (impl.config.outgoing) {
    Impl* p = &impl;
    if (Status s = impl.context.broker.addEndpoint(
            impl.endpoint(), [p](const flows::Exchange& ex) { return p->offer(ex.event); },
            impl.config.name);
        !s) {
      return s;
    }
    impl.registered = true;
    if (auto sub = impl.context.broker.subscribe(impl.endpoint(), impl.config.local_address);
        !sub) {
      impl.context.broker.removeEndpoint(impl.endpoint());
      impl.registered = false;
      return sub.status();
    }
  }
  installSaslPlugin();
  impl.container = std::make_unique<proton::container>(impl, impl.config.name);
  impl.thread = std::thread([&impl] {
    try {
      impl.container->run();
    } catch (const std::exception& e) {
      Poco::Logger::get("cepbus.amqp")
          .error("%s: container failed: %s", impl.config.name, std::string(e.what()));
    }
  });
  impl.running = true;
  return Status::ok();
}

void AmqpBridge::stop() {
  Impl& impl = *impl_;
  if (!impl.running) return;
  impl.running = false;
  std::future<void> shut = impl.shut.get_future();
  impl.container->schedule(proton::duration(0), [&impl] { impl.shutdown(); });
  shut.wait_for(std::chrono::seconds(5));
  impl.container->stop();
  impl.thread.join();
  std::deque<OutEntry> left;
  {
    std::lock_guard lock(impl.mu);
    impl.closed = true;
    left.swap(impl.pending);
  }
  // Journaled events not delivered go back to their flows (kept journaled).
  for (auto& entry : left) {
    if (entry.ack) entry.ack(Status::unavailable(impl.config.name + ": bridge stopped"));
  }
  if (impl.registered) impl.context.broker.removeEndpoint(impl.endpoint());
  impl.registered = false;
}

bool AmqpBridge::connected() const { return impl_->is_connected.load(std::memory_order_relaxed); }

AmqpBridgeStats AmqpBridge::stats() const {
  const Impl& i = *impl_;
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  return AmqpBridgeStats{get(i.connects), get(i.sent),      get(i.accepted), get(i.resent),
                         get(i.received), get(i.published), get(i.refused)};
}

Result<std::unique_ptr<Service>> AmqpBridgeFactory::create(
    const descriptor::ServiceAssembly& assembly, const descriptor::ServiceUnit& unit,
    ServiceContext& context) const {
  auto fail = [&](const descriptor::Location& where, const std::string& what) {
    return Status::invalidArgument(
        where.error("amqp-bridge \"" + unit.name + "\": " + what).toString());
  };
  if (Status s = checkParamNames(unit, type(),
                                 {"url", "remote-address", "direction", "user", "password-env",
                                  "ca", "reconnect-delay-ms", "buffer"});
      !s) {
    return s;
  }
  AmqpBridgeConfig config;
  config.name = assembly.name + "." + unit.name;
  for (const char* required : {"url", "remote-address", "direction"}) {
    if (unit.param(required) == nullptr) {
      return fail(unit.where, "missing <param name=\"" + std::string(required) + "\">");
    }
  }
  config.url = unit.param("url")->value;
  config.remote_address = unit.param("remote-address")->value;
  const descriptor::Param* direction = unit.param("direction");
  if (direction->value != "in" && direction->value != "out") {
    return fail(direction->where, "direction must be in or out, got \"" + direction->value + "\"");
  }
  config.outgoing = direction->value == "out";
  if (config.outgoing) {
    if (unit.subscriptions.size() != 1 || !unit.publications.empty() || !unit.queries.empty()) {
      return fail(unit.where,
                  "direction out takes one <subscribe> (what goes out) and no <publish>");
    }
    config.local_address = unit.subscriptions[0].address;
    if (!unit.subscriptions[0].filter.empty()) {
      return fail(unit.subscriptions[0].filter_where, "filters are not supported on a bridge");
    }
  } else {
    if (unit.publications.size() != 1 || !unit.subscriptions.empty() || !unit.queries.empty()) {
      return fail(unit.where,
                  "direction in takes one <publish> (where events go) and no <subscribe>");
    }
    config.local_address = unit.publications[0].address;
  }
  if (const descriptor::Param* user = unit.param("user")) config.user = user->value;
  if (const descriptor::Param* env = unit.param("password-env")) {
    const char* password = std::getenv(env->value.c_str());
    if (password == nullptr) {
      return fail(env->where, "environment variable " + env->value + " is not set");
    }
    config.password = password;
  }
  if (!config.user.empty() && config.password.empty()) {
    return fail(unit.where,
                "a user needs <param name=\"password-env\"> (the password itself "
                "never goes into the descriptor)");
  }
  if (const descriptor::Param* ca = unit.param("ca")) {
    config.ca = assembly.resolvePath(ca->value).string();
  }
  auto delay = numberParam(unit, "reconnect-delay-ms", 1000, 1, 600000);
  if (!delay) return delay.status();
  config.reconnect_delay_ms = static_cast<int>(*delay);
  auto buffer = numberParam(unit, "buffer", 10000, 1, 10000000);
  if (!buffer) return buffer.status();
  config.buffer = static_cast<size_t>(*buffer);
  return std::unique_ptr<Service>(std::make_unique<AmqpBridge>(std::move(config), context));
}

}  // namespace cepbus::services::amqp
