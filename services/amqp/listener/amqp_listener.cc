// The AMQP listener (amqp_listener.h): a ClientHandler per connection gets
// that connection's Proton events, on whichever container thread serves it,
// and makes the Proton calls; Impl holds what the connections share (see
// its comment for which thread owns what) and is the ConnectionHost the
// handlers ask for it. Together they wire the parts below, each with one
// job, no pointer back to the listener (callbacks, or the ConnectionHost
// interface, where it must ask for something) and a test of its own in
// tests/services/amqp/:
//
//   client_handler.h         one connection: its Proton events, links, credit, deliveries
//   connection_host.h        what a connection's handler asks of the listener
//   client_connections.h     connections, sessions, who is behind each (SASL)
//   admission.h              what one client may make the listener hold
//   access_control.h         users and their permits
//   message_mapping.h        messages <-> events, error conditions
//   publish_settlement.h     when and how a client's unsettled publish is settled
//   publisher_credit.h       how much credit a publishing link may hold
//   publisher_hold.h         why a publishing link gets no credit now
//   broker_subscriptions.h   a subscription's broker endpoint, made or resumed
//   subscriber_outbox.h      the events waiting for one subscription
//   work_coalescer.h         one wake per batch of work for a connection
//   subscriber_deliveries.h  what a subscribing link has in flight, its outcomes
//   in_flight_bound.h        how much a subscribing link may have in flight
//   durable_parking.h        durable subscriptions whose subscriber is away
//   durable_store.h          durable subscriptions recorded in the journal
//   request_router.h         reply addresses, requests open at AMQP providers
//   route_pressure.h         what the delivery policy says about a publish
//   listener_stats.h         the counters and the registry entries
//   handshake_watch.h        ends connections that do not authenticate in time
//   handshake_deadlines.h    which of them are past their deadline
//   listener_sockets.h       the listener's sockets, seen from the descriptor table

#include "services/amqp/listener/amqp_listener.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <future>
#include <map>
#include <optional>
#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/duration.hpp>
#include <proton/error_condition.hpp>
#include <proton/listen_handler.hpp>
#include <proton/listener.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/session.hpp>
#include <proton/ssl.hpp>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "bus/base/mutex.h"
#include "flows/exchange.h"
#include "router/broker.h"
#include "router/component_entry.h"
#include "router/registry.h"
#include "router/relays.h"
#include "router/topic.h"
#include "services/amqp/listener/broker_subscriptions.h"
#include "services/amqp/listener/client_connections.h"
#include "services/amqp/listener/client_handler.h"
#include "services/amqp/listener/connection_host.h"
#include "services/amqp/listener/durable_store.h"
#include "services/amqp/listener/handshake_watch.h"
#include "services/amqp/listener/publish_settlement.h"
#include "services/amqp/listener/publisher_wake.h"
#include "services/amqp/listener/request_router.h"
#include "services/amqp/listener/return_waits.h"
#include "services/amqp/listener/route_pressure.h"
#include "services/amqp/listener/subscriber_outbox.h"
#include "services/protocols/amqp/access_control.h"
#include "services/protocols/amqp/sasl_plugin.h"

