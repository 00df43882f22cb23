#include "services/amqp/amqp_listener.h"

#include <Poco/Logger.h>

#include <atomic>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <optional>
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
#include <proton/sasl.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/source.hpp>
#include <proton/source_options.hpp>
#include <proton/ssl.hpp>
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
#include "services/amqp/access_control.h"
#include "services/amqp/message_mapping.h"
#include "services/amqp/sasl_plugin.h"

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
  std::atomic<uint64_t> redelivered{0};
  std::atomic<uint64_t> parked_subscriptions{0};
  std::atomic<uint64_t> parked_overflow{0};
  std::atomic<uint64_t> awaiting_commit{0};
};

// A connection's work queue for other threads, valid until close() (called
// on the container thread before the connection goes away).
class Waker {
 public:
  explicit Waker(proton::work_queue* queue) : queue_(queue) {}
  bool add(std::function<void()> fn) {
    std::lock_guard lock(mu_);
    return queue_ != nullptr && queue_->add(std::move(fn));
  }
  void close() {
    std::lock_guard lock(mu_);
    queue_ = nullptr;
  }

 private:
  std::mutex mu_;
  proton::work_queue* queue_;  // guarded by mu_
};

// Hears the outcomes of one unsettled publish. During Broker::publish (on the
// container thread) it collects the targets that refused or degraded it; on
// a reliable route it then waits for the journal commits (kAccepted, from the
// journal thread) of the targets that journaled it and settles the message
// once all are in — or releases it when a commit failed (a late kRejected).
class PublishListener final : public flows::ExchangeListener {
 public:
  // `settle(accepted)` runs once, on whichever thread completes the count.
  using Settle = std::function<void(bool accepted)>;

  void onOutcome(const flows::Exchange&, const flows::Outcome& outcome) override {
    Settle settle;
    bool accepted = false;
    {
      std::lock_guard lock(mu_);
      if (outcome.kind == flows::OutcomeKind::kAccepted) ++accepted_;
      if (outcome.kind == flows::OutcomeKind::kRejected) ++rejected_;
      if (!published_ && (outcome.kind == flows::OutcomeKind::kRejected ||
                          outcome.kind == flows::OutcomeKind::kDegraded)) {
        targets_.emplace_back(outcome.target);
      }
      settle = due(accepted);
    }
    if (settle) settle(accepted);
  }
  // After Broker::publish returned: the congested targets so far.
  std::vector<std::string> published() {
    std::lock_guard lock(mu_);
    published_ = true;
    sync_rejected_ = rejected_;
    return std::move(targets_);
  }
  // Settles once `commits` kAccepted outcomes (or late rejections) came in.
  void awaitCommits(uint32_t commits, Settle settle) {
    bool accepted = false;
    {
      std::lock_guard lock(mu_);
      expected_ = commits;
      settle_ = std::move(settle);
      settle = due(accepted);
    }
    if (settle) settle(accepted);
  }

 private:
  Settle due(bool& accepted) {
    if (!settle_) return nullptr;
    const uint32_t late_rejected = rejected_ - sync_rejected_;
    if (accepted_ + late_rejected < expected_) return nullptr;
    accepted = late_rejected == 0;
    return std::exchange(settle_, nullptr);
  }

  std::mutex mu_;
  bool published_ = false;            // guarded by mu_
  uint32_t accepted_ = 0;             // guarded by mu_
  uint32_t rejected_ = 0;             // guarded by mu_
  uint32_t sync_rejected_ = 0;        // guarded by mu_
  uint32_t expected_ = 0;             // guarded by mu_
  Settle settle_;                     // guarded by mu_
  std::vector<std::string> targets_;  // guarded by mu_
};

// One event waiting for (or sent to) a subscriber. `ack` is the reliable
// flow's acknowledgement when the event came journaled.
struct OutboxEntry {
  EventPtr event;
  flows::DeferredAck ack;       // empty for a best-effort event
  uint32_t delivery_count = 0;  // earlier deliveries; > 0 marks a redelivery
};

}  // namespace

// The events waiting for one subscription. offer() runs on router threads;
// everything else on the container thread. While a link is bound, new
// events wake the container through its connection's Waker; a durable
// subscription whose subscriber is away stays unbound and keeps collecting
// up to its capacity.
class Outbox {
 public:
  Outbox(AmqpListenerService::Impl* impl, size_t capacity, std::shared_ptr<Counters> counters)
      : impl_(impl), capacity_(capacity), counters_(std::move(counters)) {}

