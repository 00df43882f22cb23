// The AMQP listener (amqp_listener.h): Impl is the Proton handler. It gets
// Proton's events on the container thread, makes the Proton calls, and wires
// together the parts below, each with one job, no pointer back to the
// listener (callbacks where it must ask for something) and a test of its own
// in tests/services/amqp/:
//
//   client_connections.h     connections, sessions, who is behind each (SASL)
//   admission.h              what one client may make the listener hold
//   access_control.h         users and their permits
//   message_mapping.h        messages <-> events, error conditions
//   publish_settlement.h     when and how a client's unsettled publish is settled
//   publisher_credit.h       how much credit a publishing link may hold
//   publisher_hold.h         why a publishing link gets no credit now
//   broker_subscriptions.h   a subscription's broker endpoint, made or resumed
//   subscriber_outbox.h      the events waiting for one subscription
//   subscriber_deliveries.h  what a subscribing link has in flight, its outcomes
//   in_flight_bound.h        how much a subscribing link may have in flight
//   durable_parking.h        durable subscriptions whose subscriber is away
//   durable_store.h          durable subscriptions recorded in the journal
//   request_router.h         reply addresses, requests open at AMQP providers
//   route_pressure.h         what the delivery policy says about a publish
//   listener_stats.h         the counters and the registry entries

#include "services/amqp/amqp_listener.h"

#include <Poco/Logger.h>

#include <atomic>
#include <exception>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/delivery_mode.hpp>
#include <proton/duration.hpp>
#include <proton/error_condition.hpp>
#include <proton/link.hpp>
#include <proton/listen_handler.hpp>
#include <proton/listener.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sasl.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/session.hpp>
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
#include <variant>
#include <vector>

#include "bus/core/wire_names.h"
#include "flows/exchange.h"
#include "router/broker.h"
#include "router/component_entry.h"
#include "router/registry.h"
#include "router/topic.h"
#include "services/amqp/access_control.h"
#include "services/amqp/broker_subscriptions.h"
#include "services/amqp/client_connections.h"
#include "services/amqp/durable_store.h"
#include "services/amqp/message_mapping.h"
#include "services/amqp/publish_settlement.h"
#include "services/amqp/publisher_credit.h"
#include "services/amqp/publisher_hold.h"
#include "services/amqp/request_router.h"
#include "services/amqp/route_pressure.h"
#include "services/amqp/sasl_plugin.h"
#include "services/amqp/subscriber_deliveries.h"
#include "services/amqp/subscriber_outbox.h"

namespace cepbus::services::amqp {
namespace {

constexpr char kUnauthorized[] = "amqp:unauthorized-access";

}  // namespace

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

  struct PublisherLink {
    PublisherLink(uint64_t link_id, proton::receiver receiver,
                  std::shared_ptr<ListenerCounters> counters)
        : link(std::move(receiver)), id(link_id), hold(std::move(counters), stats) {}

    proton::receiver link;
    uint64_t id = 0;
    uint64_t connection = 0;
    Symbol address;
    bool replies = false;  // a provider's link to kReplyAddress
    std::shared_ptr<LinkCounters> stats = std::make_shared<LinkCounters>();
    PublisherHold hold;  // why it gets no more credit now (publisher_hold.h)
    // Unsettled messages whose journal commits are awaited (reliable routes).
    std::map<uint64_t, proton::delivery> awaiting;
    uint64_t next_awaiting = 0;
    std::string entry;  // its registry entry ("" when it has none)
    // The outboxes of the subscribing links its address matches (relink()).
    std::vector<std::shared_ptr<SubscriberOutbox>> targets;
  };
  struct SubscriberLink {
    SubscriberLink(proton::sender sender, uint64_t connection_number,
                   std::shared_ptr<SubscriberOutbox> subscription,
                   std::shared_ptr<ListenerCounters> counters)
        : link(std::move(sender)),
          connection(connection_number),
          outbox(std::move(subscription)),
          deliveries(outbox, std::move(counters)) {}

