// The AMQP listener (amqp_listener.h): a ClientHandler per connection gets
// that connection's Proton events, on whichever container thread serves it,
// and makes the Proton calls; Impl holds what the connections share (see
// its comment for which thread owns what). Together they wire the parts
// below, each with one job, no pointer back to the
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
//   work_coalescer.h         one wake per batch of work for a connection
//   subscriber_deliveries.h  what a subscribing link has in flight, its outcomes
//   in_flight_bound.h        how much a subscribing link may have in flight
//   durable_parking.h        durable subscriptions whose subscriber is away
//   durable_store.h          durable subscriptions recorded in the journal
//   request_router.h         reply addresses, requests open at AMQP providers
//   route_pressure.h         what the delivery policy says about a publish
//   listener_stats.h         the counters and the registry entries

#include "services/amqp/amqp_listener.h"

#include <Poco/Logger.h>

#include <algorithm>
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
#include "services/amqp/publisher_wake.h"
#include "services/amqp/request_router.h"
#include "services/amqp/route_pressure.h"
#include "services/amqp/sasl_plugin.h"
#include "services/amqp/subscriber_deliveries.h"
#include "services/amqp/subscriber_outbox.h"
#include "services/amqp/work_coalescer.h"

namespace cepbus::services::amqp {
namespace {

constexpr char kUnauthorized[] = "amqp:unauthorized-access";

// The largest frame a client may send. Proton bounds what a session buffers
// of incoming messages (sessionCapacity()) only when frames are bounded too.
constexpr uint32_t kMaxFrameSize = 64 * 1024;

// What one session buffers of incoming messages, whole or not: two at
// max-message-size (two links of a session may each have one under way),
// then the peer's transfers wait. A message far beyond the limit stalls
// there instead of filling memory, and the listener ends its link.
size_t sessionCapacity(uint64_t max_message_size) {
  return 2 * static_cast<size_t>(max_message_size) + 2 * kMaxFrameSize;
}

}  // namespace

// The listener's shared part: what every connection's handler reaches, the
// service life cycle, and the state that is the listener's as a whole. Who
// owns what, with N container threads:
//
// - A connection's links, their holds, deliveries and scratch buffers are its
//   ClientHandler's (below), touched only by that connection's events and
//   work, which Proton serializes: no lock.
// - Crossing connections goes through the target connection's Waker (its
//   proton::work_queue, one wake per batch of work): an event for a
//   subscriber (SubscriberOutbox's wake, held to the end of the burst it
//   came in after the first: WakeHold), a drained buffer resuming a waiting
//   publisher (PublisherWake), a relink telling a publisher which buffers it
//   feeds now.
// - What a publisher reads of another connection's buffers per message (load,
//   publisher count, stalled) is atomic (SubscriberOutbox).
// - What is global — admission counts, the connections' sessions, broker
//   subscriptions and durable parking, the link directory relink() reads —
//   is guarded by control_mu, taken on the control path only (open, attach,
//   detach, close) and for an in-out request's admission. The request
//   router's tables have their own requests_mu, taken for requests and
//   answers only. A publish takes neither.
// - Counters are atomics (listener_stats.h).
struct AmqpListenerService::Impl {
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
      options.handler(impl_.newHandler()).sasl_enabled(true).max_frame_size(kMaxFrameSize);
      if (impl_.tls) options.ssl_server_options(*impl_.tls);
      return options;
    }
    void on_error(proton::listener&, const std::string& what) override {
      impl_.opened(Status::ioError(impl_.config.where.toString() + ": <amqp> cannot listen on " +
                                   impl_.address() + ": " + what));
    }
    Impl& impl_;
  };

  struct ClientHandler;

  // What relink() knows of every attached link (guarded by control_mu).
  struct PublisherEntry {
    Symbol address;
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

  // One client connection: the Proton handler of its events, and the owner
  // of everything that is only its own — its links, what they hold and send,
  // the scratch messages. Used by the connection's events and work only
  // (Proton runs them one at a time, on whichever container thread), so none
  // of it is locked; what it shares goes through Impl (see above).
  struct ClientHandler final : public proton::messaging_handler {
    struct PublisherLink {
      PublisherLink(uint64_t link_id, proton::receiver receiver,
                    std::shared_ptr<ListenerCounters> counters)
          : link(std::move(receiver)), id(link_id), hold(std::move(counters), stats) {}

      proton::receiver link;
      uint64_t id = 0;
      Symbol address;
      bool replies = false;  // a provider's link to kReplyAddress
      std::shared_ptr<LinkCounters> stats = std::make_shared<LinkCounters>();
      PublisherHold hold;                   // why it gets no more credit now (publisher_hold.h)
      std::shared_ptr<PublisherWake> wake;  // how drained buffers resume it
      // Unsettled messages whose journal commits are awaited (reliable routes).
      std::map<uint64_t, proton::delivery> awaiting;
      uint64_t next_awaiting = 0;
      std::string entry;  // its registry entry ("" when it has none)
      // The outboxes of the subscribing links its address matches (relink()).
      std::vector<std::shared_ptr<SubscriberOutbox>> targets;
    };
    struct SubscriberLink {
      SubscriberLink(proton::sender sender, std::shared_ptr<SubscriberOutbox> subscription,
                     std::shared_ptr<ListenerCounters> counters)
          : link(std::move(sender)),
            outbox(std::move(subscription)),
            deliveries(outbox, std::move(counters)) {}

      proton::sender link;
      std::shared_ptr<SubscriberOutbox> outbox;
      SubscriberDeliveries deliveries;  // sent, not yet settled by the subscriber
      std::string endpoint;             // its broker endpoint ("" for a reply link)
      std::string pattern;              // its source address
      bool durable = false;
      std::string entry;  // its registry entry ("" when it has none)
      std::string owner;  // a durable one's (max-durable)
    };

    explicit ClientHandler(Impl& listener) : impl(listener) {}

    // True once the connection's last event returned: the handler may go.
    bool finished() const { return finished_.load(std::memory_order_acquire); }

    // ---- the connection's events -----------------------------------------

    void on_connection_open(proton::connection& c) override {
      if (impl.shutting_down) {
        c.close(proton::error_condition("amqp:connection:forced", "the bus is shutting down"));
        return;
      }
      Result<std::string> user =
          authenticatedUser(c.transport().sasl().mech(), c.user(), impl.access->allowsAnonymous());
      if (!user) {
        c.close(proton::error_condition(kUnauthorized, user.status().message()));
        return;
      }
      {
        std::lock_guard lock(impl.control_mu);
        if (auto refusal = impl.connections.open(c, ++impl.next_id, std::move(*user))) {
          c.close(proton::error_condition(kResourceLimitExceeded, *refusal));
          return;
        }
        client = *impl.connections.find(c);
      }
      connection_ = c;
      c.open();
    }

    void on_session_open(proton::session& s) override {
      SessionAdmission admitted;
      {
        std::lock_guard lock(impl.control_mu);
        admitted = impl.connections.openSession(s);
      }
      switch (admitted.verdict) {
        case SessionAdmission::Verdict::kAdmitted:
          setIncomingCapacity(s, sessionCapacity(impl.options.limits.max_message_size));
          s.open();
          break;
        case SessionAdmission::Verdict::kRefused:
          s.close(proton::error_condition(kResourceLimitExceeded, admitted.refusal));
          break;
        case SessionAdmission::Verdict::kUnknownConnection:
          break;
      }
    }
    void on_session_close(proton::session& s) override {
      std::lock_guard lock(impl.control_mu);
      impl.connections.sessionClosed(s);
    }

    // Refuses a link beyond max-links (true when refused).
    bool refuseLink(proton::link& l) {
      std::optional<std::string> refusal;
      {
        std::lock_guard lock(impl.control_mu);
        refusal = impl.admission->admitLink(client->id);
      }
      if (refusal) l.close(proton::error_condition(kResourceLimitExceeded, *refusal));
      return refusal.has_value();
    }

    void on_receiver_open(proton::receiver& r) override {
      if (!client) return;
      std::string addr = r.target().address();
      const bool replies = addr == kReplyAddress;
      if (replies) {
        // Any client may answer: a reply completes only a request the bus
        // sent to it, found by its correlation id.
      } else if (Status valid = router::validateAddress(addr); !valid) {
        r.close(proton::error_condition(
            kInvalidField, "target address \"" + addr + "\": " + valid.message() +
                               " (publish to a topic; wildcards are for subscribing)"));
        return;
      }
      if (!replies && !impl.access->mayPublish(client->user, addr)) {
        r.close(proton::error_condition(
            kUnauthorized, "user \"" + client->user + "\" may not publish to \"" + addr + "\""));
        return;
      }
      // The address becomes a symbol for as long as the process lives: a
      // client that opens links to ever new addresses spends the budget of
      // names clients may create, not the symbol table the queries need.
      const std::optional<Symbol> address = internWireName(addr);
      if (!address) {
        r.close(proton::error_condition(kResourceLimitExceeded,
                                        wireNameRefusal("target address", addr)));
        return;
      }
      if (refuseLink(r)) return;
      setMaxMessageSize(r, impl.options.limits.max_message_size);
      r.open(proton::receiver_options().credit_window(0).auto_accept(false).target(
          proton::target_options().address(addr)));
      const uint64_t id = ++impl.next_id;
      link_ids[r] = id;
      PublisherLink& pub = publishers.try_emplace(id, id, r, impl.counters).first->second;
      pub.address = *address;
      pub.replies = replies;
      pub.wake = std::make_shared<PublisherWake>(client->waker, [this, id] { resumeWaiting(id); });
      pub.entry = impl.registerLink(client->container_id, r.name(), "publish", addr, pub.stats);
      {
        std::lock_guard lock(impl.control_mu);
        impl.publisher_dir[id] = PublisherEntry{*address, replies, this, client->waker, pub.wake};
        impl.relink(this);
      }
      replenish(pub);
      watchIncompleteMessages();
    }

    // Proton hands a message over only whole, so one far beyond
    // max-message-size would be refused only once it had all arrived. The
    // session's capacity (sessionCapacity()) stalls it part-way instead; once
    // a second, while the connection publishes, this ends the link of a
    // message more than twice the limit that is still arriving, with
    // amqp:link:message-size-exceeded. (One up to twice the limit fits in the
    // session whole and receive() refuses it, the link staying up.) The
    // timer is the container's, as in scheduleRecheck().
    void watchIncompleteMessages() {
      if (incomplete_watch_ || !client) return;
      incomplete_watch_ = true;
      impl.container->schedule(proton::duration(1000), [this, waker = client->waker] {
        waker->add([this] { endOversizedIncomplete(); });
      });
    }

    void endOversizedIncomplete() {
      incomplete_watch_ = false;
      const uint64_t limit = impl.options.limits.max_message_size;
      for (auto& [id, pub] : publishers) {
        const size_t bytes = incompleteMessageBytes(pub.link);
        if (bytes <= 2 * limit || !pub.link.active()) continue;
        if (auto refusal = impl.admission->admitMessage(bytes)) {
          bump(pub.stats->rejected);
          pub.link.close(proton::error_condition(
              kMessageSizeExceeded,
              "message of more than " + std::to_string(bytes) +
                  " bytes exceeds max-message-size=" + std::to_string(limit) +
                  " (it had not arrived whole: a session takes at most twice that of messages "
                  "under way); link closed"));
        }
      }
      if (!publishers.empty()) watchIncompleteMessages();
    }

    void on_sender_open(proton::sender& s) override {
      if (!client) return;
      if (s.source().dynamic()) {
        if (!refuseLink(s)) openReplyLink(s);
        return;
      }
      std::string pattern = s.source().address();
      if (Status valid = router::validatePattern(pattern); !valid) {
        s.close(proton::error_condition(kInvalidField,
                                        "source address \"" + pattern + "\": " + valid.message()));
        return;
      }
      if (!impl.access->maySubscribe(client->user, pattern)) {
        s.close(proton::error_condition(
            kUnauthorized,
            "user \"" + client->user + "\" may not subscribe to \"" + pattern + "\""));
        return;
      }
      if (refuseLink(s)) return;
      const bool durable = s.source().durability_mode() != proton::source::NONDURABLE;
      const uint64_t id = ++impl.next_id;
      std::unique_lock lock(impl.control_mu);
      auto opened =
          impl.subscriptions.open(client->container_id, s.name(), pattern, durable, client->user,
                                  durable ? client->owner() : std::string(), wakeDrain(id));
      if (const auto* refusal = std::get_if<BrokerSubscriptions::Refusal>(&opened)) {
        impl.admission->linkClosed(client->id);
        lock.unlock();
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
      SubscriberLink& sub = subscribers.try_emplace(id, s, outbox, impl.counters).first->second;
      sub.endpoint = endpoint;
      sub.pattern = pattern;
      sub.durable = durable;
      sub.entry = impl.registerLink(client->container_id, s.name(), "subscribe", pattern,
                                    outbox->sharedStats());
      sub.owner = std::move(owner);
      impl.counters->subscriber_links.fetch_add(1, std::memory_order_relaxed);
      impl.subscriber_dir[id] = SubscriberEntry{pattern, true, outbox};
      if (!router::hasWildcard(pattern)) {
        // Answers to requests whose reply-to names this address come here.
        std::lock_guard requests_lock(impl.requests_mu);
        impl.requests.offerReplyAddress(pattern, id);
        impl.reply_outboxes[id] = outbox;
      }
      impl.relink(this);
    }

    // What an outbox bound to subscribing link `id` calls when an event
    // arrives (any thread): drain the link, as this connection's work.
    SubscriberOutbox::Wake wakeDrain(uint64_t id) {
      return [this, waker = client->waker, id] { return waker->add([this, id] { drain(id); }); };
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
    void openReplyLink(proton::sender& s) {
      const uint64_t id = ++impl.next_id;
      const std::string address = RequestRouter::dynamicAddress(id);
      std::lock_guard lock(impl.control_mu);
      auto outbox = impl.subscriptions.replyOutbox(wakeDrain(id));
      s.open(subscriberLinkOptions(s).source(proton::source_options().address(address)));
      link_ids[s] = id;
      SubscriberLink& sub = subscribers.try_emplace(id, s, outbox, impl.counters).first->second;
      sub.pattern = address;
      sub.entry = impl.registerLink(client->container_id, s.name(), "replies", address,
                                    outbox->sharedStats());
      impl.counters->subscriber_links.fetch_add(1, std::memory_order_relaxed);
      impl.subscriber_dir[id] = SubscriberEntry{address, false, outbox};
      std::lock_guard requests_lock(impl.requests_mu);
      impl.requests.assignReplyAddress(address, id);
      impl.reply_outboxes[id] = outbox;
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
      const std::chrono::nanoseconds timeout =
          RequestRouter::timeoutOf(m, impl.options.request_timeout);
      flows::Exchange exchange;
      exchange.event = std::move(event);
      exchange.address = pub.address;
      const uint64_t connection = client->id;
      std::optional<std::string> refusal;
      {
        std::lock_guard lock(impl.control_mu);
        refusal = impl.admission->admitRequest(connection);
      }
      if (refusal) {
        if (presettled) {
          impl.answer(reply_to, correlation, flows::OutcomeKind::kRejected,
                      Status::rejected(*refusal), nullptr);
        } else {
          rejectWithCondition(d, proton::error_condition(kResourceLimitExceeded, *refusal));
          impl.counters->rejected.fetch_add(1, std::memory_order_relaxed);
          bump(pub.stats->rejected);
        }
        return;
      }
      impl.counters->requests.fetch_add(1, std::memory_order_relaxed);
      Impl* listener = &impl;
      Result<uint64_t> id = impl.context.broker.request(
          exchange, timeout,
          [listener, waker = client->waker, reply_to, correlation,
           connection](const flows::Outcome& outcome) {
            // Any thread: the answer is made on the requester's connection,
            // which ends the request there (max-pending-requests).
            waker->add([listener, reply_to, correlation, connection, kind = outcome.kind,
                        status = outcome.status, reply = outcome.reply] {
              {
                std::lock_guard lock(listener->control_mu);
                listener->admission->requestEnded(connection);
              }
              listener->answer(reply_to, correlation, kind, status, reply);
            });
          });
      if (id) {
        if (!presettled) {
          d.accept();
          impl.counters->accepted.fetch_add(1, std::memory_order_relaxed);
          bump(pub.stats->accepted);
        }
        return;
      }
      {
        std::lock_guard lock(impl.control_mu);
        impl.admission->requestEnded(connection);
      }
      const Status& why = id.status();
      if (presettled) {
        impl.answer(reply_to, correlation, flows::OutcomeKind::kRejected, why, nullptr);
      } else if (why.code() == Status::Code::kUnavailable) {
        d.release();
        impl.counters->released.fetch_add(1, std::memory_order_relaxed);
        bump(pub.stats->released);
      } else {
        rejectWithCondition(
            d,
            proton::error_condition(
                why.code() == Status::Code::kNotFound ? kNotFound : kInvalidField, why.message()));
        impl.counters->rejected.fetch_add(1, std::memory_order_relaxed);
        bump(pub.stats->rejected);
      }
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
      (outcome == SubscriberDeliveries::Outcome::kAccepted ? impl.counters->acknowledged
                                                           : impl.counters->not_acknowledged)
          .fetch_add(1, std::memory_order_relaxed);
      auto id = link_ids.find(t.sender());
      auto sub = id == link_ids.end() ? subscribers.end() : subscribers.find(id->second);
      if (sub == subscribers.end()) return;
      const uint64_t link = sub->first;
      sub->second.deliveries.settle(t, outcome, [this, link] { drain(link); });
    }

    void on_message(proton::delivery& d, proton::message& m) override {
      const bool presettled = d.settled();
      const proton::receiver r = d.receiver();
      {
        // The connections this message wakes: each at once the first time in
        // a burst, then held until the burst was read (work_coalescer.h).
        WakeHold::Scope hold(&burst_wakes);
        receive(d, m, presettled);
      }
      // Proton frees a delivery once both ends settled it: a pre-settled one
      // needs no outcome, only this settle (without it every at-most-once
      // message stayed in memory until its link closed).
      if (presettled) d.settle();
      // The burst ends with the last whole message read from the socket for
      // this link: what is held never waits for the network.
      if (!messageWaiting(r)) burst_wakes.flush();
    }

    // The publishing path: nothing here takes a lock shared with another
    // connection (an in-out request or a provider's answer aside).
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
      if (auto refusal = impl.admission->admitMessage(encoded.size())) {
        if (!presettled) {
          rejectWithCondition(d, proton::error_condition(kMessageSizeExceeded, *refusal));
          bump(pub.stats->rejected);
        }
        replenish(pub);
        return;
      }
      if (pub.replies) {
        // A provider's answer (request_router.h).
        std::optional<proton::error_condition> rejection;
        {
          std::lock_guard lock(impl.requests_mu);
          rejection = impl.requests.providerReply(m);
        }
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
        impl.counters->malformed.fetch_add(1, std::memory_order_relaxed);
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
      exchange.sender = impl.sender;
      // In transit to the subscribers it will reach from now until they take it.
      for (const auto& outbox : pub.targets) outbox->dispatched();
      std::shared_ptr<PublishSettlement> listener;
      if (!presettled) {
        exchange.qos = flows::Qos::kReliable;
        listener = std::make_shared<PublishSettlement>();
        exchange.listener = listener;
      }
      const bool journaling =
          !presettled && journaledRoute(impl.context.broker.policy(), pub.address);
      flows::SendOutcome out = impl.context.broker.publish(exchange);
      impl.counters->published.fetch_add(1, std::memory_order_relaxed);
      std::vector<std::string> congested;
      if (listener) congested = listener->published();
      const PublishVerdict verdict = PublishVerdict::of(out, journaling);
      if (!presettled) {
        if (verdict.refused) {
          d.release();
          impl.counters->released.fetch_add(1, std::memory_order_relaxed);
          bump(pub.stats->released);
        } else if (verdict.commits > 0) {
          awaitCommits(pub, d, *listener, verdict.commits);
        } else {
          d.accept();
          impl.counters->accepted.fetch_add(1, std::memory_order_relaxed);
          bump(pub.stats->accepted);
        }
      }
      if (verdict.pause) pause(pub, std::move(congested));
      replenish(pub);
    }

    void on_receiver_close(proton::receiver& r) override {
      forgetLink(r, false);
      burst_wakes.flush();  // a burst it was reading ends with it
    }
    void on_sender_close(proton::sender& s) override { forgetLink(s, false); }
    // A detach (not a close) keeps a durable subscription.
    void on_sender_detach(proton::sender& s) override { forgetLink(s, true); }

    void awaitCommits(PublisherLink& pub, proton::delivery& d, PublishSettlement& listener,
                      uint32_t commits) {
      const uint64_t key = ++pub.next_awaiting;
      pub.awaiting.emplace(key, d);
      impl.counters->awaiting_commit.fetch_add(1, std::memory_order_relaxed);
      listener.awaitCommits(
          commits, [this, waker = client->waker, link = pub.id, key](bool accepted) {
            // From the journal thread (or this one): settle on this connection.
            waker->add([this, link, key, accepted] { settleCommitted(link, key, accepted); });
          });
    }

    void settleCommitted(uint64_t link, uint64_t key, bool accepted) {
      auto pub = publishers.find(link);
      if (pub == publishers.end()) return;
      auto it = pub->second.awaiting.find(key);
      if (it == pub->second.awaiting.end()) return;
      if (accepted) {
        it->second.accept();
        impl.counters->accepted.fetch_add(1, std::memory_order_relaxed);
        bump(pub->second.stats->accepted);
      } else {
        it->second.release();
        impl.counters->released.fetch_add(1, std::memory_order_relaxed);
        bump(pub->second.stats->released);
      }
      pub->second.awaiting.erase(it);
      impl.counters->awaiting_commit.fetch_sub(1, std::memory_order_relaxed);
    }

    void on_connection_close(proton::connection& c) override { forgetConnection(c); }
    void on_transport_open(proton::transport&) override { ++impl.transports; }
    void on_transport_close(proton::transport& t) override {
      forgetConnection(t.connection());
      burst_wakes.flush();
      // The connection's handles go on its own thread, before anyone frees us.
      link_ids.clear();
      publishers.clear();
      subscribers.clear();
      connection_ = proton::connection();
      const size_t open = impl.transportClosed();
      // The container would wait for its scheduled work to time out as well;
      // once the last client is gone there is nothing left to wait for.
      if (impl.shutting_down && open == 0) impl.container->stop();
      impl.retire(*this);
      finished_.store(true, std::memory_order_release);  // the last use of this
    }
    // The default handler throws out of container::run(); a failing client
    // must not take the listener down. The close handlers above clean up.
    void on_error(const proton::error_condition&) override {}

    // ---- publisher credit ---------------------------------------------------

    // Tops the link's credit up to its room (at most a window; less while the
    // subscriber buffers it feeds fill up) unless it is held back, and keeps
    // the outstanding-credit count current (called after every change). With
    // one publishing link per buffer, buffered + in transit + its credit
    // never exceed the buffer: what it sends always fits.
    void replenish(PublisherLink& pub) {
      int credit = pub.link.active() ? pub.link.credit() : 0;
      if (!pub.hold.held() && !impl.shutting_down && !impl.publishing_closed && pub.link.active()) {
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
      PublisherCredit credit(impl.options.credit_window);
      for (const auto& outbox : pub.targets) {
        credit.feeds(outbox->capacity(), outbox->load(), outbox->publisherCount(),
                     outbox->stalled());
      }
      return credit;
    }

    // No room in a subscriber buffer: credit stops until the buffers are back
    // at their low-water mark (their drain posts resumeWaiting()) or a stuck
    // one is given up on (the recheck timer).
    void wait(PublisherLink& pub) {
      pub.hold.wait();
      pub.wake->setWaiting(true);
      ++impl.waiting_publishers;
      const auto now = std::chrono::steady_clock::now();
      for (const auto& outbox : pub.targets) outbox->watchFrom(now);
      scheduleRecheck(pub);
    }

    // Credit again for a waiting link whose buffers drained.
    void resume(PublisherLink& pub) {
      if (!pub.hold.waiting() || creditOf(pub).aboveLowWater()) return;
      pub.hold.stopWaiting();
      pub.wake->setWaiting(false);
      --impl.waiting_publishers;
      replenish(pub);
    }

    // A drained buffer's resume, posted by its subscriber's connection
    // (PublisherWake::post()).
    void resumeWaiting(uint64_t id) {
      auto it = publishers.find(id);
      if (it == publishers.end()) return;
      it->second.wake->ran();
      resume(it->second);
    }

    // The buffers link `id` feeds now (relink()).
    void setTargets(uint64_t id, std::vector<std::shared_ptr<SubscriberOutbox>> targets) {
      auto it = publishers.find(id);
      if (it == publishers.end()) return;
      it->second.targets = std::move(targets);
      resume(it->second);
    }

    // A buffer that held `pub` back and took nothing for the stall timeout
    // belongs to a stuck subscriber: it stops holding anybody back until it
    // drains to its low-water mark.
    void checkStalls(PublisherLink& pub) {
      const auto now = std::chrono::steady_clock::now();
      for (const auto& outbox : pub.targets) {
        if (outbox->checkStall(now, impl.options.subscriber_stall_timeout)) {
          impl.counters->subscriber_stalls.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }

    void pause(PublisherLink& pub, std::vector<std::string> congested) {
      pub.hold.pause(std::move(congested));
      scheduleRecheck(pub);
    }

    void scheduleRecheck(PublisherLink& pub) {
      if (!pub.hold.scheduleRecheck()) return;
      // The timer is the container's: a connection's own timed work outlives
      // the connection in Proton 0.37 and crashes when it fires after a
      // close. It runs on any container thread, so it touches nothing but
      // the Waker; the recheck itself is the connection's work, so that the
      // credit it grants is written out at once.
      impl.container->schedule(
          proton::duration(impl.options.recheck_interval.count()),
          [this, waker = client->waker, id = pub.id] { waker->add([this, id] { recheck(id); }); });
    }

    void recheck(uint64_t id) {
      auto it = publishers.find(id);
      if (it == publishers.end()) return;
      PublisherLink& pub = it->second;
      pub.hold.recheckRan();
      if (pub.hold.waiting()) {
        checkStalls(pub);
        resume(pub);
        if (pub.hold.waiting()) scheduleRecheck(pub);
      }
      if (!pub.hold.paused()) return;
      if (stagesSaturated(impl.context.broker.policy(), pub.hold.congested())) {
        scheduleRecheck(pub);
        return;
      }
      pub.hold.unpause();
      replenish(pub);
    }

    // ---- subscriber deliveries ----------------------------------------------

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
          std::lock_guard lock(impl.requests_mu);
          impl.requests.sendingToProvider(entry.request, m);
        }
        if (entry.delivery_count > 0) {
          m.delivery_count(entry.delivery_count);
          m.first_acquirer(false);
          impl.counters->redelivered.fetch_add(1, std::memory_order_relaxed);
          bump(sub.outbox->stats().redelivered);
        } else {
          m.first_acquirer(true);
        }
        proton::tracker t = sub.link.send(m);
        sub.deliveries.sent(t, std::move(entry), sentSettled(t));
      }
      if (!sub.outbox->drainedToLowWater() || impl.waiting_publishers.load() == 0) return;
      sub.outbox->wakePublishers();
    }

    // ---- links and the connection going away ------------------------------

    // `detached`: the link went away without being closed (a detach, or its
    // connection ended), which keeps a durable subscription.
    void forgetLink(const proton::link& l, bool detached) {
      auto id = link_ids.find(l);
      if (id == link_ids.end()) return;
      const uint64_t key = id->second;
      link_ids.erase(id);
      std::lock_guard lock(impl.control_mu);
      if (auto pub = publishers.find(key); pub != publishers.end()) {
        impl.admission->linkClosed(client->id);
        impl.unregisterLink(pub->second.entry);
        if (pub->second.hold.waiting()) --impl.waiting_publishers;
        pub->second.hold.release();
        pub->second.wake->setWaiting(false);
        // Unsettled messages still waiting for a commit: the client resends them.
        impl.counters->awaiting_commit.fetch_sub(pub->second.awaiting.size(),
                                                 std::memory_order_relaxed);
        impl.publisher_dir.erase(key);
        publishers.erase(pub);
      }
      if (auto sub = subscribers.find(key); sub != subscribers.end()) {
        impl.admission->linkClosed(client->id);
        impl.unregisterLink(sub->second.entry);
        {
          std::lock_guard requests_lock(impl.requests_mu);
          impl.requests.releaseReplyAddress(sub->second.pattern, key);
          impl.reply_outboxes.erase(key);
        }
        impl.subscriber_dir.erase(key);
        closeSubscriber(sub->second, detached && sub->second.durable && !impl.shutting_down,
                        !detached);
        subscribers.erase(sub);
      }
      if (!impl.shutting_down) impl.relink(this);
    }

    // What the subscriber had not settled goes back
    // (SubscriberOutbox::returnUnsettled()); a kept subscription is parked.
    // `closed`: the client closed the link (BrokerSubscriptions::end()).
    // control_mu held.
    void closeSubscriber(SubscriberLink& sub, bool keep, bool closed) {
      impl.counters->subscriber_links.fetch_sub(1, std::memory_order_relaxed);
      std::vector<OutboxEntry> unsettled = sub.deliveries.takeUnsettled();
      if (keep) {
        impl.subscriptions.park(sub.endpoint,
                                DurableSubscription{sub.pattern, sub.outbox, sub.owner},
                                std::move(unsettled));
        return;
      }
      sub.outbox->returnUnsettled(std::move(unsettled), /*keep=*/false);
      Status ended = impl.subscriptions.end(sub.endpoint, *sub.outbox,
                                            sub.durable ? &sub.owner : nullptr, closed);
      if (!ended) {
        Poco::Logger::get("cepbus.amqp")
            .warning("%s: durable subscription %s ended, but its record stays: %s",
                     impl.options.name, sub.endpoint, ended.message());
      }
    }

    void forgetConnection(const proton::connection& c) {
      std::optional<uint64_t> closed;
      {
        std::lock_guard lock(impl.control_mu);
        closed = impl.connections.close(c);
      }
      if (!closed) return;
      std::vector<proton::link> links;
      for (const auto& [link, key] : link_ids) links.push_back(link);
      for (const auto& l : links) forgetLink(l, true);
    }

    // The listener stops (any thread, control_mu held): this connection
    // closes itself, as its own work.
    void postShutdown() {
      if (!client) return;
      client->waker->add([this] {
        if (!connection_) return;
        proton::connection c = connection_;
        forgetConnection(c);
        c.close(proton::error_condition("amqp:connection:forced", "the bus is shutting down"));
      });
    }

    // After the container threads ended (control_mu held): what a closing
    // that never happened left.
    void releaseAll() {
      for (auto& [id, sub] : subscribers) {
        impl.unregisterLink(sub.entry);
        closeSubscriber(sub, false, false);
      }
      subscribers.clear();
      for (auto& [id, pub] : publishers) {
        impl.unregisterLink(pub.entry);
        pub.hold.countCredit(0);
      }
      publishers.clear();
      link_ids.clear();
      connection_ = proton::connection();
      // Work added from now on (a request's answer, a commit) is refused.
      if (client) client->waker->close();
    }

    Impl& impl;
    std::optional<ClientConnection> client;  // once admitted
    proton::connection connection_;          // once admitted, until its transport closed
    std::map<proton::link, uint64_t> link_ids;
    std::map<uint64_t, PublisherLink> publishers;
    std::map<uint64_t, SubscriberLink> subscribers;
    proton::message outgoing;  // reused for every event sent to a subscriber (its allocations stay)
    std::vector<char> encoded;       // reused to size every message received
    bool incomplete_watch_ = false;  // watchIncompleteMessages() is scheduled
    WakeHold burst_wakes;            // what the burst being read holds (on_message())
    std::atomic<bool> finished_{false};
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

  // The handler of a connection being accepted (any container thread). The
  // handlers of connections that ended are freed here, once their last event
  // has returned.
  ClientHandler& newHandler() {
    std::lock_guard lock(control_mu);
    std::erase_if(retired, [](const std::unique_ptr<ClientHandler>& h) { return h->finished(); });
    auto handler = std::make_unique<ClientHandler>(*this);
    ClientHandler& h = *handler;
    handlers.emplace(&h, std::move(handler));
    return h;
  }

  // A connection's last event ran: its handler is freed by a later accept,
  // or when the listener stops.
  void retire(ClientHandler& h) {
    std::lock_guard lock(control_mu);
    auto it = handlers.find(&h);
    if (it == handlers.end()) return;
    retired.push_back(std::move(it->second));
    handlers.erase(it);
  }

  // ---- control path (control_mu held) ------------------------------------

  // Which subscriptions each publishing link feeds; after any link comes or
  // goes. `caller`'s own links take theirs at once (it is running); the
  // others' go to them as their connections' work. A waiting link is looked
  // at again when it takes them (its buffer may be gone).
  void relink(ClientHandler* caller) {
    std::map<uint64_t, std::vector<std::shared_ptr<SubscriberOutbox>>> targets;
    for (auto& [sub_id, sub] : subscriber_dir) {
      std::vector<std::shared_ptr<PublisherWake>> feeding;
      for (auto& [pub_id, pub] : publisher_dir) {
        if (pub.replies || !sub.has_endpoint ||
            !router::topicMatches(sub.pattern, pub.address.name())) {
          continue;
        }
        targets[pub_id].push_back(sub.outbox);
        feeding.push_back(pub.wake);
      }
      sub.outbox->setPublishers(std::move(feeding));
    }
    for (auto& [pub_id, pub] : publisher_dir) {
      auto found = targets.find(pub_id);
      std::vector<std::shared_ptr<SubscriberOutbox>> mine;
      if (found != targets.end()) mine = std::move(found->second);
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

  // ---- request/response ---------------------------------------------------

  // Sends the answer to a request to the link whose address is `reply_to`,
  // on whatever connection it is: the outbox wakes it.
  void answer(const std::string& reply_to, const proton::message_id& correlation,
              flows::OutcomeKind kind, const Status& status, const EventPtr& reply) {
    std::shared_ptr<SubscriberOutbox> outbox;
    OutboxEntry entry;
    {
      std::lock_guard lock(requests_mu);
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
    if (listener_open) listener.stop();
    {
      std::lock_guard lock(control_mu);
      for (auto& [h, handler] : handlers) handler->postShutdown();
    }
    if (transports.load() == 0) container->stop();
  }

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

  // After the container threads ended: what a closing that never happened left.
  void releaseAll() {
    std::lock_guard lock(control_mu);
    for (auto& [h, handler] : handlers) handler->releaseAll();
    handlers.clear();
    retired.clear();
    subscriptions.endParked();
    publisher_dir.clear();
    subscriber_dir.clear();
    connections.clear();
  }

  // One network connection fewer; how many are left. Never below 0: a
  // transport may close without having been counted open (refused early).
  size_t transportClosed() {
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

  const descriptor::AmqpListener config;
  const AmqpListenerOptions options;
  ServiceContext& context;
  const std::shared_ptr<const AccessControl> access;
  std::optional<proton::ssl_server_options> tls;  // set by start() when configured
  Listen listen;
  const std::shared_ptr<ListenerCounters> counters = std::make_shared<ListenerCounters>();
  // Guarded by control_mu (its refusal counts and admitMessage(): any thread).
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

  // Set before the container runs; used by shutdown() only.
  proton::listener listener;
  std::atomic<bool> listener_open{false};  // the handle above is only valid while true
  std::atomic<bool> shutting_down{false};
  // Set by deactivate(): publishers get no more credit (the bus is draining).
  std::atomic<bool> publishing_closed{false};
  std::atomic<size_t> transports{0};  // open network connections, refused ones included
  std::atomic<uint64_t> next_id{0};
  std::atomic<size_t> waiting_publishers{0};  // publishing links waiting for room

  std::mutex control_mu;
  ClientConnections connections{admission, counters};  // guarded by control_mu
  BrokerSubscriptions subscriptions{
      // guarded by control_mu
      context.broker, admission, counters,
      SubscriptionConfig{options.subscriber_buffer, options.durable_buffer, sender, options.name}};
  std::map<uint64_t, PublisherEntry> publisher_dir;    // guarded by control_mu
  std::map<uint64_t, SubscriberEntry> subscriber_dir;  // guarded by control_mu
  // Every connection's handler, by address, until its last event ran.
  std::map<ClientHandler*, std::unique_ptr<ClientHandler>> handlers;  // guarded by control_mu
  std::vector<std::unique_ptr<ClientHandler>> retired;                // guarded by control_mu

  std::mutex requests_mu;            // taken after control_mu when both are
  RequestRouter requests{counters};  // guarded by requests_mu
  // The subscribing links that may receive answers, by link number.
  std::map<uint64_t, std::shared_ptr<SubscriberOutbox>> reply_outboxes;  // guarded by requests_mu

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
  impl.container = std::make_unique<proton::container>(impl.options.name);
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
      impl.container->run(static_cast<int>(impl.threads()));
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
  options.threads = listener.threads.value_or(options.threads);
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
