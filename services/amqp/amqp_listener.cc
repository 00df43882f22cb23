#include "services/amqp/amqp_listener.h"

#include <Poco/Logger.h>

#include <atomic>
#include <deque>
#include <exception>
#include <future>
#include <map>
#include <mutex>
#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/duration.hpp>
#include <proton/error_condition.hpp>
#include <proton/link.hpp>
#include <proton/listen_handler.hpp>
#include <proton/listener.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/source.hpp>
#include <proton/source_options.hpp>
#include <proton/target.hpp>
#include <proton/target_options.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>
#include <thread>
#include <utility>
#include <vector>

#include "flows/reliable_flow.h"
#include "flows/seda_flow.h"
#include "router/topic.h"
#include "services/amqp/message_mapping.h"

namespace cepbus::services::amqp {
namespace {

constexpr char kUnauthorized[] = "amqp:unauthorized-access";
constexpr char kInternalError[] = "amqp:internal-error";

// Shared with endpoint consumers, which may still run on a router thread for
// a moment after the service is gone (an in-flight straight-through delivery).
struct Counters {
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> published{0};
  std::atomic<uint64_t> accepted{0};
  std::atomic<uint64_t> released{0};
  std::atomic<uint64_t> malformed{0};
  std::atomic<uint64_t> credit_pauses{0};
  std::atomic<uint64_t> sent{0};
  std::atomic<uint64_t> acknowledged{0};
  std::atomic<uint64_t> not_acknowledged{0};
  std::atomic<uint64_t> buffer_full{0};
  std::atomic<uint64_t> paused_links{0};
  std::atomic<uint64_t> subscriber_links{0};
  std::atomic<int64_t> publish_credit{0};
};

// Collects the targets that refused or degraded one publish. Called during
// Broker::publish on the container thread for queueing flows' admission
// answers; later outcomes (a reliable flow's journal commit) come from other
// threads and are not needed, hence the lock and the `closed` flag.
class CongestionListener final : public flows::ExchangeListener {
 public:
  void onOutcome(const flows::Exchange&, const flows::Outcome& outcome) override {
    if (outcome.kind != flows::OutcomeKind::kRejected &&
        outcome.kind != flows::OutcomeKind::kDegraded) {
      return;
    }
    std::lock_guard lock(mu_);
    if (!closed_) targets_.emplace_back(outcome.target);
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mu_);
    closed_ = true;
    return std::move(targets_);
  }

 private:
  std::mutex mu_;
  bool closed_ = false;               // guarded by mu_
  std::vector<std::string> targets_;  // guarded by mu_
};

}  // namespace

// The events waiting for one subscribing link. offer() runs on router
// threads; everything else on the container thread. The work queue pointer
// is used only while `closed_` is false, and the link is closed (on the
// container thread) before its connection — and so the queue — goes away.
class Outbox {
 public:
  Outbox(AmqpListenerService::Impl* impl, uint64_t link, size_t capacity, proton::work_queue* queue,
         std::shared_ptr<Counters> counters)
      : impl_(impl),
        link_(link),
        capacity_(capacity),
        queue_(queue),
        counters_(std::move(counters)) {}

  Status offer(const EventPtr& event);
  // Up to `n` events, oldest first; re-arms the drain wake-up.
  std::vector<EventPtr> take(int n) {
    std::vector<EventPtr> out;
    std::lock_guard lock(mu_);
    drain_scheduled_ = false;
    while (n-- > 0 && !pending_.empty()) {
      out.push_back(std::move(pending_.front()));
      pending_.pop_front();
    }
    return out;
  }
  void close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    pending_.clear();
  }

 private:
  AmqpListenerService::Impl* const impl_;
  const uint64_t link_;
  const size_t capacity_;
  proton::work_queue* const queue_;
  const std::shared_ptr<Counters> counters_;
  std::mutex mu_;
  std::deque<EventPtr> pending_;  // guarded by mu_
  bool closed_ = false;           // guarded by mu_
  bool drain_scheduled_ = false;  // guarded by mu_
};