    proton::sender link;
    uint64_t connection = 0;
    std::shared_ptr<SubscriberOutbox> outbox;
    SubscriberDeliveries deliveries;  // sent, not yet settled by the subscriber
    std::string endpoint;             // its broker endpoint ("" for a reply link)
    std::string pattern;              // its source address
    bool durable = false;
    std::string entry;  // its registry entry ("" when it has none)
    std::string owner;  // a durable one's (max-durable)
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
    Result<std::string> user =
        authenticatedUser(c.transport().sasl().mech(), c.user(), access->allowsAnonymous());
    if (!user) {
      c.close(proton::error_condition(kUnauthorized, user.status().message()));
      return;
    }
    if (auto refusal = connections.open(c, ++next_id, std::move(*user))) {
      c.close(proton::error_condition(kResourceLimitExceeded, *refusal));
      return;
    }
    c.open();
  }

  void on_session_open(proton::session& s) override {
    const SessionAdmission admitted = connections.openSession(s);
    switch (admitted.verdict) {
      case SessionAdmission::Verdict::kAdmitted:
        s.open();
        break;
      case SessionAdmission::Verdict::kRefused:
        s.close(proton::error_condition(kResourceLimitExceeded, admitted.refusal));
        break;
      case SessionAdmission::Verdict::kUnknownConnection:
        break;
    }
  }
  void on_session_close(proton::session& s) override { connections.sessionClosed(s); }

  // Refuses a link beyond max-links (true when refused).
  bool refuseLink(proton::link& l, uint64_t connection) {
    auto refusal = admission->admitLink(connection);
    if (refusal) l.close(proton::error_condition(kResourceLimitExceeded, *refusal));
    return refusal.has_value();
  }

  void on_receiver_open(proton::receiver& r) override {
    const ClientConnection* conn = connections.find(r.connection());
    if (conn == nullptr) return;
    std::string addr = r.target().address();
    const bool replies = addr == kReplyAddress;
    if (replies) {
      // Any client may answer: a reply completes only a request the bus
      // sent to it, found by its correlation id.
    } else if (Status valid = router::validateAddress(addr); !valid) {
      r.close(proton::error_condition(kInvalidField,
                                      "target address \"" + addr + "\": " + valid.message() +
                                          " (publish to a topic; wildcards are for subscribing)"));
      return;
    }
    if (!replies && !access->mayPublish(conn->user, addr)) {
      r.close(proton::error_condition(
          kUnauthorized, "user \"" + conn->user + "\" may not publish to \"" + addr + "\""));
      return;
    }
    // The address becomes a symbol for as long as the process lives: a client
    // that opens links to ever new addresses spends the budget of names
    // clients may create, not the symbol table the queries need.
    const std::optional<Symbol> address = internWireName(addr);
    if (!address) {
      r.close(
          proton::error_condition(kResourceLimitExceeded, wireNameRefusal("target address", addr)));
      return;
    }
    if (refuseLink(r, conn->id)) return;
    setMaxMessageSize(r, options.limits.max_message_size);
    r.open(proton::receiver_options().credit_window(0).auto_accept(false).target(
        proton::target_options().address(addr)));
    uint64_t id = ++next_id;
    link_ids[r] = id;
    PublisherLink& pub = publishers.try_emplace(id, id, r, counters).first->second;
    pub.connection = conn->id;
    pub.address = *address;
    pub.replies = replies;
    pub.entry = registerLink(conn->container_id, r.name(), "publish", addr, pub.stats);
    relink();
    replenish(pub);
  }