namespace cepbus::services::amqp {

// The listener's shared part: what every connection's handler reaches
// (through ConnectionHost), the service life cycle, and the state that is
// the listener's as a whole. Who owns what, with N container threads:
//
// - A connection's links, their holds, deliveries and scratch buffers are its
//   ClientHandler's, touched only by that connection's events and work,
//   which Proton serializes: no lock (client_handler.h says what crosses
//   into it, and how). Impl reaches a handler only as its connection's work
//   (through its Waker: relink() handing a publisher its new targets,
//   shutdown() closing the connection), during that handler's own call (the
//   caller's targets, at once), or after the container threads ended
//   (releaseAll()).
// - What a publisher reads of another connection's buffers per message (load,
//   publisher count, stalled) is atomic (SubscriberOutbox).
// - What is global — admission counts, the connections' sessions, broker
//   subscriptions and durable parking, the link directory relink() reads —
//   is guarded by control_mu, taken on the control path only (open, attach,
//   detach, close) and for an in-out request's admission. The request
//   router's tables have their own requests_mu, taken for requests and
//   answers only. A publish takes neither.
// - Counters are atomics (listener_stats.h).
struct AmqpListenerService::Impl final : public ConnectionHost {
  struct Listen final : public proton::listen_handler {
    explicit Listen(Impl& impl) : impl_(impl) {}
    void on_close(proton::listener&) override {
      MutexLock lock(impl_.listener_mu);
      impl_.listener_open = false;
    }
    void on_open(proton::listener& l) override {
      {
        MutexLock lock(impl_.listener_mu);
        impl_.listener_open = true;
      }
      impl_.port.store(l.port(), std::memory_order_release);
      registerSaslListener(l.port(), impl_.access);
      if (impl_.handshakes && !impl_.handshakes->start(l.port())) {
        Poco::Logger::get("cepbus.amqp")
            .warning("%s: no handshake deadline: no file descriptor to watch the connections with",
                     impl_.options.name);
      }
      impl_.opened(Status::ok());
    }
    proton::connection_options on_accept(proton::listener&) override {
      if (impl_.handshakes) impl_.handshakes->accepted();
      proton::connection_options options;
      // The mechanisms offered are the SASL plugin's choice (sasl_plugin.h).
      options.handler(impl_.newHandler())
          .sasl_enabled(true)
          .max_frame_size(impl_.handler_options.max_frame_size);
      if (impl_.tls) options.ssl_server_options(*impl_.tls);
      return options;
    }
    void on_error(proton::listener& l, const std::string& what) override {
      bool never_opened;
      {
        MutexLock lock(impl_.listener_mu);
        never_opened = !impl_.listener_open;
      }
      // start() fails and only joins the container: it is stopped here, on
      // its own thread. Stopped from start()'s thread while it was winding
      // down, its thread sometimes waited for good (Proton 0.37).
      if (never_opened) l.container().stop();
      impl_.opened(Status::ioError(impl_.config.where.toString() + ": <amqp> cannot listen on " +
                                   impl_.address() + ": " + what));
    }
    Impl& impl_;
  };

  // What relink() knows of every attached link (publisher_dir, subscriber_dir).
  struct PublisherEntry {
    SharedName address;  // holds a client's address while the link is known
    bool replies = false;
    ClientHandler* owner = nullptr;
    std::shared_ptr<Waker> waker;  // the owner's connection's
    std::shared_ptr<PublisherWake> wake;
  };
  struct SubscriberEntry {
    std::string pattern;
    bool has_endpoint = false;  // a reply link feeds on answers only
    std::shared_ptr<SubscriberOutbox> outbox;
  };

  Impl(AmqpListenerConfig listener, AmqpListenerOptions opts, ServiceContext& ctx)
      : config(std::move(listener)),
        options(std::move(opts)),
        context(ctx),
        access(std::make_shared<const AccessControl>(config)),
        listen(*this) {
    reportRefusals(*counters->scope, admission);
    if (options.handshake_timeout.count() > 0) {
      handshakes = std::make_unique<HandshakeWatch>(
          options.handshake_timeout,
          [counters = counters, name = options.name,
           timeout = std::to_string(options.handshake_timeout.count())](size_t closed) {
            counters->handshake_timeouts.add(closed);
            Poco::Logger::get("cepbus.amqp")
                .information(
                    "%s: %z connections closed: not authenticated within "
                    "handshake-timeout=%s ms",
                    name, closed, timeout);
          });
    }
  }

  std::string address() const { return config.host + ":" + std::to_string(config.port); }

  void opened(Status status) {
    MutexLock lock(open_mu);
    if (open_reported) return;
    open_reported = true;
    open_promise.set_value(std::move(status));
  }

  // The handler of a connection being accepted (any container thread). The
  // handlers of connections that ended are freed here, once their last event
  // has returned.
  ClientHandler& newHandler() {
    MutexLock lock(control_mu);
    std::erase_if(retired, [](const std::unique_ptr<ClientHandler>& h) { return h->finished(); });
    auto handler = std::make_unique<ClientHandler>(*this, handler_options);
    ClientHandler& h = *handler;
    handlers.emplace(&h, std::move(handler));
    return h;
  }

  // ---- ConnectionHost: the listener's state ---------------------------------

  bool shuttingDown() const override { return shutting_down; }
  bool creditOpen() const override { return !shutting_down && !publishing_closed; }
  uint64_t newLinkId() override { return ++next_id; }
  // The container's timer: see ConnectionHost::schedule().
  void schedule(std::chrono::milliseconds delay, std::function<void()> fn) override {
    container->schedule(proton::duration(delay.count()), std::move(fn));
  }

  // ---- ConnectionHost: connections and sessions -----------------------------