  Status offer(const EventPtr& event);
  // Up to `n` entries, oldest first; re-arms the drain wake-up.
  std::vector<OutboxEntry> take(int n) {
    std::vector<OutboxEntry> out;
    std::lock_guard lock(mu_);
    drain_scheduled_ = false;
    while (n-- > 0 && !pending_.empty()) {
      out.push_back(std::move(pending_.front()));
      pending_.pop_front();
    }
    return out;
  }
  // Puts back, in front, entries sent but not settled (their subscriber went
  // away), each counted as one more delivery.
  void putBack(std::vector<OutboxEntry> entries) {
    std::lock_guard lock(mu_);
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
      ++it->delivery_count;
      pending_.push_front(std::move(*it));
    }
  }
  void bind(std::shared_ptr<Waker> waker, uint64_t link) {
    std::lock_guard lock(mu_);
    waker_ = std::move(waker);
    link_ = link;
    drain_scheduled_ = false;
    wake();
  }
  void unbind() {
    std::lock_guard lock(mu_);
    waker_.reset();
  }
  // No more offers; returns what was waiting (to give back acknowledgements).
  std::deque<OutboxEntry> close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    waker_.reset();
    return std::move(pending_);
  }

 private:
  void wake();  // with mu_ held

  AmqpListenerService::Impl* const impl_;
  const size_t capacity_;
  const std::shared_ptr<Counters> counters_;
  std::mutex mu_;
  std::deque<OutboxEntry> pending_;  // guarded by mu_
  std::shared_ptr<Waker> waker_;     // guarded by mu_; null while no link is bound
  uint64_t link_ = 0;                // guarded by mu_
  bool closed_ = false;              // guarded by mu_
  bool drain_scheduled_ = false;     // guarded by mu_
};

struct AmqpListenerService::Impl final : public proton::messaging_handler {
  struct Listen final : public proton::listen_handler {
    explicit Listen(Impl& impl) : impl_(impl) {}
    void on_close(proton::listener&) override { impl_.listener_open = false; }
    void on_open(proton::listener& l) override {
      impl_.listener_open = true;
      impl_.port.store(l.port(), std::memory_order_release);
      registerSaslListener(l.port(), impl_.access);
      impl_.opened(Status::ok());
    }
    proton::connection_options on_accept(proton::listener&) override {
      proton::connection_options options;
      // The mechanisms offered are the SASL plugin's choice (sasl_plugin.h).
      options.handler(impl_).sasl_enabled(true);
      if (impl_.tls) options.ssl_server_options(*impl_.tls);
      return options;
    }
    void on_error(proton::listener&, const std::string& what) override {
      impl_.opened(Status::ioError(impl_.config.where.toString() + ": <amqp> cannot listen on " +
                                   impl_.address() + ": " + what));
    }
    Impl& impl_;
  };

  struct ConnectionInfo {
    uint64_t id = 0;
    std::string user;          // empty for the anonymous client
    std::string container_id;  // the client's
    std::shared_ptr<Waker> waker;
  };
  struct PublisherLink {
    proton::receiver link;
    uint64_t connection = 0;
    Symbol address;
    bool paused = false;
    bool recheck_scheduled = false;
    int credit = 0;                      // as last counted into Counters::publish_credit
    std::vector<std::string> congested;  // targets whose stages refused or degraded
    // Unsettled messages whose journal commits are awaited (reliable routes).
    std::map<uint64_t, proton::delivery> awaiting;
    uint64_t next_awaiting = 0;
  };
  struct SubscriberLink {
    proton::sender link;
    uint64_t connection = 0;
    std::string endpoint;
    std::string pattern;
    bool durable = false;
    std::shared_ptr<Outbox> outbox;
    std::map<proton::tracker, OutboxEntry> unsettled;  // sent, not yet settled by the subscriber
  };
  // A durable subscription whose subscriber is away: its endpoint stays
  // subscribed and its outbox keeps collecting (bounded).
  struct ParkedSubscription {
    std::string pattern;
    std::shared_ptr<Outbox> outbox;
  };