  void on_sender_open(proton::sender& s) override {
    const ClientConnection* conn = connections.find(s.connection());
    if (conn == nullptr) return;
    if (s.source().dynamic()) {
      if (!refuseLink(s, conn->id)) openReplyLink(s, *conn);
      return;
    }
    std::string pattern = s.source().address();
    if (Status valid = router::validatePattern(pattern); !valid) {
      s.close(proton::error_condition(kInvalidField,
                                      "source address \"" + pattern + "\": " + valid.message()));
      return;
    }
    if (!access->maySubscribe(conn->user, pattern)) {
      s.close(proton::error_condition(
          kUnauthorized, "user \"" + conn->user + "\" may not subscribe to \"" + pattern + "\""));
      return;
    }
    if (refuseLink(s, conn->id)) return;
    const bool durable = s.source().durability_mode() != proton::source::NONDURABLE;
    const uint64_t id = ++next_id;
    auto opened = subscriptions.open(conn->container_id, s.name(), pattern, durable, conn->user,
                                     durable ? conn->owner() : std::string(), wakeDrain(*conn, id));
    if (const auto* refusal = std::get_if<BrokerSubscriptions::Refusal>(&opened)) {
      admission->linkClosed(conn->id);
      s.close(proton::error_condition(refusal->condition, refusal->description));
      return;
    }
    auto& [endpoint, outbox, owner] = std::get<BrokerSubscriptions::Opened>(opened);
    proton::source_options source;
    source.address(pattern);
    if (durable) {
      source.durability_mode(s.source().durability_mode()).expiry_policy(proton::source::NEVER);
    }
    s.open(subscriberLinkOptions(s).source(source));
    link_ids[s] = id;
    SubscriberLink& sub = subscribers.try_emplace(id, s, conn->id, outbox, counters).first->second;
    sub.endpoint = endpoint;
    sub.pattern = pattern;
    sub.durable = durable;
    sub.entry =
        registerLink(conn->container_id, s.name(), "subscribe", pattern, outbox->sharedStats());
    sub.owner = std::move(owner);
    counters->subscriber_links.fetch_add(1, std::memory_order_relaxed);
    // Answers to requests whose reply-to names this address come here.
    if (!router::hasWildcard(pattern)) requests.offerReplyAddress(pattern, id);
    relink();
  }

  // What an outbox bound to subscribing link `id` calls when an event
  // arrives: drain the link, as its connection's work.
  SubscriberOutbox::Wake wakeDrain(const ClientConnection& conn, uint64_t id) {
    return [this, waker = conn.waker, id] { return waker->add([this, id] { drain(id); }); };
  }

  // An at-most-once receiver gets its messages pre-settled, as it asked: it
  // sends no outcomes, so unsettled ones would be held for it forever.
  static proton::sender_options subscriberLinkOptions(const proton::sender& s) {
    proton::sender_options options;
    if (asksPresettled(s)) options.delivery_mode(proton::delivery_mode::AT_MOST_ONCE);
    return options;
  }

  // A receiver attached with a dynamic source: the bus names an address
  // that only carries answers to the requests naming it as reply-to.
  void openReplyLink(proton::sender& s, const ClientConnection& conn) {
    const uint64_t id = ++next_id;
    const std::string address = RequestRouter::dynamicAddress(id);
    auto outbox = subscriptions.replyOutbox(wakeDrain(conn, id));
    s.open(subscriberLinkOptions(s).source(proton::source_options().address(address)));
    link_ids[s] = id;
    SubscriberLink& sub = subscribers.try_emplace(id, s, conn.id, outbox, counters).first->second;
    sub.pattern = address;
    sub.entry =
        registerLink(conn.container_id, s.name(), "replies", address, outbox->sharedStats());
    counters->subscriber_links.fetch_add(1, std::memory_order_relaxed);
    requests.assignReplyAddress(address, id);
  }

  // ---- request/response -------------------------------------------------