  std::variant<ClientConnection, std::string> admitConnection(const proton::connection& c,
                                                              std::string user) override {
    MutexLock lock(control_mu);
    if (auto refusal = connections.open(c, ++next_id, std::move(user))) return *refusal;
    return *connections.find(c);
  }
  SessionAdmission openSession(const proton::session& s) override {
    MutexLock lock(control_mu);
    return connections.openSession(s);
  }
  void sessionClosed(const proton::session& s) override {
    MutexLock lock(control_mu);
    connections.sessionClosed(s);
  }
  std::optional<uint64_t> closeConnection(const proton::connection& c) override {
    MutexLock lock(control_mu);
    return connections.close(c);
  }
  void transportOpened() override { ++transports; }
  // The handler is freed by a later accept, or when the listener stops.
  void transportClosed(ClientHandler& h) override {
    const size_t open = countTransportClosed();
    // The container would wait for its scheduled work to time out as well;
    // once the last client is gone there is nothing left to wait for.
    if (shutting_down && open == 0) container->stop();
    MutexLock lock(control_mu);
    auto it = handlers.find(&h);
    if (it == handlers.end()) return;
    retired.push_back(std::move(it->second));
    handlers.erase(it);
  }

  // ---- ConnectionHost: links ---------------------------------------------

  std::optional<std::string> admitLink(uint64_t connection) override {
    MutexLock lock(control_mu);
    return admission->admitLink(connection);
  }

  std::string attachPublisher(ClientHandler& owner, const PublisherAttach& attach) override {
    std::string entry =
        registerLink(attach.container_id, attach.name, "publish", attach.address, attach.stats);
    MutexLock lock(control_mu);
    publisher_dir[attach.link] =
        PublisherEntry{attach.topic, attach.replies, &owner, attach.waker, attach.wake};
    relink(&owner);
    return entry;
  }

  void detachPublisher(ClientHandler& owner, uint64_t connection, uint64_t link,
                       const std::string& entry) override {
    MutexLock lock(control_mu);
    admission->linkClosed(connection);
    unregisterLink(entry);
    publisher_dir.erase(link);
    if (!shutting_down) relink(&owner);
  }

  std::variant<Subscription, BrokerSubscriptions::Refusal> subscribe(
      ClientHandler& owner, const SubscriberAttach& attach) override {
    MutexLock lock(control_mu);
    auto opened = subscriptions.open(attach.container_id, attach.name, attach.pattern,
                                     attach.durable, attach.user, attach.owner, attach.wake);
    if (auto* refusal = std::get_if<BrokerSubscriptions::Refusal>(&opened)) {
      admission->linkClosed(attach.connection);
      return std::move(*refusal);
    }
    auto& [endpoint, outbox, durable_owner] = std::get<BrokerSubscriptions::Opened>(opened);
    Subscription taken{endpoint,
                       attach.pattern,
                       outbox,
                       attach.durable,
                       std::move(durable_owner),
                       registerLink(attach.container_id, attach.name, "subscribe", attach.pattern,
                                    outbox->sharedStats())};
    counters->subscriber_links.inc();
    subscriber_dir[attach.link] = SubscriberEntry{attach.pattern, true, outbox};
    if (!router::hasWildcard(attach.pattern)) {
      // Answers to requests whose reply-to names this address come here.
      MutexLock requests_lock(requests_mu);
      requests.offerReplyAddress(attach.pattern, attach.link);
      reply_outboxes[attach.link] = outbox;
    }
    relink(&owner);
    return taken;
  }

  Subscription subscribeReplies(uint64_t link, const std::string& container_id,
                                const std::string& name, SubscriberOutbox::Wake wake) override {
    Subscription taken;
    taken.pattern = RequestRouter::dynamicAddress(link);
    MutexLock lock(control_mu);
    taken.outbox = subscriptions.replyOutbox(std::move(wake));
    taken.entry =
        registerLink(container_id, name, "replies", taken.pattern, taken.outbox->sharedStats());
    counters->subscriber_links.inc();
    subscriber_dir[link] = SubscriberEntry{taken.pattern, false, taken.outbox};
    MutexLock requests_lock(requests_mu);
    requests.assignReplyAddress(taken.pattern, link);
    reply_outboxes[link] = taken.outbox;
    return taken;
  }

