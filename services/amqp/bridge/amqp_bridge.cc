#include "services/amqp/bridge/amqp_bridge.h"

#include <Poco/Logger.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <future>
#include <map>
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
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/host/descriptor/file_checks.h"
#include "flows/delivery_context.h"
#include "router/registry.h"
#include "router/topic.h"
#include "services/protocols/amqp/client_options.h"
#include "services/protocols/amqp/message_mapping.h"
#include "services/protocols/amqp/sasl_plugin.h"
#include "services/service_factory_registry.h"

namespace cepbus::services::amqp {
namespace {

// An event on its way out; `ack` is its reliable flow's when journaled.
struct OutEntry {
  EventPtr event;
  flows::DeferredAck ack;
  uint32_t delivery_count = 0;
};

// The bridge's numbers (scope "amqp_bridge" {name}); shared with the
// registry's probe, which may still run for a moment after stop() removed
// the entry.
struct Counters {
  explicit Counters(stats::ScopePtr bridge_scope)
      : scope(std::move(bridge_scope)),
        connects(scope->counter(amqp_bridge_stats::kConnects)),
        errors(scope->counter(amqp_bridge_stats::kErrors)),
        waiting(scope->gauge(amqp_bridge_stats::kWaiting)),
        rejected(scope->counter(amqp_bridge_stats::kRejected)),
        dropped(scope->counter(amqp_bridge_stats::kDropped)),
        sent(scope->counter(amqp_bridge_stats::kSent)),
        accepted(scope->counter(amqp_bridge_stats::kAccepted)),
        resent(scope->counter(amqp_bridge_stats::kResent)),
        received(scope->counter(amqp_bridge_stats::kReceived)),
        published(scope->counter(amqp_bridge_stats::kPublished)),
        refused(scope->counter(amqp_bridge_stats::kRefused)) {}

  AmqpBridgeStats stats() const {
    return AmqpBridgeStats{
        connects.value(),  errors.value(),  static_cast<uint64_t>(waiting.value()),
        rejected.value(),  dropped.value(), sent.value(),
        accepted.value(),  resent.value(),  received.value(),
        published.value(), refused.value()};
  }

  const stats::ScopePtr scope;
  stats::Counter& connects;
  stats::Counter& errors;
  stats::Gauge& waiting;
  stats::Counter& rejected;
  stats::Counter& dropped;
  stats::Counter& sent;
  stats::Counter& accepted;
  stats::Counter& resent;
  stats::Counter& received;
  stats::Counter& published;
  stats::Counter& refused;
};

std::string describe(const proton::error_condition& e) {
  return describeCondition(e, "closed by the peer");
}

}  // namespace

struct AmqpBridge::Impl final : public proton::messaging_handler {
  Impl(AmqpBridgeConfig c, ServiceContext& ctx) : config(std::move(c)), context(ctx) {}

  std::string endpoint() const { return config.name + ":out"; }

  // ---- router threads (out) ----------------------------------------------

  Status offer(const EventPtr& event, flows::DeliveryContext& context) {
    MutexLock lock(mu);
    if (closed) return Status::unavailable(config.name + ": bridge stopped");
    if (counters->waiting.value() >= static_cast<int64_t>(config.buffer)) {
      return Status::rejected(config.name + ": " + std::to_string(config.buffer) +
                              " events already wait for the peer " + config.url);
    }
    counters->waiting.inc();
    OutEntry entry{event, context.deferAcknowledgement(), 0};
    entry.delivery_count = entry.ack.previousDeliveries();
    pending.push_back(std::move(entry));
    wake();
    return Status::ok();
  }

  void wake() REQUIRES(mu) {
    if (drain_scheduled || queue == nullptr) return;
    drain_scheduled = queue->add([this] { drain(); });
  }

  // ---- container thread ----------------------------------------------------

  void on_container_start(proton::container&) override { connect(); }

  void connect() {
    if (stopping) return;
    attempt_failed = false;
    proton::connection_options options = connectionOptions(peer());
    options.handler(*this);
    container->connect(config.url, options);
  }

  AmqpPeer peer() const {
    return AmqpPeer{config.url, config.user, config.password, config.ca, config.peer_name};
  }