  // A message with reply-to: an in-out request to the provider of the
  // link's address. Its answer (reply, or a fault message) goes to the
  // reply-to address with the request's correlation-id (else its
  // message-id). An unsettled request is accepted once the bus took it,
  // released when the route is paused, rejected (amqp:not-found) when
  // nothing provides the address; a pre-settled one hears those as faults.
  void request(PublisherLink& pub, proton::delivery& d, const proton::message& m, EventPtr event,
               bool presettled) {
    const std::string reply_to = m.reply_to();
    const proton::message_id correlation = RequestRouter::correlationOf(m);
    const std::chrono::nanoseconds timeout = RequestRouter::timeoutOf(m, options.request_timeout);
    flows::Exchange exchange;
    exchange.event = std::move(event);
    exchange.address = pub.address;
    std::shared_ptr<Waker> waker = connections.wakerOf(pub.link.connection());
    const uint64_t connection = pub.connection;
    if (auto refusal = admission->admitRequest(connection)) {
      if (presettled) {
        answer(reply_to, correlation, flows::OutcomeKind::kRejected, Status::rejected(*refusal),
               nullptr);
      } else {
        rejectWithCondition(d, proton::error_condition(kResourceLimitExceeded, *refusal));
        counters->rejected.fetch_add(1, std::memory_order_relaxed);
        bump(pub.stats->rejected);
      }
      return;
    }
    counters->requests.fetch_add(1, std::memory_order_relaxed);
    Result<uint64_t> id = context.broker.request(
        exchange, timeout,
        [this, waker, reply_to, correlation, connection](const flows::Outcome& outcome) {
          // Any thread: the answer is built and sent on the container thread.
          if (!waker) return;
          waker->add([this, reply_to, correlation, connection, kind = outcome.kind,
                      status = outcome.status, reply = outcome.reply] {
            admission->requestEnded(connection);
            answer(reply_to, correlation, kind, status, reply);
          });
        });
    if (id) {
      if (!presettled) {
        d.accept();
        counters->accepted.fetch_add(1, std::memory_order_relaxed);
        bump(pub.stats->accepted);
      }
      return;
    }
    admission->requestEnded(connection);
    const Status& why = id.status();
    if (presettled) {
      answer(reply_to, correlation, flows::OutcomeKind::kRejected, why, nullptr);
    } else if (why.code() == Status::Code::kUnavailable) {
      d.release();
      counters->released.fetch_add(1, std::memory_order_relaxed);
      bump(pub.stats->released);
    } else {
      rejectWithCondition(
          d, proton::error_condition(
                 why.code() == Status::Code::kNotFound ? kNotFound : kInvalidField, why.message()));
      counters->rejected.fetch_add(1, std::memory_order_relaxed);
      bump(pub.stats->rejected);
    }
  }

  // Sends the answer to a request to the link whose address is `reply_to`.
  void answer(const std::string& reply_to, const proton::message_id& correlation,
              flows::OutcomeKind kind, const Status& status, const EventPtr& reply) {
    std::optional<RoutedAnswer> routed =
        requests.answer(reply_to, correlation, kind, status, reply);
    if (!routed) return;
    auto sub = subscribers.find(routed->link);
    if (sub == subscribers.end()) return;  // its link is forgotten with it (forgetLink())
    OutboxEntry entry;
    entry.answer = std::move(routed->message);
    sub->second.outbox->pushAnswer(std::move(entry));
    drain(sub->first);
  }

  void on_sendable(proton::sender& s) override {
    auto it = link_ids.find(s);
    if (it != link_ids.end()) drain(it->second);
  }

  // A subscriber's outcome (subscriber_deliveries.h).
  void on_tracker_accept(proton::tracker& t) override {
    settle(t, SubscriberDeliveries::Outcome::kAccepted);
  }
  void on_tracker_reject(proton::tracker& t) override {
    settle(t, SubscriberDeliveries::Outcome::kRejected);
  }
  void on_tracker_release(proton::tracker& t) override {
    settle(t, SubscriberDeliveries::Outcome::kReleased);
  }

  void settle(const proton::tracker& t, SubscriberDeliveries::Outcome outcome) {
    (outcome == SubscriberDeliveries::Outcome::kAccepted ? counters->acknowledged
                                                         : counters->not_acknowledged)
        .fetch_add(1, std::memory_order_relaxed);
    auto id = link_ids.find(t.sender());
    auto sub = id == link_ids.end() ? subscribers.end() : subscribers.find(id->second);
    if (sub == subscribers.end()) return;
    const uint64_t link = sub->first;
    sub->second.deliveries.settle(t, outcome, [this, link] { drain(link); });
  }

  void on_message(proton::delivery& d, proton::message& m) override {
    const bool presettled = d.settled();
    receive(d, m, presettled);
    // Proton frees a delivery once both ends settled it: a pre-settled one
    // needs no outcome, only this settle (without it every at-most-once
    // message stayed in memory until its link closed).
    if (presettled) d.settle();
  }