  Impl(descriptor::AmqpListener listener, AmqpListenerOptions opts, ServiceContext& ctx)
      : config(std::move(listener)),
        options(std::move(opts)),
        context(ctx),
        access(std::make_shared<const AccessControl>(config)),
        listen(*this) {}

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
    // SASL has already succeeded (the plugin refuses what AccessControl
    // refuses); this only tells the anonymous client from a user.
    const std::string mech = c.transport().sasl().mech();
    ConnectionInfo info;
    if (mech == "ANONYMOUS" && access->allowsAnonymous()) {
      info.user.clear();
    } else if (mech == "PLAIN" && !c.user().empty()) {
      info.user = c.user();
    } else {
      c.close(proton::error_condition(
          kUnauthorized, "authenticate with SASL PLAIN" +
                             std::string(access->allowsAnonymous() ? " or ANONYMOUS" : "") +
                             " (got " + (mech.empty() ? std::string("none") : mech) + ")"));
      return;
    }
    info.id = ++next_id;
    info.container_id = c.container_id();
    info.waker = std::make_shared<Waker>(&c.work_queue());
    connections[c] = std::move(info);
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
    if (!access->mayPublish(conn->second.user, addr)) {
      r.close(proton::error_condition(
          kUnauthorized, "user \"" + conn->second.user + "\" may not publish to \"" + addr + "\""));
      return;
    }
    r.open(proton::receiver_options().credit_window(0).auto_accept(false).target(
        proton::target_options().address(addr)));
    uint64_t id = ++next_id;
    link_ids[r] = id;
    publishers[id] =
        PublisherLink{r, conn->second.id, Symbol::intern(addr), false, false, 0, {}, {}, 0};
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
    if (!access->maySubscribe(conn->second.user, pattern)) {
      s.close(proton::error_condition(
          kUnauthorized,
          "user \"" + conn->second.user + "\" may not subscribe to \"" + pattern + "\""));
      return;
    }
    // Named by the client's container id and the link name, so that a
    // subscriber coming back finds what was kept for it: the reliable
    // flows' unacknowledged deliveries, or its durable subscription.
    const std::string endpoint = "amqp:" + conn->second.container_id + "/" + s.name();
    const bool durable = s.source().durability_mode() != proton::source::NONDURABLE;
    const uint64_t id = ++next_id;
    std::shared_ptr<Outbox> outbox;
    if (auto parked = parked_subscriptions.find(endpoint); parked != parked_subscriptions.end()) {
      if (parked->second.pattern == pattern && durable) {
        outbox = parked->second.outbox;
      } else {
        // Subscribed differently (or no longer durable): a new subscription.
        dropOutbox(*parked->second.outbox);
        context.broker.removeEndpoint(endpoint);
      }
      parked_subscriptions.erase(parked);
      counters->parked_subscriptions.fetch_sub(1, std::memory_order_relaxed);
    }
    if (!outbox) {
      outbox = std::make_shared<Outbox>(this, options.subscriber_buffer, counters);
      outbox->bind(conn->second.waker, id);
      Status added = context.broker.addEndpoint(
          endpoint, [outbox](const flows::Exchange& ex) { return outbox->offer(ex.event); },
          options.name);
      if (!added) {
        dropOutbox(*outbox);
        s.close(proton::error_condition(
            added.code() == Status::Code::kAlreadyExists ? "amqp:resource-locked" : kInternalError,
            added.code() == Status::Code::kAlreadyExists
                ? "link \"" + s.name() + "\" of container \"" + conn->second.container_id +
                      "\" is already attached"
                : added.message()));
        return;
      }
      auto sub = context.broker.subscribe(endpoint, pattern);
      if (!sub) {
        dropOutbox(*outbox);
        context.broker.removeEndpoint(endpoint);
        s.close(proton::error_condition(kInvalidField, sub.status().message()));
        return;
      }
    } else {
      outbox->bind(conn->second.waker, id);
    }
    proton::source_options source;
    source.address(pattern);
    if (durable) {
      source.durability_mode(s.source().durability_mode()).expiry_policy(proton::source::NEVER);
    }
    s.open(proton::sender_options().source(source));
    link_ids[s] = id;
    subscribers[id] = SubscriberLink{s, conn->second.id, endpoint, pattern, durable, outbox, {}};
    counters->subscriber_links.fetch_add(1, std::memory_order_relaxed);
  }

  void on_sendable(proton::sender& s) override {
    auto it = link_ids.find(s);
    if (it != link_ids.end()) drain(it->second);
  }

  // A subscriber's accept acknowledges a journaled delivery to its reliable
  // flow. A reject is final too (the subscriber says the message is invalid;
  // it is counted, not redelivered). Released or modified: a journaled
  // delivery goes back to its flow, which redelivers it; a best-effort one
  // is offered again at the front of the subscription.
  void on_tracker_accept(proton::tracker& t) override {
    counters->acknowledged.fetch_add(1, std::memory_order_relaxed);
    OutboxEntry entry;
    if (settled(t, entry) && entry.ack) entry.ack(Status::ok());
  }
  void on_tracker_reject(proton::tracker& t) override {
    counters->not_acknowledged.fetch_add(1, std::memory_order_relaxed);
    OutboxEntry entry;
    if (settled(t, entry) && entry.ack) entry.ack(Status::ok());
  }
  void on_tracker_release(proton::tracker& t) override {
    counters->not_acknowledged.fetch_add(1, std::memory_order_relaxed);
    OutboxEntry entry;
    if (!settled(t, entry)) return;
    if (entry.ack) {
      entry.ack(Status::unavailable("the AMQP subscriber released it"));
      return;
    }
    auto id = link_ids.find(t.sender());
    auto sub = id == link_ids.end() ? subscribers.end() : subscribers.find(id->second);
    if (sub == subscribers.end()) return;
    std::vector<OutboxEntry> back;
    back.push_back(std::move(entry));
    sub->second.outbox->putBack(std::move(back));
    drain(sub->first);
  }

  // The entry of a delivery the subscriber just settled; nullopt if unknown.
  bool settled(proton::tracker& t, OutboxEntry& out) {
    auto id = link_ids.find(t.sender());
    if (id == link_ids.end()) return false;
    auto sub = subscribers.find(id->second);
    if (sub == subscribers.end()) return false;
    auto entry = sub->second.unsettled.find(t);
    if (entry == sub->second.unsettled.end()) return false;
    out = std::move(entry->second);
    sub->second.unsettled.erase(entry);
    return true;
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
    std::shared_ptr<PublishListener> listener;
    if (!presettled) {
      exchange.qos = flows::Qos::kReliable;
      listener = std::make_shared<PublishListener>();
      exchange.listener = listener;
    }
    const bool journaling = !presettled && journaled(pub.address);
    flows::SendOutcome out = context.broker.publish(exchange);
    counters->published.fetch_add(1, std::memory_order_relaxed);
    std::vector<std::string> congested;
    if (listener) congested = listener->published();
    const bool refused = out.rejected > 0 || out.failed > 0 || (!out.status && out.targets == 0);
    if (!presettled) {
      const uint32_t commits = journaling ? out.queued - out.degraded + out.duplicates : 0;
      if (refused) {
        d.release();
        counters->released.fetch_add(1, std::memory_order_relaxed);
      } else if (commits > 0) {
        awaitCommits(link->first, pub, d, *listener, commits);
      } else {
        d.accept();
        counters->accepted.fetch_add(1, std::memory_order_relaxed);
      }
    }
    if (refused || out.degraded > 0) pause(link->first, pub, std::move(congested));
    replenish(pub);
  }

  void on_receiver_close(proton::receiver& r) override { forgetLink(r, false); }
  void on_sender_close(proton::sender& s) override { forgetLink(s, false); }
  // A detach (not a close) keeps a durable subscription.
  void on_sender_detach(proton::sender& s) override { forgetLink(s, true); }

  // True when an unsettled (reliable) publish to `address` is journaled by a
  // reliable flow: its accept then waits for the journal commit.
  bool journaled(Symbol address) const {
    auto decision = context.broker.policy().decide(address.name(), flows::Qos::kReliable);
    return decision && decision->qos == flows::Qos::kReliable &&
           dynamic_cast<const flows::ReliableFlow*>(decision->flow) != nullptr;
  }

  void awaitCommits(uint64_t link, PublisherLink& pub, proton::delivery& d,
                    PublishListener& listener, uint32_t commits) {
    const uint64_t key = ++pub.next_awaiting;
    pub.awaiting.emplace(key, d);
    counters->awaiting_commit.fetch_add(1, std::memory_order_relaxed);
    auto conn = connections.find(pub.link.connection());
    std::shared_ptr<Waker> waker = conn == connections.end() ? nullptr : conn->second.waker;
    listener.awaitCommits(commits, [this, waker, link, key](bool accepted) {
      // From the journal thread (or this one): settle on the container thread.
      if (waker) waker->add([this, link, key, accepted] { settleCommitted(link, key, accepted); });
    });
  }

  void settleCommitted(uint64_t link, uint64_t key, bool accepted) {
    auto pub = publishers.find(link);
    if (pub == publishers.end()) return;
    auto it = pub->second.awaiting.find(key);
    if (it == pub->second.awaiting.end()) return;
    if (accepted) {
      it->second.accept();
      counters->accepted.fetch_add(1, std::memory_order_relaxed);
    } else {
      it->second.release();
      counters->released.fetch_add(1, std::memory_order_relaxed);
    }
    pub->second.awaiting.erase(it);
    counters->awaiting_commit.fetch_sub(1, std::memory_order_relaxed);
  }
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
    for (OutboxEntry& entry : sub.outbox->take(sub.link.credit())) {
      proton::message m = messageFromEvent(*entry.event);
      if (entry.delivery_count > 0) {
        m.delivery_count(entry.delivery_count);
        m.first_acquirer(false);
        counters->redelivered.fetch_add(1, std::memory_order_relaxed);
      } else {
        m.first_acquirer(true);
      }
      proton::tracker t = sub.link.send(m);
      sub.unsettled.emplace(t, std::move(entry));
      counters->sent.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // `detached`: the link went away without being closed (a detach, or its
  // connection ended), which keeps a durable subscription.
  void forgetLink(const proton::link& l, bool detached) {
    auto id = link_ids.find(l);
    if (id == link_ids.end()) return;
    uint64_t key = id->second;
    link_ids.erase(id);
    if (auto pub = publishers.find(key); pub != publishers.end()) {
      if (pub->second.paused) counters->paused_links.fetch_sub(1, std::memory_order_relaxed);
      countCredit(pub->second, 0);
      // Unsettled messages still waiting for a commit: the client resends them.
      counters->awaiting_commit.fetch_sub(pub->second.awaiting.size(), std::memory_order_relaxed);
      publishers.erase(pub);
    }
    if (auto sub = subscribers.find(key); sub != subscribers.end()) {
      closeSubscriber(sub->second, detached && sub->second.durable && !shutting_down);
      subscribers.erase(sub);
    }
  }

  // What the subscriber had not settled goes back: journaled deliveries to
  // their flows (which redeliver them, now or when this endpoint comes
  // back), best-effort ones into a kept outbox.
  void closeSubscriber(SubscriberLink& sub, bool keep) {
    counters->subscriber_links.fetch_sub(1, std::memory_order_relaxed);
    std::vector<OutboxEntry> unsettled;
    for (auto& [tracker, entry] : sub.unsettled) unsettled.push_back(std::move(entry));
    sub.unsettled.clear();
    if (keep) {
      sub.outbox->unbind();
      std::vector<OutboxEntry> back;
      for (auto& entry : unsettled) {
        if (entry.ack) {
          entry.ack(Status::unavailable("the AMQP subscriber went away"));
        } else {
          back.push_back(std::move(entry));
        }
      }
      sub.outbox->putBack(std::move(back));
      parked_subscriptions[sub.endpoint] = ParkedSubscription{sub.pattern, sub.outbox};
      counters->parked_subscriptions.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    for (auto& entry : unsettled) {
      if (entry.ack) entry.ack(Status::unavailable("the AMQP subscriber went away"));
    }
    dropOutbox(*sub.outbox);
    context.broker.removeEndpoint(sub.endpoint);
  }

  // Closes an outbox and gives back the acknowledgements it held.
  void dropOutbox(Outbox& outbox) {
    for (auto& entry : outbox.close()) {
      if (entry.ack) entry.ack(Status::unavailable("the AMQP subscription ended"));
    }
  }

  void forgetConnection(const proton::connection& c) {
    auto conn = connections.find(c);
    if (conn == connections.end()) return;
    const uint64_t number = conn->second.id;
    conn->second.waker->close();
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
    for (const auto& l : links) forgetLink(l, true);
  }

  void shutdown() {
    shutting_down = true;
    if (listener_open) listener.stop();
    std::vector<proton::connection> open;
    for (const auto& [c, info] : connections) open.push_back(c);
    for (auto& c : open) {
      forgetConnection(c);
      c.close(proton::error_condition("amqp:connection:forced", "the bus is shutting down"));
    }
    if (transports == 0) container->stop();
  }

  // ---- lifecycle thread -------------------------------------------------

  // After the container thread ended: what a closing that never happened left.
  void releaseAll() {
    for (auto& [id, sub] : subscribers) closeSubscriber(sub, false);
    subscribers.clear();
    for (auto& [endpoint, parked] : parked_subscriptions) {
      dropOutbox(*parked.outbox);
      context.broker.removeEndpoint(endpoint);
    }
    counters->parked_subscriptions.fetch_sub(parked_subscriptions.size(),
                                             std::memory_order_relaxed);
    parked_subscriptions.clear();
    for (auto& [id, pub] : publishers) countCredit(pub, 0);
    publishers.clear();
    link_ids.clear();
    connections.clear();
  }

  const descriptor::AmqpListener config;
  const AmqpListenerOptions options;
  ServiceContext& context;
  const std::shared_ptr<const AccessControl> access;
  std::optional<proton::ssl_server_options> tls;  // set by start() when configured
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
  std::map<proton::connection, ConnectionInfo> connections;
  std::map<proton::link, uint64_t> link_ids;
  std::map<uint64_t, PublisherLink> publishers;
  std::map<uint64_t, SubscriberLink> subscribers;
  std::map<std::string, ParkedSubscription> parked_subscriptions;  // by endpoint name
};

Status Outbox::offer(const EventPtr& event) {
  std::lock_guard lock(mu_);
  if (closed_) return Status::unavailable("amqp subscription closed");
  if (pending_.size() >= capacity_) {
    counters_->buffer_full.fetch_add(1, std::memory_order_relaxed);
    if (!waker_) counters_->parked_overflow.fetch_add(1, std::memory_order_relaxed);
    // Rejected: a reliable flow retries it later without counting a failure.
    return Status::rejected("amqp subscriber is slow or away: its buffer of " +
                            std::to_string(capacity_) + " events is full");
  }
  // A journaled delivery is acknowledged when the subscriber accepts it.
  std::optional<flows::DeferredAck> ack = flows::ReliableFlow::deferAcknowledgement();
  OutboxEntry entry{event, {}, 0};
  if (ack) {
    entry.delivery_count = ack->previousDeliveries();
    entry.ack = std::move(*ack);
  }
  pending_.push_back(std::move(entry));
  wake();
  return Status::ok();
}

void Outbox::wake() {
  if (drain_scheduled_ || !waker_) return;
  AmqpListenerService::Impl* impl = impl_;
  const uint64_t link = link_;
  // A closing connection drops the wake-up; the entry waits for the
  // subscription's next link (or its end).
  drain_scheduled_ = waker_->add([impl, link] { impl->drain(link); });
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
  installSaslPlugin();
  if (impl.config.tls) {
    const descriptor::AmqpTls& tls = *impl.config.tls;
    for (const auto& file : {tls.cert, tls.key}) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(file, ec)) {
        return Status::invalidArgument(tls.where.toString() + ": <tls>: cannot read " +
                                       file.string());
      }
    }
    try {
      impl.tls.emplace(proton::ssl_certificate(tls.cert.string(), tls.key.string()));
    } catch (const std::exception& e) {
      return Status::invalidArgument(tls.where.toString() + ": <tls>: certificate " +
                                     tls.cert.string() + " / key " + tls.key.string() +
                                     " not usable: " + e.what());
    }
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
      .information("AMQP 1.0 listening on %s://%s:%d (%z users%s)",
                   std::string(impl.tls ? "amqps" : "amqp"), impl.config.host, port(),
                   impl.config.users.size(),
                   std::string(impl.config.allow_anonymous ? ", anonymous clients allowed" : ""));
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
  unregisterSaslListener(port());
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
  s.redelivered = get(c.redelivered);
  s.parked_subscriptions = get(c.parked_subscriptions);
  s.parked_overflow = get(c.parked_overflow);
  s.awaiting_commit = get(c.awaiting_commit);
  return s;
}

std::unique_ptr<Service> makeAmqpListener(const descriptor::AmqpListener& listener,
                                          ServiceContext& context) {
  AmqpListenerOptions options;
  options.name = "amqp-listener";
  return std::make_unique<AmqpListenerService>(listener, std::move(options), context);
}

}  // namespace cepbus::services::amqp