  void detachSubscriber(ClientHandler& owner, uint64_t connection, uint64_t link,
                        Subscription subscription, std::vector<OutboxEntry> unsettled,
                        bool detached) override {
    MutexLock lock(control_mu);
    admission->linkClosed(connection);
    unregisterLink(subscription.entry);
    {
      MutexLock requests_lock(requests_mu);
      requests.releaseReplyAddress(subscription.pattern, link);
      reply_outboxes.erase(link);
    }
    subscriber_dir.erase(link);
    leaveSubscription(subscription, std::move(unsettled),
                      detached && subscription.durable && !shutting_down, !detached);
    if (!shutting_down) relink(&owner);
  }

  void releasePublisher(const std::string& entry) override {
    MutexLock lock(control_mu);
    unregisterLink(entry);
  }
  void releaseSubscriber(Subscription subscription, std::vector<OutboxEntry> unsettled) override {
    MutexLock lock(control_mu);
    unregisterLink(subscription.entry);
    leaveSubscription(subscription, std::move(unsettled), false, false);
  }

  // ---- ConnectionHost: publishing -------------------------------------------

  std::optional<std::string> admitMessage(uint64_t bytes) override {
    return admission->admitMessage(bytes);
  }
  // An unsettled publish asks for reliable QoS; on a route that journals it,
  // its accept waits for the commits (route_pressure.h).
  bool journaled(Symbol address) override {
    return journaledRoute(context.broker.policy(), address);
  }
  PublishVerdict publish(flows::Exchange& exchange, bool journaled,
                         flows::WakeHold& burst) override {
    return PublishVerdict::of(context.broker.publish(exchange, &burst), journaled);
  }
  bool congested(const std::vector<std::string>& stages) override {
    return stagesSaturated(context.broker.policy(), stages);
  }
  void publisherWaits(bool waiting) override {
    if (waiting) {
      ++waiting_publishers;
    } else {
      --waiting_publishers;
    }
  }
  bool publishersWaiting() const override { return waiting_publishers.load() != 0; }

  // ---- ConnectionHost: request/response ---------------------------------

  std::optional<std::string> admitRequest(uint64_t connection) override {
    MutexLock lock(control_mu);
    return admission->admitRequest(connection);
  }

  Status sendRequest(uint64_t connection, flows::Exchange exchange,
                     std::chrono::nanoseconds timeout, std::shared_ptr<Waker> waker,
                     std::string reply_to, proton::message_id correlation) override {
    Result<uint64_t> id = context.broker.request(
        std::move(exchange), timeout,
        [this, waker, reply_to, correlation, connection](const flows::Outcome& outcome) {
          // Any thread: the answer is made on the requester's connection,
          // which ends the request there (max-pending-requests).
          waker->add([this, reply_to, correlation, connection, kind = outcome.kind,
                      status = outcome.status, reply = outcome.reply] {
            {
              MutexLock lock(control_mu);
              admission->requestEnded(connection);
            }
            answer(reply_to, correlation, kind, status, reply);
          });
        });
    if (id) return Status::ok();
    MutexLock lock(control_mu);
    admission->requestEnded(connection);
    return id.status();
  }

  std::optional<proton::error_condition> takeProviderReply(const proton::message& m) override {
    MutexLock lock(requests_mu);
    return requests.providerReply(m);
  }
  void stampProviderRequest(const flows::Exchange& request, proton::message& m) override {
    MutexLock lock(requests_mu);
    requests.sendingToProvider(request, m);
  }

  // ---- control path (control_mu held) ------------------------------------

  // Which subscriptions each publishing link feeds, directly or through
  // relays (router/relays.h); after any link comes or goes. `caller`'s own
  // links take theirs at once (it is running); the others' go to them as
  // their connections' work. A waiting link is looked at again when it
  // takes them (its buffer may be gone).
  void relink(ClientHandler* caller) REQUIRES(control_mu) {
    const std::vector<router::Relay> relays = router::relaysIn(context.registry);
    std::map<uint64_t, FedOutboxes> targets;
    std::map<uint64_t, std::vector<std::string>> derived;
    for (auto& [pub_id, pub] : publisher_dir) {
      if (!pub.replies) derived[pub_id] = router::derivedAddresses(relays, pub.address.name());
    }
    for (auto& [sub_id, sub] : subscriber_dir) {
      std::vector<std::shared_ptr<PublisherWake>> feeding;
      for (auto& [pub_id, pub] : publisher_dir) {
        if (pub.replies || !sub.has_endpoint) continue;
        if (router::topicMatches(sub.pattern, pub.address.name())) {
          targets[pub_id].direct.push_back(sub.outbox);
        } else if (std::any_of(derived[pub_id].begin(), derived[pub_id].end(),
                               // By name: clang 14 cannot capture a structured binding.
                               [&pattern = sub.pattern](const std::string& address) {
                                 return router::topicMatches(pattern, address);
                               })) {
          targets[pub_id].derived.push_back(sub.outbox);
        } else {
          continue;
        }
        feeding.push_back(pub.wake);
      }
      sub.outbox->setPublishers(std::move(feeding));
    }
    for (auto& [pub_id, pub] : publisher_dir) {
      FedOutboxes mine = std::move(targets[pub_id]);
      if (pub.owner == caller) {
        caller->setTargets(pub_id, std::move(mine));
      } else {
        // Captured by name: clang 14 cannot capture a structured binding.
        pub.waker->add([owner = pub.owner, id = pub_id, mine = std::move(mine)]() mutable {
          owner->setTargets(id, std::move(mine));
        });
      }
    }
  }