  void receive(proton::delivery& d, const proton::message& m, bool presettled) {
    auto id = link_ids.find(d.receiver());
    auto link = id == link_ids.end() ? publishers.end() : publishers.find(id->second);
    if (link == publishers.end()) {
      if (!presettled) d.release();
      return;
    }
    PublisherLink& pub = link->second;
    // Sized before anything else looks at it: beyond the limit the link
    // announced on attach, what the message holds does not matter.
    m.encode(encoded);
    if (auto refusal = admission->admitMessage(encoded.size())) {
      if (!presettled) {
        rejectWithCondition(d, proton::error_condition(kMessageSizeExceeded, *refusal));
        bump(pub.stats->rejected);
      }
      replenish(pub);
      return;
    }
    if (pub.replies) {
      // A provider's answer (request_router.h).
      std::optional<proton::error_condition> rejection = requests.providerReply(m);
      if (!presettled) {
        if (rejection) {
          rejectWithCondition(d, *rejection);
        } else {
          d.accept();
        }
      }
      replenish(pub);
      return;
    }
    MappedEvent mapped = eventFromMessage(m);
    if (!mapped.event) {
      counters->malformed.fetch_add(1, std::memory_order_relaxed);
      if (!presettled) {
        rejectWithCondition(d, proton::error_condition(mapped.condition, mapped.description));
        bump(pub.stats->rejected);
      }
      replenish(pub);
      return;
    }

    if (!m.reply_to().empty()) {
      request(pub, d, m, std::move(mapped.event), presettled);
      replenish(pub);
      return;
    }
    flows::Exchange exchange;
    exchange.event = std::move(mapped.event);
    exchange.address = pub.address;
    exchange.sender = sender;
    // In transit to the subscribers it will reach from now until they take it.
    for (const auto& outbox : pub.targets) outbox->dispatched();
    std::shared_ptr<PublishSettlement> listener;
    if (!presettled) {
      exchange.qos = flows::Qos::kReliable;
      listener = std::make_shared<PublishSettlement>();
      exchange.listener = listener;
    }
    const bool journaling = !presettled && journaledRoute(context.broker.policy(), pub.address);
    flows::SendOutcome out = context.broker.publish(exchange);
    counters->published.fetch_add(1, std::memory_order_relaxed);
    std::vector<std::string> congested;
    if (listener) congested = listener->published();
    const PublishVerdict verdict = PublishVerdict::of(out, journaling);
    if (!presettled) {
      if (verdict.refused) {
        d.release();
        counters->released.fetch_add(1, std::memory_order_relaxed);
        bump(pub.stats->released);
      } else if (verdict.commits > 0) {
        awaitCommits(link->first, pub, d, *listener, verdict.commits);
      } else {
        d.accept();
        counters->accepted.fetch_add(1, std::memory_order_relaxed);
        bump(pub.stats->accepted);
      }
    }
    if (verdict.pause) pause(link->first, pub, std::move(congested));
    replenish(pub);
  }

  void on_receiver_close(proton::receiver& r) override { forgetLink(r, false); }
  void on_sender_close(proton::sender& s) override { forgetLink(s, false); }
  // A detach (not a close) keeps a durable subscription.
  void on_sender_detach(proton::sender& s) override { forgetLink(s, true); }