struct AmqpListenerService::Impl final : public proton::messaging_handler {
  struct Listen final : public proton::listen_handler {
    explicit Listen(Impl& impl) : impl_(impl) {}
    void on_close(proton::listener&) override { impl_.listener_open = false; }
    void on_open(proton::listener& l) override {
      impl_.listener_open = true;
      impl_.port.store(l.port(), std::memory_order_release);
      impl_.opened(Status::ok());
    }
    proton::connection_options on_accept(proton::listener&) override {
      proton::connection_options options;
      options.handler(impl_).sasl_enabled(true).sasl_allowed_mechs("ANONYMOUS");
      return options;
    }
    void on_error(proton::listener&, const std::string& what) override {
      impl_.opened(Status::ioError(impl_.config.where.toString() + ": <amqp> cannot listen on " +
                                   impl_.address() + ": " + what));
    }
    Impl& impl_;
  };

  struct PublisherLink {
    proton::receiver link;
    uint64_t connection = 0;
    Symbol address;
    bool paused = false;
    bool recheck_scheduled = false;
    int credit = 0;                      // as last counted into Counters::publish_credit
    std::vector<std::string> congested;  // targets whose stages refused or degraded
  };
  struct SubscriberLink {
    proton::sender link;
    uint64_t connection = 0;
    std::string endpoint;
    std::shared_ptr<Outbox> outbox;
  };

  Impl(descriptor::AmqpListener listener, AmqpListenerOptions opts, ServiceContext& ctx)
      : config(std::move(listener)), options(std::move(opts)), context(ctx), listen(*this) {}

  std::string address() const { return config.host + ":" + std::to_string(config.port); }

  void opened(Status status) {
    std::lock_guard lock(open_mu);
    if (open_reported) return;
    open_reported = true;
    open_promise.set_value(std::move(status));
  }

  // ---- container thread -------------------------------------------------

  void on_connection_open(proton::connection& c) override {
    if (shutting_down) {
      c.close(proton::error_condition("amqp:connection:forced", "the bus is shutting down"));
      return;
    }
    if (!config.allow_anonymous) {
      c.close(proton::error_condition(
          kUnauthorized,
          "this listener does not allow anonymous clients (allow-anonymous is "
          "false) and SASL PLAIN/TLS authentication is not implemented yet"));
      return;
    }
    connections[c] = ++next_id;
    counters->connections.fetch_add(1, std::memory_order_relaxed);
    c.open();
  }

  void on_receiver_open(proton::receiver& r) override {
    auto conn = connections.find(r.connection());
    if (conn == connections.end()) return;
    std::string addr = r.target().address();
    if (Status valid = router::validateAddress(addr); !valid) {
      r.close(proton::error_condition(kInvalidField,
                                      "target address \"" + addr + "\": " + valid.message() +
                                          " (publish to a topic; wildcards are for subscribing)"));
      return;
    }
    r.open(proton::receiver_options().credit_window(0).auto_accept(false).target(
        proton::target_options().address(addr)));
    uint64_t id = ++next_id;
    link_ids[r] = id;
    publishers[id] = PublisherLink{r, conn->second, Symbol::intern(addr), false, false, 0, {}};
    replenish(publishers[id]);
  }

