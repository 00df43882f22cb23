#pragma once

// ConnectionHost: what one client connection's handler (ClientHandler,
// services/amqp/listener/client_handler.h) asks of the AMQP listener it belongs to
// (services/amqp/listener/amqp_listener.h) — the listener's shared part, which the
// handler reaches through this interface only. Each call is one thing the
// handler needs done across connections: admit a connection, session, link
// or message; make a link known to the listener (its directory, registry
// entry and the publishers feeding each subscription: relink) or forget it;
// route a publish or a request; answer a request. What the handler owns
// itself (its links, their credit and deliveries) never goes through here.
//
// Thread-safety: every call may be made from any container thread (each
// connection from the thread serving it at the time); the host locks what
// it shares. Calls that take the listener's control lock are named so
// below; a publish takes no shared lock. Ownership: the host outlives every
// handler it made; what a call takes by value (outboxes, wakers, wakes) is
// shared with it.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <proton/connection.hpp>
#include <proton/error_condition.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/session.hpp>
#include <string>
#include <variant>
#include <vector>

#include "bus/core/status.h"
#include "bus/core/symbol.h"
#include "bus/core/wire_names.h"
#include "flows/exchange.h"
#include "flows/wake_hold.h"
#include "services/amqp/listener/broker_subscriptions.h"
#include "services/amqp/listener/client_connections.h"
#include "services/amqp/listener/listener_stats.h"
#include "services/amqp/listener/publish_settlement.h"
#include "services/amqp/listener/publisher_wake.h"
#include "services/amqp/listener/subscriber_outbox.h"

namespace cepbus::services::amqp {

class ClientHandler;

// A publishing link the listener is to know: its directory entry (which
// subscriptions it feeds) and its registry entry.
struct PublisherAttach {
  uint64_t link = 0;             // its number (ConnectionHost::newLinkId())
  std::string container_id;      // its client's
  std::string name;              // the link's
  std::string address;           // its target address
  SharedName topic;              // the same, as a symbol (held while the link is)
  bool replies = false;          // a provider's link to kReplyAddress: it feeds no subscription
  std::shared_ptr<Waker> waker;  // its connection's
  std::shared_ptr<PublisherWake> wake;  // how drained buffers resume it
  std::shared_ptr<LinkCounters> stats;
};

// A subscribing link asking for its subscription (BrokerSubscriptions::open()).
struct SubscriberAttach {
  uint64_t connection = 0;  // its connection's number (AmqpAdmission's key)
  uint64_t link = 0;        // its number (ConnectionHost::newLinkId())
  std::string container_id;
  std::string name;     // the link's
  std::string pattern;  // its source address, a valid pattern
  bool durable = false;
  std::string user;             // "" when anonymous
  std::string owner;            // whose max-durable a durable one counts against ("" otherwise)
  SubscriberOutbox::Wake wake;  // drains the link, as its connection's work
};

// What a subscribing link took: kept by the link, handed back when it goes.
struct Subscription {
  std::string endpoint;  // its broker endpoint ("" for a reply link)
  std::string pattern;   // its source address
  std::shared_ptr<SubscriberOutbox> outbox;
  bool durable = false;
  std::string owner;  // a durable one's (max-durable)
  std::string entry;  // its registry entry ("" when it has none)
};

class ConnectionHost {
 public:
  virtual ~ConnectionHost() = default;

  // ---- the listener's state ----
  // The listener stops: connections are refused and closed, links no more
  // kept for their subscribers.
  virtual bool shuttingDown() const = 0;
  // Publishing links may be granted credit (neither stopping nor draining).
  virtual bool creditOpen() const = 0;
  // A number for a link, unique in the listener (connections share the sequence).
  virtual uint64_t newLinkId() = 0;
  // Runs `fn` after `delay` on a container thread (any: `fn` reaches its
  // connection through its Waker). A connection's own timed work would
  // outlive the connection in Proton 0.37 and crash when it fired after a close.
  virtual void schedule(std::chrono::milliseconds delay, std::function<void()> fn) = 0;

  // ---- connections and sessions (control lock) ----
  // Admits authenticated connection `c` of `user`: its record, or the
  // refusal (beyond max-connections) to close it with.
  virtual std::variant<ClientConnection, std::string> admitConnection(const proton::connection& c,
                                                                      std::string user) = 0;
  virtual SessionAdmission openSession(const proton::session& s) = 0;
  virtual void sessionClosed(const proton::session& s) = 0;
  // Forgets connection `c`: its number, nullopt when it was not open.
  virtual std::optional<uint64_t> closeConnection(const proton::connection& c) = 0;
  virtual void transportOpened() = 0;
  // The last event of `handler`'s connection runs: the listener frees the
  // handler once finished(), and stops when it was the last while shutting down.
  virtual void transportClosed(ClientHandler& handler) = 0;