  // A subscription's link went: what its subscriber had not settled goes
  // back (SubscriberOutbox::returnUnsettled()); a kept subscription is
  // parked. `closed`: the client closed the link (BrokerSubscriptions::end()).
  void leaveSubscription(Subscription& sub, std::vector<OutboxEntry> unsettled, bool keep,
                         bool closed) REQUIRES(control_mu) {
    counters->subscriber_links.dec();
    if (keep) {
      subscriptions.park(sub.endpoint, DurableSubscription{sub.pattern, sub.outbox, sub.owner},
                         std::move(unsettled));
      return;
    }
    sub.outbox->returnUnsettled(std::move(unsettled), /*keep=*/false);
    // A closed link ends its subscription for good, so what waits for it
    // goes (docs/amqp.md). A subscriber that only went away (a detach, a
    // dropped connection) may come back under the same container id and
    // link name and get it, and a clean stop keeps it for the next start,
    // as a crash does.
    const router::EndpointExit exit = closed && !shutting_down ? router::EndpointExit::kForGood
                                                               : router::EndpointExit::kMayReturn;
    Status ended = subscriptions.end(sub.endpoint, *sub.outbox, sub.durable ? &sub.owner : nullptr,
                                     closed, exit);
    if (exit == router::EndpointExit::kMayReturn && !sub.durable && !shutting_down) {
      awaitReturn(sub.endpoint);
    }
    if (!ended) {
      Poco::Logger::get("cepbus.amqp")
          .warning("%s: durable subscription %s ended, but its record stays: %s", options.name,
                   sub.endpoint, ended.message());
    }
  }

  // A non-durable subscriber went away: what it left unsettled waits for it
  // (under its endpoint's name) for options.subscriber_return_timeout, then
  // goes. A subscription that came back under that name meanwhile keeps it:
  // subscriptions open under control_mu, as this decides.
  void awaitReturn(const std::string& endpoint) REQUIRES(control_mu) {
    if (endpoint.empty()) return;
    if (options.subscriber_return_timeout.count() == 0) {
      context.broker.forgetAway(endpoint);
      return;
    }
    return_waits.after(options.subscriber_return_timeout, [this, endpoint] {
      MutexLock lock(control_mu);
      if (!shutting_down) context.broker.forgetAway(endpoint);
    });
  }

  // ---- request/response ---------------------------------------------------

  // Sends the answer to a request to the link whose address is `reply_to`,
  // on whatever connection it is: the outbox wakes it.
  void answer(const std::string& reply_to, const proton::message_id& correlation,
              flows::OutcomeKind kind, const Status& status, const EventPtr& reply) override {
    std::shared_ptr<SubscriberOutbox> outbox;
    OutboxEntry entry;
    {
      MutexLock lock(requests_mu);
      std::optional<RoutedAnswer> routed =
          requests.answer(reply_to, correlation, kind, status, reply);
      if (!routed) return;
      auto it = reply_outboxes.find(routed->link);
      if (it == reply_outboxes.end()) return;  // its link is gone
      outbox = it->second;
      entry.answer = std::move(routed->message);
    }
    outbox->pushAnswer(std::move(entry));
  }

  // ---- life cycle -----------------------------------------------------------

  // On a timer of the container (any thread): no more connections; each open
  // one is closed by its own connection.
  void shutdown() {
    shutting_down = true;
    closeListener();
    {
      MutexLock lock(control_mu);
      for (auto& [h, handler] : handlers) handler->postShutdown();
    }
    if (transports.load() == 0) container->stop();
  }