  void on_sender_open(proton::sender& s) override {
    auto conn = connections.find(s.connection());
    if (conn == connections.end()) return;
    std::string pattern = s.source().address();
    if (Status valid = router::validatePattern(pattern); !valid) {
      s.close(proton::error_condition(kInvalidField,
                                      "source address \"" + pattern + "\": " + valid.message()));
      return;
    }
    uint64_t id = ++next_id;
    std::string endpoint = "amqp:" + std::to_string(conn->second) + "/" + s.name();
    auto outbox = std::make_shared<Outbox>(this, id, options.subscriber_buffer,
                                           &s.connection().work_queue(), counters);
    Status added = context.broker.addEndpoint(
        endpoint, [outbox](const flows::Exchange& ex) { return outbox->offer(ex.event); },
        options.name);
    if (!added) {
      outbox->close();
      s.close(proton::error_condition(
          added.code() == Status::Code::kAlreadyExists ? "amqp:resource-locked" : kInternalError,
          added.message()));
      return;
    }
    auto sub = context.broker.subscribe(endpoint, pattern);
    if (!sub) {
      outbox->close();
      context.broker.removeEndpoint(endpoint);
      s.close(proton::error_condition(kInvalidField, sub.status().message()));
      return;
    }
    s.open(proton::sender_options().source(proton::source_options().address(pattern)));
    link_ids[s] = id;
    subscribers[id] = SubscriberLink{s, conn->second, endpoint, outbox};
    counters->subscriber_links.fetch_add(1, std::memory_order_relaxed);
  }

  void on_sendable(proton::sender& s) override {
    auto it = link_ids.find(s);
    if (it != link_ids.end()) drain(it->second);
  }

  void on_tracker_accept(proton::tracker&) override {
    counters->acknowledged.fetch_add(1, std::memory_order_relaxed);
  }
  void on_tracker_reject(proton::tracker&) override {
    counters->not_acknowledged.fetch_add(1, std::memory_order_relaxed);
  }
  void on_tracker_release(proton::tracker&) override {
    counters->not_acknowledged.fetch_add(1, std::memory_order_relaxed);
  }

  void on_message(proton::delivery& d, proton::message& m) override {
    auto id = link_ids.find(d.receiver());
    auto link = id == link_ids.end() ? publishers.end() : publishers.find(id->second);
    const bool presettled = d.settled();
    if (link == publishers.end()) {
      if (!presettled) d.release();
      return;
    }
    PublisherLink& pub = link->second;
    MappedEvent mapped = eventFromMessage(m);
    if (!mapped.event) {
      counters->malformed.fetch_add(1, std::memory_order_relaxed);
      if (!presettled) {
        rejectWithCondition(d, proton::error_condition(mapped.condition, mapped.description));
      }
      replenish(pub);
      return;
    }

    flows::Exchange exchange;
    exchange.event = std::move(mapped.event);
    exchange.address = pub.address;
    std::shared_ptr<CongestionListener> congestion;
    if (!presettled) {
      exchange.qos = flows::Qos::kReliable;
      congestion = std::make_shared<CongestionListener>();
      exchange.listener = congestion;
    }
    flows::SendOutcome out = context.broker.publish(exchange);
    counters->published.fetch_add(1, std::memory_order_relaxed);
    std::vector<std::string> congested;
    if (congestion) congested = congestion->take();
    const bool refused = out.rejected > 0 || out.failed > 0 || (!out.status && out.targets == 0);
    if (!presettled) {
      if (refused) {
        d.release();
        counters->released.fetch_add(1, std::memory_order_relaxed);
      } else {
        d.accept();
        counters->accepted.fetch_add(1, std::memory_order_relaxed);
      }
    }
    if (refused || out.degraded > 0) pause(link->first, pub, std::move(congested));
    replenish(pub);
  }

  void on_receiver_close(proton::receiver& r) override { forgetLink(r); }
  void on_sender_close(proton::sender& s) override { forgetLink(s); }
  void on_connection_close(proton::connection& c) override { forgetConnection(c); }
  void on_transport_open(proton::transport&) override { ++transports; }
  void on_transport_close(proton::transport& t) override {
    forgetConnection(t.connection());
    if (transports > 0) --transports;
    // The container would wait for its scheduled work to time out as well;
    // once the last client is gone there is nothing left to wait for.
    if (shutting_down && transports == 0) container->stop();
  }
  // The default handler throws out of container::run(); a failing client must
  // not take the listener down. The close handlers above clean up.
  void on_error(const proton::error_condition&) override {}