  // ---- links (control lock) ----
  // Admits one more link of connection `connection`: nullopt, or the
  // refusal (beyond max-links) to close it with.
  virtual std::optional<std::string> admitLink(uint64_t connection) = 0;
  // The listener knows publishing link `attach.link` of `owner` from now on
  // and tells every publishing link what it feeds (owner's own at once, by
  // ClientHandler::setTargets()). Its registry entry ("" when it has none).
  virtual std::string attachPublisher(ClientHandler& owner, const PublisherAttach& attach) = 0;
  // Publishing link `link` of connection `connection` is gone.
  virtual void detachPublisher(ClientHandler& owner, uint64_t connection, uint64_t link,
                               const std::string& entry) = 0;
  // The subscription of a subscribing link, made or resumed, known to the
  // listener (a plain address also takes answers to requests), or why the
  // attach is refused (its link admission is undone then).
  virtual std::variant<Subscription, BrokerSubscriptions::Refusal> subscribe(
      ClientHandler& owner, const SubscriberAttach& attach) = 0;
  // A receiver with a dynamic source: an address the listener names, that
  // only carries answers to the requests naming it as reply-to.
  virtual Subscription subscribeReplies(uint64_t link, const std::string& container_id,
                                        const std::string& name, SubscriberOutbox::Wake wake) = 0;
  // Subscribing link `link` is gone, with what its subscriber had not settled.
  // `detached`: without a close (a detach, or its connection ended), which
  // keeps a durable subscription, parked, unless the listener stops.
  virtual void detachSubscriber(ClientHandler& owner, uint64_t connection, uint64_t link,
                                Subscription subscription, std::vector<OutboxEntry> unsettled,
                                bool detached) = 0;
  // After the container threads ended: what a closing that never happened left.
  virtual void releasePublisher(const std::string& entry) = 0;
  virtual void releaseSubscriber(Subscription subscription, std::vector<OutboxEntry> unsettled) = 0;

  // ---- publishing (no shared lock) ----
  // Checks a message's encoded size against max-message-size: nullopt, or
  // the refusal to reject it with.
  virtual std::optional<std::string> admitMessage(uint64_t bytes) = 0;
  // Whether an unsettled publish to `address` goes through a flow that
  // journals it, so that its accept waits for the commits. The routes are
  // fixed for the listener's life, so a publishing link asks once, on attach.
  virtual bool journaled(Symbol address) = 0;
  // Hands `exchange` to the router; what becomes of the client's delivery.
  // `journaled`: an unsettled publish on a journaled route (journaled()).
  // `burst`: the connection's hold over the wakes of the burst it reads,
  // lent to the deliveries that run inside the publish (flows/wake_hold.h).
  virtual PublishVerdict publish(flows::Exchange& exchange, bool journaled,
                                 flows::WakeHold& burst) = 0;
  // Whether a stage that held a link back (PublishSettlement::published())
  // is still saturated.
  virtual bool congested(const std::vector<std::string>& stages) = 0;
  // A publishing link starts (true) or stops waiting for room in a subscriber buffer.
  virtual void publisherWaits(bool waiting) = 0;
  // Whether any publishing link waits: a drained buffer then wakes those it feeds.
  virtual bool publishersWaiting() const = 0;

  // ---- request/response ----
  // Admits one more open request of `connection` (control lock): nullopt,
  // or the refusal (beyond max-pending-requests).
  virtual std::optional<std::string> admitRequest(uint64_t connection) = 0;
  // Sends an admitted request to the provider of its address. Its answer
  // goes to `reply_to`, made on the requester's connection through `waker`,
  // which ends the request there; when it cannot be sent it ends at once
  // and the error says why (kNotFound: no provider; kUnavailable: paused).
  virtual Status sendRequest(uint64_t connection, flows::Exchange exchange,
                             std::chrono::nanoseconds timeout, std::shared_ptr<Waker> waker,
                             std::string reply_to, proton::message_id correlation) = 0;
  // Sends an answer to the link whose address is `reply_to`, wherever it is.
  virtual void answer(const std::string& reply_to, const proton::message_id& correlation,
                      flows::OutcomeKind kind, const Status& status, const EventPtr& reply) = 0;
  // A provider's answer to a request the bus sent it: nullopt, or why it is rejected.
  virtual std::optional<proton::error_condition> takeProviderReply(const proton::message& m) = 0;
  // Marks `m`, an in-out `request` about to go to an AMQP provider, so that
  // its answer finds the request.
  virtual void stampProviderRequest(const flows::Exchange& request, proton::message& m) = 0;
};

}  // namespace cepbus::services::amqp