  // Proton frees the listener once its on_close has returned, and another
  // thread may be closing it already: once shutting_down is set, the last
  // client's transport to close stops the container (transportClosed()), and
  // so does stop() when shutdown takes too long. on_close waits for this, so
  // the handle stays valid while it is used.
  void closeListener() {
    MutexLock lock(listener_mu);
    if (listener_open) listener.stop();
  }

  // A link's registry entry and stats scope (listener_stats.h); "" when a
  // link of that name already has them (another connection with the same
  // container id): its counters still count in stats().
  std::string registerLink(const std::string& container_id, const std::string& link,
                           const char* role, const std::string& address,
                           const std::shared_ptr<LinkCounters>& stats) {
    std::string name = "amqp-link:" + container_id + "/" + link;
    Result<stats::ScopePtr> scope =
        reportLink(context.registry, name, options.name, role, address, stats);
    if (!scope) return {};
    MutexLock lock(links_mu);
    link_scopes.emplace(name, std::move(*scope));
    return name;
  }
  void unregisterLink(const std::string& name) {
    if (name.empty()) return;
    context.registry.remove(name);
    stats::ScopePtr scope;
    MutexLock lock(links_mu);
    if (auto it = link_scopes.find(name); it != link_scopes.end()) {
      scope = std::move(it->second);
      link_scopes.erase(it);
    }
  }

  // The listener's registry entry (listener_stats.h). The registry may still
  // run its probe for a moment after stop() removed it: the probe reads the
  // shared counters, never the service.
  void report() {
    auto added =
        reportListener(context.registry, options.name,
                       config.host + ":" + std::to_string(port.load()), counters, admission);
    if (!added) {
      Poco::Logger::get("cepbus.amqp")
          .warning("%s: no registry entry: %s", options.name, added.status().message());
      return;
    }
    entry = *added;
  }

  // Re-creates the durable subscriptions recorded in the journal, parked:
  // called before the listener accepts a connection, so that what is
  // published from then on is kept for them.
  Status restoreDurable() {
    if (options.journal.empty()) return Status::ok();
    Result<BrokerSubscriptions::Restored> restored =
        [&]() -> Result<BrokerSubscriptions::Restored> {
      Result<std::unique_ptr<DurableStore>> store = DurableStore::open(options.journal);
      if (!store) return store.status();
      // Nothing is accepted yet; the lock is for the analysis.
      MutexLock lock(control_mu);
      return subscriptions.restore(std::move(*store), *access);
    }();
    if (!restored) {
      return Status::ioError(
          config.where.toString() +
          ": <amqp> cannot restore durable subscriptions: " + restored.status().message());
    }
    Poco::Logger& log = Poco::Logger::get("cepbus.amqp");
    for (const std::string& line : restored->dropped) log.warning("%s: %s", options.name, line);
    if (restored->restored > 0) {
      log.information("%s: %z durable subscriptions restored from journal %s", options.name,
                      restored->restored, options.journal);
    }
    return Status::ok();
  }

  // The subscribers of before the restart that are not restored (not
  // durable, or their record was dropped) may still come back, as one that
  // went away: what the journal kept for them waits for them as long, from
  // now. Without this it would wait for good.
  void awaitFormerSubscribers() {
    MutexLock lock(control_mu);
    for (const std::string& endpoint : context.broker.awayEndpoints(kSubscriptionEndpointPrefix)) {
      awaitReturn(endpoint);
    }
  }

  // The parked durable subscriptions end (start() failed).
  void endParked() {
    MutexLock lock(control_mu);
    subscriptions.endParked();
  }

  // After the container threads ended: what a closing that never happened left.
  // The handlers give their links back through the host's calls, which
  // lock: they are taken out first (nothing else touches them any more).
  void releaseAll() {
    std::map<ClientHandler*, std::unique_ptr<ClientHandler>> left;
    std::vector<std::unique_ptr<ClientHandler>> done;
    {
      MutexLock lock(control_mu);
      left.swap(handlers);
      done.swap(retired);
    }
    for (auto& [h, handler] : left) handler->releaseAll();
    left.clear();
    done.clear();
    MutexLock lock(control_mu);
    subscriptions.endParked();
    publisher_dir.clear();
    subscriber_dir.clear();
    connections.clear();
  }

  // One network connection fewer; how many are left. Never below 0: a
  // transport may close without having been counted open (refused early).
  size_t countTransportClosed() {
    size_t open = transports.load();
    while (open > 0 && !transports.compare_exchange_weak(open, open - 1)) {
    }
    return open > 0 ? open - 1 : 0;
  }