  // Tops the link's credit up to a window unless it is paused, and keeps the
  // outstanding-credit count current (called after every change).
  void replenish(PublisherLink& pub) {
    const int window = static_cast<int>(options.credit_window);
    int credit = pub.link.active() ? pub.link.credit() : 0;
    if (!pub.paused && !shutting_down && !publishing_closed && pub.link.active() &&
        credit <= window / 2) {
      pub.link.add_credit(window - credit);
      credit = window;
    }
    countCredit(pub, credit);
  }

  void countCredit(PublisherLink& pub, int credit) {
    counters->publish_credit.fetch_add(credit - pub.credit, std::memory_order_relaxed);
    pub.credit = credit;
  }

  void pause(uint64_t id, PublisherLink& pub, std::vector<std::string> congested) {
    if (!pub.paused) {
      pub.paused = true;
      counters->credit_pauses.fetch_add(1, std::memory_order_relaxed);
      counters->paused_links.fetch_add(1, std::memory_order_relaxed);
    }
    for (auto& t : congested) pub.congested.push_back(std::move(t));
    scheduleRecheck(id, pub);
  }

  void scheduleRecheck(uint64_t id, PublisherLink& pub) {
    if (pub.recheck_scheduled) return;
    pub.recheck_scheduled = true;
    // The timer is the container's: a connection's own timed work outlives
    // the connection in Proton 0.37 and crashes when it fires after a close.
    // The recheck itself runs as the connection's work, so that the credit it
    // grants is written out at once.
    container->schedule(proton::duration(options.recheck_interval.count()), [this, id] {
      auto it = publishers.find(id);
      if (it == publishers.end()) return;
      it->second.link.connection().work_queue().add([this, id] { recheck(id); });
    });
  }

  void recheck(uint64_t id) {
    auto it = publishers.find(id);
    if (it == publishers.end()) return;
    PublisherLink& pub = it->second;
    pub.recheck_scheduled = false;
    if (!pub.paused) return;
    if (saturated(pub.congested)) {
      scheduleRecheck(id, pub);
      return;
    }
    pub.paused = false;
    pub.congested.clear();
    counters->paused_links.fetch_sub(1, std::memory_order_relaxed);
    replenish(pub);
  }

  // True while a stage of a queueing flow that serves one of `targets` is
  // saturated. With no target named (a straight-through target failed), one
  // recheck interval is the whole back-off.
  bool saturated(const std::vector<std::string>& targets) const {
    if (targets.empty()) return false;
    for (const auto& flow : context.broker.policy().flows()) {
      std::vector<stages::StageMetricsSnapshot> stages;
      if (auto* seda = dynamic_cast<const flows::SedaFlow*>(flow.get())) {
        stages = seda->stageMetrics();
      } else if (auto* reliable = dynamic_cast<const flows::ReliableFlow*>(flow.get())) {
        stages = reliable->stageMetrics();
      }
      for (const auto& stage : stages) {
        if (stage.pressure != stages::Pressure::kSaturated) continue;
        for (const auto& t : targets) {
          if (stage.name == flow->name() + "/" + t) return true;
        }
      }
    }
    return false;
  }

  void drain(uint64_t id) {
    auto it = subscribers.find(id);
    if (it == subscribers.end()) return;
    SubscriberLink& sub = it->second;
    if (!sub.link.active()) return;
    for (const EventPtr& event : sub.outbox->take(sub.link.credit())) {
      sub.link.send(messageFromEvent(*event));
      counters->sent.fetch_add(1, std::memory_order_relaxed);
    }
  }

  void forgetLink(const proton::link& l) {
    auto id = link_ids.find(l);
    if (id == link_ids.end()) return;
    uint64_t key = id->second;
    link_ids.erase(id);
    if (auto pub = publishers.find(key); pub != publishers.end()) {
      if (pub->second.paused) counters->paused_links.fetch_sub(1, std::memory_order_relaxed);
      countCredit(pub->second, 0);
      publishers.erase(pub);
    }
    if (auto sub = subscribers.find(key); sub != subscribers.end()) {
      closeSubscriber(sub->second);
      subscribers.erase(sub);
    }
  }