  void on_connection_open(proton::connection& c) override {
    connection = c;
    counters->connects.inc();
    if (config.outgoing) {
      sender = c.open_sender(config.remote_address);
      MutexLock lock(mu);
      queue = &c.work_queue();
      drain_scheduled = false;
      wake();
    } else {
      receiver = c.open_receiver(config.remote_address,
                                 proton::receiver_options()
                                     .credit_window(static_cast<int>(config.credit_window))
                                     .auto_accept(false));
    }
  }

  // The bridge works once the peer keeps its link: a peer that refuses a
  // link attaches it and detaches it at once, so the first credit (out) or
  // an attach with no error yet (in) is the sign, checked once a connection.
  void on_receiver_open(proton::receiver& r) override {
    if (!r.error()) attached();
  }
  void attached() {
    if (link_up) return;
    link_up = true;
    is_connected.store(true, std::memory_order_relaxed);
    logged_error.clear();
    if (entry) entry->setState(router::ComponentState::kStarted);
    Poco::Logger::get("cepbus.amqp")
        .information("%s: connected to %s (%s %s)", config.name, config.url,
                     std::string(config.outgoing ? "out to" : "in from"), config.remote_address);
  }

  void on_sendable(proton::sender&) override {
    attached();
    drain();
  }

  void drain() {
    {
      MutexLock lock(mu);
      drain_scheduled = false;
    }
    if (!sender || !sender.active()) return;
    while (sender.credit() > 0) {
      OutEntry entry;
      {
        MutexLock lock(mu);
        if (pending.empty()) return;
        entry = std::move(pending.front());
        pending.pop_front();
      }
      proton::message& m = outgoing;
      messageFromEvent(*entry.event, m);
      if (entry.delivery_count > 0) {
        m.delivery_count(entry.delivery_count);
        m.first_acquirer(false);
        counters->resent.inc();
      }
      unsettled.emplace(sender.send(m), std::move(entry));
      counters->sent.inc();
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
    counters->waiting.dec();
    counters->accepted.inc();
    if (entry.ack) entry.ack(Status::ok());
  }
  void on_tracker_reject(proton::tracker& t) override {
    OutEntry entry;
    if (!take(t, entry)) return;
    counters->waiting.dec();
    counters->rejected.inc();
    warnOnce("the peer rejected an event of type " + std::string(entry.event->type().name()) +
             ": " + describe(remoteCondition(t)));
    if (entry.ack) entry.ack(Status::ok());
  }
  void on_tracker_release(proton::tracker& t) override {
    OutEntry entry;
    if (!take(t, entry)) return;
    putBack({std::move(entry)});
    drain();
  }

  void putBack(std::vector<OutEntry> entries) {
    MutexLock lock(mu);
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
      ++it->delivery_count;
      pending.push_front(std::move(*it));
    }
  }

  void on_message(proton::delivery& d, proton::message& m) override {
    counters->received.inc();
    MappedEvent mapped = eventFromMessage(m);
    if (!mapped.event) {
      counters->refused.inc();
      d.reject();
      return;
    }
    flows::Exchange exchange;
    exchange.event = std::move(mapped.event);
    exchange.address = local_symbol;
    exchange.qos = flows::Qos::kReliable;
    flows::SendOutcome out = context.broker.publish(exchange);
    if (out.rejected > 0 || out.failed > 0 || (!out.status && out.targets == 0)) {
      counters->refused.inc();
      d.release();
    } else {
      counters->published.inc();
      d.accept();
    }
  }