  // The container threads: the descriptor's, else one per core.
  unsigned threads() const {
    if (options.threads > 0) return options.threads;
    return std::max(1u, std::thread::hardware_concurrency());
  }

  const AmqpListenerConfig config;
  const AmqpListenerOptions options;
  ServiceContext& context;
  const std::shared_ptr<const AccessControl> access;
  std::optional<proton::ssl_server_options> tls;  // set by start() when configured
  Listen listen;
  const std::shared_ptr<ListenerCounters> counters = std::make_shared<ListenerCounters>(
      context.registry.stats().scope(kAmqpSchema, {{"name", options.name}}));
  // Its connection, link and request counts change with control_mu held.
  // Not PT_GUARDED_BY(control_mu): admitMessage() and its refusal counts are
  // for any thread, and ClientConnections and BrokerSubscriptions share it.
  const std::shared_ptr<AmqpAdmission> admission = std::make_shared<AmqpAdmission>(options.limits);
  // The sender of what this listener publishes (told apart in SubscriberOutbox::offer).
  const Symbol sender = Symbol::intern(options.name);
  // What every connection's handler is given (client_handler.h).
  const ClientHandlerOptions handler_options{
      options.credit_window,
      options.limits.max_message_size,
      maxFrameSize(options.limits.max_message_size, options.credit_window),
      options.request_timeout,
      options.recheck_interval,
      options.subscriber_stall_timeout,
      sender,
      access,
      counters,
      options.limits.max_unsettled,
      options.limits.max_bytes_in_flight};
  std::atomic<int> port{0};

  Mutex open_mu;
  bool open_reported GUARDED_BY(open_mu) = false;
  std::promise<Status> open_promise;
  std::promise<void> run_finished;
  bool abandoned = false;  // stop() left the container running (see stop())

  std::unique_ptr<proton::container> container;
  std::thread thread;
  bool running = false;  // lifecycle thread

  // Set before the container runs; used by closeListener() only.
  proton::listener listener;
  Mutex listener_mu;
  bool listener_open GUARDED_BY(listener_mu) = false;  // the handle above is valid while true
  std::atomic<bool> shutting_down{false};
  // Set by deactivate(): publishers get no more credit (the bus is draining).
  std::atomic<bool> publishing_closed{false};
  std::atomic<size_t> transports{0};  // open network connections, refused ones included
  std::atomic<uint64_t> next_id{0};
  std::atomic<size_t> waiting_publishers{0};  // publishing links waiting for room

  Mutex control_mu;
  ClientConnections connections GUARDED_BY(control_mu){admission, counters};
  BrokerSubscriptions subscriptions GUARDED_BY(control_mu){
      context.broker, admission, counters,
      SubscriptionConfig{options.subscriber_buffer, options.durable_buffer, sender, options.name}};
  std::map<uint64_t, PublisherEntry> publisher_dir GUARDED_BY(control_mu);
  std::map<uint64_t, SubscriberEntry> subscriber_dir GUARDED_BY(control_mu);
  // Every connection's handler, by address, until its last event ran.
  std::map<ClientHandler*, std::unique_ptr<ClientHandler>> handlers GUARDED_BY(control_mu);
  std::vector<std::unique_ptr<ClientHandler>> retired GUARDED_BY(control_mu);

  Mutex requests_mu;  // taken after control_mu when both are
  RequestRouter requests GUARDED_BY(requests_mu){counters};
  // The subscribing links that may receive answers, by link number.
  std::map<uint64_t, std::shared_ptr<SubscriberOutbox>> reply_outboxes GUARDED_BY(requests_mu);