  void closeSubscriber(SubscriberLink& sub) {
    sub.outbox->close();
    context.broker.removeEndpoint(sub.endpoint);
    counters->subscriber_links.fetch_sub(1, std::memory_order_relaxed);
  }

  void forgetConnection(const proton::connection& c) {
    auto conn = connections.find(c);
    if (conn == connections.end()) return;
    const uint64_t number = conn->second;
    connections.erase(conn);
    std::vector<proton::link> links;
    for (const auto& [link, key] : link_ids) {
      auto pub = publishers.find(key);
      auto sub = subscribers.find(key);
      if ((pub != publishers.end() && pub->second.connection == number) ||
          (sub != subscribers.end() && sub->second.connection == number)) {
        links.push_back(link);
      }
    }
    for (const auto& l : links) forgetLink(l);
  }

  void shutdown() {
    shutting_down = true;
    if (listener_open) listener.stop();
    std::vector<proton::connection> open;
    for (const auto& [c, number] : connections) open.push_back(c);
    for (auto& c : open) {
      forgetConnection(c);
      c.close();
    }
    if (transports == 0) container->stop();
  }

  // ---- lifecycle thread -------------------------------------------------

  // After the container thread ended: what a closing that never happened left.
  void releaseAll() {
    for (auto& [id, sub] : subscribers) closeSubscriber(sub);
    subscribers.clear();
    for (auto& [id, pub] : publishers) countCredit(pub, 0);
    publishers.clear();
    link_ids.clear();
    connections.clear();
  }

  const descriptor::AmqpListener config;
  const AmqpListenerOptions options;
  ServiceContext& context;
  Listen listen;
  const std::shared_ptr<Counters> counters = std::make_shared<Counters>();
  std::atomic<int> port{0};

  std::mutex open_mu;
  bool open_reported = false;  // guarded by open_mu
  std::promise<Status> open_promise;
  std::promise<void> run_finished;

  std::unique_ptr<proton::container> container;
  std::thread thread;
  bool running = false;  // lifecycle thread

  // Container thread only (and the lifecycle thread once it has joined it).
  proton::listener listener;
  bool listener_open = false;  // the handle above is only valid while true
  bool shutting_down = false;
  // Set by deactivate(): publishers get no more credit (the bus is draining).
  bool publishing_closed = false;
  size_t transports = 0;  // open network connections, refused ones included
  uint64_t next_id = 0;
  std::map<proton::connection, uint64_t> connections;
  std::map<proton::link, uint64_t> link_ids;
  std::map<uint64_t, PublisherLink> publishers;
  std::map<uint64_t, SubscriberLink> subscribers;
};

Status Outbox::offer(const EventPtr& event) {
  std::lock_guard lock(mu_);
  if (closed_) return Status::unavailable("amqp subscriber link closed");
  if (pending_.size() >= capacity_) {
    counters_->buffer_full.fetch_add(1, std::memory_order_relaxed);
    return Status::unavailable("amqp subscriber is slow: its buffer of " +
                               std::to_string(capacity_) + " events is full");
  }
  pending_.push_back(event);
  if (!drain_scheduled_) {
    drain_scheduled_ = true;
    AmqpListenerService::Impl* impl = impl_;
    const uint64_t link = link_;
    if (!queue_->add([impl, link] { impl->drain(link); })) {
      drain_scheduled_ = false;
      pending_.pop_back();
      return Status::unavailable("amqp connection closing");
    }
  }
  return Status::ok();
}

AmqpListenerService::AmqpListenerService(descriptor::AmqpListener listener,
                                         AmqpListenerOptions options, ServiceContext& context)
    : impl_(std::make_unique<Impl>(std::move(listener), std::move(options), context)) {}