  void awaitCommits(uint64_t link, PublisherLink& pub, proton::delivery& d,
                    PublishSettlement& listener, uint32_t commits) {
    const uint64_t key = ++pub.next_awaiting;
    pub.awaiting.emplace(key, d);
    counters->awaiting_commit.fetch_add(1, std::memory_order_relaxed);
    std::shared_ptr<Waker> waker = connections.wakerOf(pub.link.connection());
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
      bump(pub->second.stats->accepted);
    } else {
      it->second.release();
      counters->released.fetch_add(1, std::memory_order_relaxed);
      bump(pub->second.stats->released);
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

  // Tops the link's credit up to its room (at most a window; less while the
  // subscriber buffers it feeds fill up) unless it is held back, and keeps
  // the outstanding-credit count current (called after every change). With
  // one publishing link per buffer, buffered + in transit + its credit never
  // exceed the buffer: what it sends always fits.
  void replenish(PublisherLink& pub) {
    int credit = pub.link.active() ? pub.link.credit() : 0;
    if (!pub.hold.held() && !shutting_down && !publishing_closed && pub.link.active()) {
      const CreditGrant grant = creditOf(pub).grant(credit);
      if (grant.wait) {
        wait(pub);
      } else if (grant.add > 0) {
        pub.link.add_credit(grant.add);
        credit += grant.add;
      }
    }
    pub.hold.countCredit(credit);
  }

  // The buffers `pub` feeds, as its credit sees them (publisher_credit.h).
  // A stuck subscriber does not count (see checkStalls()).
  PublisherCredit creditOf(const PublisherLink& pub) const {
    PublisherCredit credit(options.credit_window);
    for (const auto& outbox : pub.targets) {
      credit.feeds(outbox->capacity(), outbox->load(), outbox->publishers().size(),
                   outbox->stalled());
    }
    return credit;
  }

  // No room in a subscriber buffer: credit stops until the buffers are back
  // at their low-water mark (drain() wakes it) or a stuck one is given up on
  // (the recheck timer).
  void wait(PublisherLink& pub) {
    pub.hold.wait();
    ++waiting_publishers;
    const auto now = std::chrono::steady_clock::now();
    for (const auto& outbox : pub.targets) outbox->watchFrom(now);
    scheduleRecheck(pub.id, pub);
  }

  // Credit again for a waiting link whose buffers drained (container thread).
  void resume(PublisherLink& pub) {
    if (!pub.hold.waiting() || creditOf(pub).aboveLowWater()) return;
    pub.hold.stopWaiting();
    --waiting_publishers;
    replenish(pub);
  }

  // As resume(), but as the link's connection's work, so that the credit is
  // written out at once (we may be handling another connection's event).
  void postResume(PublisherLink& pub) {
    if (!pub.hold.postResume()) return;
    const uint64_t id = pub.id;
    pub.link.connection().work_queue().add([this, id] {
      auto it = publishers.find(id);
      if (it == publishers.end()) return;
      it->second.hold.resumeRan();
      resume(it->second);
    });
  }

  // A buffer that held `pub` back and took nothing for the stall timeout
  // belongs to a stuck subscriber: it stops holding anybody back until it
  // drains to its low-water mark.
  void checkStalls(PublisherLink& pub) {
    const auto now = std::chrono::steady_clock::now();
    for (const auto& outbox : pub.targets) {
      if (outbox->checkStall(now, options.subscriber_stall_timeout)) {
        counters->subscriber_stalls.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  // Which subscriptions each publishing link feeds; after any link comes or
  // goes. Waiting links are looked at again (their buffer may be gone).
  void relink() {
    for (auto& [id, sub] : subscribers) sub.outbox->clearPublishers();
    for (auto& [id, pub] : publishers) {
      pub.targets.clear();
      if (pub.replies) continue;
      for (auto& [sub_id, sub] : subscribers) {
        if (sub.endpoint.empty() || !router::topicMatches(sub.pattern, pub.address.name())) {
          continue;
        }
        pub.targets.push_back(sub.outbox);
        sub.outbox->addPublisher(id);
      }
    }
    for (auto& [id, pub] : publishers) {
      // Not for a link whose connection is going away (its work would not run).
      if (pub.hold.waiting() && connections.find(pub.link.connection()) != nullptr) {
        postResume(pub);
      }
    }
  }

  void pause(uint64_t id, PublisherLink& pub, std::vector<std::string> congested) {
    pub.hold.pause(std::move(congested));
    scheduleRecheck(id, pub);
  }

  void scheduleRecheck(uint64_t id, PublisherLink& pub) {
    if (!pub.hold.scheduleRecheck()) return;
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
    pub.hold.recheckRan();
    if (pub.hold.waiting()) {
      checkStalls(pub);
      resume(pub);
      if (pub.hold.waiting()) scheduleRecheck(id, pub);
    }
    if (!pub.hold.paused()) return;
    if (stagesSaturated(context.broker.policy(), pub.hold.congested())) {
      scheduleRecheck(id, pub);
      return;
    }
    pub.hold.unpause();
    replenish(pub);
  }

  void drain(uint64_t id) {
    auto it = subscribers.find(id);
    if (it == subscribers.end()) return;
    SubscriberLink& sub = it->second;
    if (!sub.link.active()) return;
    const int n = sub.deliveries.sendable(sub.link.credit(), unsentDeliveries(sub.link));
    for (OutboxEntry& entry : sub.outbox->take(n)) {
      if (entry.answer) {
        proton::tracker t = sub.link.send(*entry.answer);
        sub.deliveries.sent(t, std::move(entry), sentSettled(t));
        continue;
      }
      proton::message& m = outgoing;
      messageFromEvent(*entry.event, m);
      if (entry.request.pattern == flows::Pattern::kInOut) {
        requests.sendingToProvider(entry.request, m);
      }
      if (entry.delivery_count > 0) {
        m.delivery_count(entry.delivery_count);
        m.first_acquirer(false);
        counters->redelivered.fetch_add(1, std::memory_order_relaxed);
        bump(sub.outbox->stats().redelivered);
      } else {
        m.first_acquirer(true);
      }
      proton::tracker t = sub.link.send(m);
      sub.deliveries.sent(t, std::move(entry), sentSettled(t));
    }
    if (!sub.outbox->drainedToLowWater() || waiting_publishers == 0) return;
    for (uint64_t pub_id : sub.outbox->publishers()) {
      auto pub = publishers.find(pub_id);
      if (pub != publishers.end() && pub->second.hold.waiting()) postResume(pub->second);
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
      admission->linkClosed(pub->second.connection);
      unregisterLink(pub->second.entry);
      if (pub->second.hold.waiting()) --waiting_publishers;
      pub->second.hold.release();
      // Unsettled messages still waiting for a commit: the client resends them.
      counters->awaiting_commit.fetch_sub(pub->second.awaiting.size(), std::memory_order_relaxed);
      publishers.erase(pub);
    }
    if (auto sub = subscribers.find(key); sub != subscribers.end()) {
      admission->linkClosed(sub->second.connection);
      unregisterLink(sub->second.entry);
      requests.releaseReplyAddress(sub->second.pattern, key);
      closeSubscriber(sub->second, detached && sub->second.durable && !shutting_down, !detached);
      subscribers.erase(sub);
    }
    if (!shutting_down) relink();
  }

  // What the subscriber had not settled goes back
  // (SubscriberOutbox::returnUnsettled()); a kept subscription is parked.
  // `closed`: the client closed the link (BrokerSubscriptions::end()).
  void closeSubscriber(SubscriberLink& sub, bool keep, bool closed) {
    counters->subscriber_links.fetch_sub(1, std::memory_order_relaxed);
    std::vector<OutboxEntry> unsettled = sub.deliveries.takeUnsettled();
    if (keep) {
      subscriptions.park(sub.endpoint, DurableSubscription{sub.pattern, sub.outbox, sub.owner},
                         std::move(unsettled));
      return;
    }
    sub.outbox->returnUnsettled(std::move(unsettled), /*keep=*/false);
    Status ended =
        subscriptions.end(sub.endpoint, *sub.outbox, sub.durable ? &sub.owner : nullptr, closed);
    if (!ended) {
      Poco::Logger::get("cepbus.amqp")
          .warning("%s: durable subscription %s ended, but its record stays: %s", options.name,
                   sub.endpoint, ended.message());
    }
  }

  void forgetConnection(const proton::connection& c) {
    const std::optional<uint64_t> closed = connections.close(c);
    if (!closed) return;
    const uint64_t number = *closed;
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
    for (proton::connection& c : connections.all()) {
      forgetConnection(c);
      c.close(proton::error_condition("amqp:connection:forced", "the bus is shutting down"));
    }
    if (transports == 0) container->stop();
  }

  // ---- lifecycle thread -------------------------------------------------

  // A link's registry entry (listener_stats.h); "" when a link of that name
  // already has one (another connection with the same container id): its
  // counters still count in stats().
  std::string registerLink(const std::string& container_id, const std::string& link,
                           const char* role, const std::string& address,
                           const std::shared_ptr<LinkCounters>& stats) {
    std::string name = "amqp-link:" + container_id + "/" + link;
    if (!reportLink(context.registry, name, options.name, role, address, stats)) return {};
    return name;
  }
  void unregisterLink(const std::string& name) {
    if (!name.empty()) context.registry.remove(name);
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

  // After the container thread ended: what a closing that never happened left.
  void releaseAll() {
    for (auto& [id, sub] : subscribers) {
      unregisterLink(sub.entry);
      closeSubscriber(sub, false, false);
    }
    subscribers.clear();
    subscriptions.endParked();
    for (auto& [id, pub] : publishers) {
      unregisterLink(pub.entry);
      pub.hold.countCredit(0);
    }
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
  const std::shared_ptr<ListenerCounters> counters = std::make_shared<ListenerCounters>();
  // Container thread only (its refusal counts: any thread).
  const std::shared_ptr<AmqpAdmission> admission = std::make_shared<AmqpAdmission>(options.limits);
  // The sender of what this listener publishes (told apart in SubscriberOutbox::offer).
  const Symbol sender = Symbol::intern(options.name);
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
  size_t waiting_publishers = 0;  // publishing links with `waiting` set
  ClientConnections connections{admission, counters};
  std::map<proton::link, uint64_t> link_ids;
  std::map<uint64_t, PublisherLink> publishers;
  std::map<uint64_t, SubscriberLink> subscribers;
  BrokerSubscriptions subscriptions{
      context.broker, admission, counters,
      SubscriptionConfig{options.subscriber_buffer, options.durable_buffer, sender, options.name}};
  RequestRouter requests{counters};  // reply addresses, requests open at AMQP providers
  proton::message outgoing;   // reused for every event sent to a subscriber (its allocations stay)
  std::vector<char> encoded;  // reused to size every message received
  std::shared_ptr<router::ComponentEntry> entry;  // the listener's registry entry
};

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
  if (Status restored = impl.restoreDurable(); !restored) {
    impl.subscriptions.endParked();
    return restored;
  }
  impl.container = std::make_unique<proton::container>(impl, impl.options.name);
  try {
    impl.listener = impl.container->listen(impl.address(), impl.listen);
  } catch (const std::exception& e) {
    impl.container.reset();
    impl.subscriptions.endParked();
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
    impl.subscriptions.endParked();
    return status;
  }
  impl.running = true;
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

std::unique_ptr<Service> makeAmqpListener(const descriptor::AmqpListener& listener,
                                          ServiceContext& context, std::string journal) {
  AmqpListenerOptions options;
  options.name = "amqp-listener";
  options.journal = std::move(journal);
  options.credit_window = listener.credit_window.value_or(options.credit_window);
  options.subscriber_buffer =
      static_cast<size_t>(listener.subscriber_buffer.value_or(options.subscriber_buffer));
  options.durable_buffer =
      static_cast<size_t>(listener.durable_buffer.value_or(options.durable_buffer));
  if (listener.request_timeout_ms) {
    options.request_timeout = std::chrono::milliseconds(*listener.request_timeout_ms);
  }
  if (listener.subscriber_stall_timeout_ms) {
    options.subscriber_stall_timeout =
        std::chrono::milliseconds(*listener.subscriber_stall_timeout_ms);
  }
  AmqpLimits& limits = options.limits;
  limits.max_connections = listener.max_connections.value_or(limits.max_connections);
  limits.max_sessions = listener.max_sessions.value_or(limits.max_sessions);
  limits.max_links = listener.max_links.value_or(limits.max_links);
  limits.max_durable = listener.max_durable.value_or(limits.max_durable);
  limits.max_pending_requests = listener.max_pending_requests.value_or(limits.max_pending_requests);
  limits.max_message_size = listener.max_message_size.value_or(limits.max_message_size);

  return std::make_unique<AmqpListenerService>(listener, std::move(options), context);
}

}  // namespace cepbus::services::amqp