  std::shared_ptr<router::ComponentEntry> entry;  // the listener's registry entry
  Mutex links_mu;
  // The stats scopes of the registered links, by registry name.
  std::map<std::string, stats::ScopePtr> link_scopes GUARDED_BY(links_mu);
  // Ends connections that do not authenticate in time; null: no deadline.
  std::unique_ptr<HandshakeWatch> handshakes;
  // Runs awaitReturn()'s waits; stopped with the listener (what they would
  // have removed stays journaled for the next start).
  ReturnWaits return_waits;
};

AmqpListenerService::AmqpListenerService(AmqpListenerConfig listener, AmqpListenerOptions options,
                                         ServiceContext& context)
    : impl_(std::make_unique<Impl>(std::move(listener), std::move(options), context)) {}

AmqpListenerService::~AmqpListenerService() {
  stop();
  // A container left running by stop() still uses the Impl.
  if (impl_->abandoned) static_cast<void>(impl_.release());
}

const std::string& AmqpListenerService::name() const { return impl_->options.name; }

Status AmqpListenerService::start() {
  Impl& impl = *impl_;
  if (impl.running) return Status::ok();
  if (impl.container) {
    return Status::unavailable(impl.options.name + ": a stopped listener cannot be restarted");
  }
  installSaslPlugin();
  if (impl.config.tls) {
    auto tls = loadServerTls(*impl.config.tls);
    if (!tls) return tls.status();
    impl.tls = std::move(*tls);
  }
  if (Status restored = impl.restoreDurable(); !restored) {
    impl.endParked();
    return restored;
  }
  impl.container = std::make_unique<proton::container>(impl.options.name);
  try {
    impl.listener = impl.container->listen(impl.address(), impl.listen);
  } catch (const std::exception& e) {
    impl.container.reset();
    impl.endParked();
    return Status::invalidArgument(impl.config.where.toString() + ": <amqp> cannot listen on " +
                                   impl.address() + ": " + e.what());
  }
  std::future<Status> opened = impl.open_promise.get_future();
  impl.thread = std::thread([&impl] {
    try {
      impl.container->run(static_cast<int>(impl.threads()));
    } catch (const std::exception& e) {
      impl.opened(Status::internal(impl.options.name + ": container failed: " + e.what()));
    }
    impl.run_finished.set_value();
  });
  const bool answered =
      opened.wait_for(impl.options.close_timeout * 5) == std::future_status::ready;
  Status status = answered
                      ? opened.get()
                      : Status::timeout(impl.config.where.toString() + ": <amqp> listening on " +
                                        impl.address() + " did not complete");
  if (!status) {
    // Nothing was accepted. A listener that failed has stopped the
    // container from its own thread (Listen::on_error); one that never
    // answered is stopped from here.
    if (!answered) impl.container->stop();
    impl.thread.join();
    impl.endParked();
    return status;
  }
  impl.running = true;
  impl.awaitFormerSubscribers();
  impl.report();
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
  // Publishers may still send what credit they hold, then wait (each link
  // reads the flag when it next tops its credit up); subscribers go on.
  impl.publishing_closed = true;
}

void AmqpListenerService::stop() {
  Impl& impl = *impl_;
  if (!impl.running) return;
  impl.running = false;
  std::future<void> finished = impl.run_finished.get_future();
  impl.container->schedule(proton::duration(0), [&impl] { impl.shutdown(); });
  if (finished.wait_for(impl.options.close_timeout) != std::future_status::ready) {
    impl.container->stop();  // clients still connected
  }
  if (finished.wait_for(impl.options.close_timeout) == std::future_status::ready) {
    impl.thread.join();
  } else {
    // Proton 0.37's epoll proactor can leave a connection that never closes
    // (its events are never delivered again), and run() then never returns,
    // whoever stops it, from whichever thread: seen in 4 of 300 stops of a
    // bus on a loaded machine, on a listener whose only clients had been
    // port probes (TCP connections closed at once). Waiting would hang the
    // bus's stop for ever, so the container and its threads, asleep in the
    // proactor, are left behind: the Impl is never freed
    // (~AmqpListenerService), and the process exits around them.
    impl.abandoned = true;
    impl.thread.detach();
    Poco::Logger::get("cepbus.amqp")
        .error(
            "%s: the AMQP container did not stop within %Ld ms of being stopped; its threads "
            "are left behind (a connection the proactor no longer serves)",
            impl.options.name, static_cast<Poco::Int64>(2 * impl.options.close_timeout.count()));
  }
  if (impl.handshakes) impl.handshakes->stop();
  impl.return_waits.stop();
  unregisterSaslListener(port());
  impl.releaseAll();
  impl.opened(Status::unavailable(impl.options.name + ": stopped"));
  if (impl.entry) {
    impl.entry->setState(router::ComponentState::kStopped);
    impl.context.registry.remove(impl.options.name);
    impl.entry.reset();
  }
}

int AmqpListenerService::port() const { return impl_->port.load(std::memory_order_acquire); }

AmqpListenerStats AmqpListenerService::stats() const {
  return impl_->counters->stats(*impl_->admission);
}

}  // namespace cepbus::services::amqp