AmqpListenerService::~AmqpListenerService() { stop(); }

const std::string& AmqpListenerService::name() const { return impl_->options.name; }

Status AmqpListenerService::start() {
  Impl& impl = *impl_;
  if (impl.running) return Status::ok();
  if (impl.container) {
    return Status::unavailable(impl.options.name + ": a stopped listener cannot be restarted");
  }
  impl.container = std::make_unique<proton::container>(impl, impl.options.name);
  try {
    impl.listener = impl.container->listen(impl.address(), impl.listen);
  } catch (const std::exception& e) {
    impl.container.reset();
    return Status::invalidArgument(impl.config.where.toString() + ": <amqp> cannot listen on " +
                                   impl.address() + ": " + e.what());
  }
  std::future<Status> opened = impl.open_promise.get_future();
  impl.thread = std::thread([&impl] {
    try {
      impl.container->run();
    } catch (const std::exception& e) {
      impl.opened(Status::internal(impl.options.name + ": container failed: " + e.what()));
    }
    impl.run_finished.set_value();
  });
  Status status = opened.wait_for(impl.options.close_timeout * 5) == std::future_status::ready
                      ? opened.get()
                      : Status::timeout(impl.config.where.toString() + ": <amqp> listening on " +
                                        impl.address() + " did not complete");
  if (!status) {
    // Nothing was accepted; the container (stopping on its own when the
    // listener failed) is only told to finish, and joined.
    impl.container->stop();
    impl.thread.join();
    return status;
  }
  impl.running = true;
  Poco::Logger::get("cepbus.amqp")
      .information("AMQP 1.0 listening on amqp://%s:%d%s", impl.config.host, port(),
                   std::string(impl.config.allow_anonymous ? " (anonymous clients allowed)" : ""));
  return status;
}

void AmqpListenerService::deactivate() {
  Impl& impl = *impl_;
  if (!impl.running) return;
  // On the container thread, like every other use of the links: publishers
  // may still send what credit they hold, then wait; subscribers go on.
  impl.container->schedule(proton::duration(0), [&impl] { impl.publishing_closed = true; });
}

void AmqpListenerService::stop() {
  Impl& impl = *impl_;
  if (!impl.running) return;
  impl.running = false;
  std::future<void> finished = impl.run_finished.get_future();
  impl.container->schedule(proton::duration(0), [&impl] { impl.shutdown(); });
  if (finished.wait_for(impl.options.close_timeout) != std::future_status::ready) {
    impl.container->stop();
  }
  impl.thread.join();
  impl.releaseAll();
  impl.opened(Status::unavailable(impl.options.name + ": stopped"));
}

int AmqpListenerService::port() const { return impl_->port.load(std::memory_order_acquire); }

AmqpListenerStats AmqpListenerService::stats() const {
  const Counters& c = *impl_->counters;
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  AmqpListenerStats s;
  s.connections = get(c.connections);
  s.published = get(c.published);
  s.accepted = get(c.accepted);
  s.released = get(c.released);
  s.malformed = get(c.malformed);
  s.credit_pauses = get(c.credit_pauses);
  s.sent = get(c.sent);
  s.acknowledged = get(c.acknowledged);
  s.not_acknowledged = get(c.not_acknowledged);
  s.buffer_full = get(c.buffer_full);
  s.paused_links = get(c.paused_links);
  s.subscriber_links = get(c.subscriber_links);
  s.publish_credit = static_cast<uint64_t>(c.publish_credit.load(std::memory_order_relaxed));
  return s;
}

std::unique_ptr<Service> makeAmqpListener(const descriptor::AmqpListener& listener,
                                          ServiceContext& context) {
  AmqpListenerOptions options;
  options.name = "amqp-listener";
  return std::make_unique<AmqpListenerService>(listener, std::move(options), context);
}

}  // namespace cepbus::services::amqp