  // Proton frees the connection after this: every handle goes now. What was
  // sent and not settled is sent again on the next connection.
  void on_transport_close(proton::transport&) override {
    // A peer that closed without an error still leaves the bridge unattached.
    if (!attempt_failed) fail(proton::error_condition());
    is_connected.store(false, std::memory_order_relaxed);
    link_up = false;
    {
      MutexLock lock(mu);
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
  // Every failure ends in on_transport_close, which reconnects: these say
  // why. A refused or closed link closes the connection so that the next
  // attempt attaches it again (the peer's permissions may have changed).
  void on_transport_error(proton::transport& t) override { fail(t.error()); }
  void on_connection_error(proton::connection& c) override { fail(c.error()); }
  void on_sender_close(proton::sender& s) override { linkClosed(s.error(), "sending"); }
  void on_receiver_close(proton::receiver& r) override { linkClosed(r.error(), "receiving"); }
  void on_sender_error(proton::sender&) override {}      // reported by on_sender_close
  void on_receiver_error(proton::receiver&) override {}  // reported by on_receiver_close
  void on_error(const proton::error_condition& e) override { fail(e); }

  void linkClosed(const proton::error_condition& e, const char* role) {
    if (stopping) return;
    fail(e,
         std::string("the peer closed the ") + role + " link to " + config.remote_address + ": ");
    if (connection) connection.close();
  }
  // One failed attempt counts once, whatever number of events Proton gives it.
  void fail(const proton::error_condition& e, const std::string& context = {}) {
    if (stopping) return;
    const std::string what = context + describe(e);
    if (!attempt_failed) counters->errors.inc();
    attempt_failed = true;
    if (entry) entry->setState(router::ComponentState::kFailed, config.url + ": " + what);
    warnOnce(what);
  }
  // A peer that stays away, or keeps refusing, would log the same line every
  // reconnect delay: it is logged again only once the link was attached.
  void warnOnce(const std::string& what) {
    if (what == logged_error) return;
    logged_error = what;
    Poco::Logger::get("cepbus.amqp")
        .warning("%s: %s (%s %s): %s", config.name, config.url,
                 std::string(config.outgoing ? "out to" : "in from"), config.remote_address, what);
  }

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
      MutexLock lock(mu);
      queue = nullptr;
    }
    shut.set_value();
    // Stopped here, on the container's own thread, as the listener does:
    // Proton 0.37 can lose the wake of a stop() called from another thread
    // while the container winds down the connection just closed, and the
    // join in AmqpBridge::stop() would then wait for ever.
    container->stop();
  }

  // The registry entry: its live numbers read from the counters.
  void report() {
    auto added = context.registry.add(config.name, router::ComponentKind::kService);
    if (!added) {
      Poco::Logger::get("cepbus.amqp")
          .warning("%s: no registry entry: %s", config.name, added.status().message());
      return;
    }
    entry = *added;
    entry->setMetadata("type", "amqp-bridge");
    entry->setMetadata("url", config.url);
    entry->setMetadata("direction", config.outgoing ? "out" : "in");
    entry->setMetadata("remote-address", config.remote_address);
    entry->setProbe([shared = counters](router::LiveNumbers& numbers) {
      const AmqpBridgeStats s = shared->stats();
      numbers.delivered = s.accepted + s.published;
      numbers.rejected = s.rejected + s.refused;
      numbers.failed = s.errors;
      numbers.queue_length = s.waiting;
    });
    entry->setState(router::ComponentState::kRegistered);
  }

  const AmqpBridgeConfig config;
  ServiceContext& context;
  const std::shared_ptr<Counters> counters = std::make_shared<Counters>(
      context.registry.stats().scope(kAmqpBridgeSchema, {{"name", config.name}}));
  std::shared_ptr<router::ComponentEntry> entry;  // set before the container thread starts
  const Symbol local_symbol = Symbol::intern(config.local_address);
  std::unique_ptr<proton::container> container;
  std::thread thread;
  bool running = false;  // lifecycle thread
  bool registered = false;
  std::promise<void> shut;

  Mutex mu;
  std::deque<OutEntry> pending GUARDED_BY(mu);
  proton::work_queue* queue GUARDED_BY(mu) = nullptr;  // the open connection's
  bool drain_scheduled GUARDED_BY(mu) = false;
  bool closed GUARDED_BY(mu) = false;

  // Container thread only.
  bool stopping = false;
  bool attempt_failed = false;  // the current connection attempt has failed
  bool link_up = false;         // the peer kept the current connection's link
  std::string logged_error;     // the last warning, not repeated until a link is attached
  proton::connection connection;
  proton::sender sender;
  proton::receiver receiver;
  std::map<proton::tracker, OutEntry> unsettled;
  proton::message outgoing;  // reused for every event sent (its allocations stay)

  std::atomic<bool> is_connected{false};
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
            impl.endpoint(),
            [p](const flows::Exchange& ex, flows::DeliveryContext& context) {
              return p->offer(ex.event, context);
            },
            impl.config.name);
        !s) {
      return s;
    }
    impl.registered = true;
    if (auto sub = impl.context.broker.subscribe(impl.endpoint(), impl.config.local_address);
        !sub) {
      (void)impl.context.broker.removeEndpoint(impl.endpoint());  // undoing; sub's error is the one
      impl.registered = false;
      return sub.status();
    }
  }
  impl.report();
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
  if (shut.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    impl.container->stop();  // shutdown() never ran: the container thread is stuck
  }
  impl.thread.join();
  std::deque<OutEntry> left;
  {
    MutexLock lock(impl.mu);
    impl.closed = true;
    left.swap(impl.pending);
  }
  // Journaled events not delivered go back to their flows (kept journaled);
  // the others are lost with the bridge, and said so.
  uint64_t dropped = 0;
  for (auto& entry : left) {
    if (entry.ack) {
      entry.ack(Status::unavailable(impl.config.name + ": bridge stopped"));
    } else {
      ++dropped;
    }
  }
  impl.counters->waiting.sub(static_cast<int64_t>(left.size()));
  impl.counters->dropped.add(dropped);
  if (dropped > 0) {
    Poco::Logger::get("cepbus.amqp")
        .warning("%s: stopped with %s events (not journaled) never delivered to %s",
                 impl.config.name, std::to_string(dropped), impl.config.url);
  }
  // Stopping: there is nothing to do about an endpoint already gone.
  if (impl.registered) (void)impl.context.broker.removeEndpoint(impl.endpoint());
  impl.registered = false;
  if (impl.entry) {
    impl.entry->setState(router::ComponentState::kStopped);
    impl.context.registry.remove(impl.config.name);
    impl.entry.reset();
  }
}

bool AmqpBridge::connected() const { return impl_->is_connected.load(std::memory_order_relaxed); }

AmqpBridgeStats AmqpBridge::stats() const { return impl_->counters->stats(); }

Result<std::unique_ptr<Service>> AmqpBridgeFactory::create(
    const descriptor::ServiceAssembly& assembly, const descriptor::ServiceUnit& unit,
    ServiceContext& context) const {
  auto fail = [&](const descriptor::Location& where, const std::string& what) {
    return Status::invalidArgument(
        where.error("amqp-bridge \"" + unit.name + "\": " + what).toString());
  };
  if (Status s = checkParamNames(unit, type(),
                                 {"url", "remote-address", "direction", "user", "password-env",
                                  "ca", "peer-name", "reconnect-delay-ms", "buffer"});
      !s) {
    return s;
  }
  AmqpBridgeConfig config;
  config.name = assembly.name + "." + unit.name;
  for (const char* required : {"url", "remote-address", "direction"}) {
    if (auto p = requiredParam(unit, type(), required); !p) return p.status();
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
  if (Status s = checkPeer(AmqpPeer{config.url, config.user, config.password, "", ""}); !s) {
    return fail(unit.param("url")->where, s.message());
  }
  if (const descriptor::Param* ca = unit.param("ca")) {
    config.ca = assembly.resolvePath(ca->value).string();
    if (auto why = descriptor::unreadableFile(config.ca)) return fail(ca->where, "ca: " + *why);
  }
  if (const descriptor::Param* peer = unit.param("peer-name")) config.peer_name = peer->value;
  auto delay = numberParam(unit, "reconnect-delay-ms", 1000, 1, 600000);
  if (!delay) return delay.status();
  config.reconnect_delay_ms = static_cast<int>(*delay);
  auto buffer = numberParam(unit, "buffer", 10000, 1, 10000000);
  if (!buffer) return buffer.status();
  config.buffer = static_cast<size_t>(*buffer);
  return std::unique_ptr<Service>(std::make_unique<AmqpBridge>(std::move(config), context));
}

}  // namespace cepbus::services::amqp
