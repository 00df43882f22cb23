#pragma once

// ClientHandler: one client connection of the AMQP listener
// (services/amqp/listener/amqp_listener.h) — the Proton handler of its events, and
// the owner of everything that is only its own: its links, what they hold
// and send, the scratch messages. It makes the Proton calls for the
// connection; what it needs of the listener's shared part (admission, the
// link directory, the router, request/response) it asks through a
// ConnectionHost (services/amqp/listener/connection_host.h), never the listener
// itself.
//
// - A receiving link (the client publishes) maps each message to an event
//   and hands it to the host to route, settling the delivery by the verdict
//   (publish_settlement.h); its credit follows the subscriber buffers it
//   feeds (publisher_credit.h) and the stages that held it back
//   (publisher_hold.h). A message with reply-to is a request.
// - A sending link (the client subscribes) takes what its outbox holds
//   while it has credit, within its in-flight bound
//   (subscriber_deliveries.h), and hears the subscriber's outcomes.
//
// Thread-safety: a connection's links, their holds, deliveries and scratch
// buffers are touched only by that connection's events and work, which
// Proton serializes (one at a time, on whichever container thread): no lock.
// Other threads reach it through its connection's Waker only (its
// proton::work_queue, one wake per batch of work, work_coalescer.h): an
// event for a subscriber (SubscriberOutbox's wake, held to the end of the
// burst it came in after the first: flows::WakeHold), a drained buffer resuming a
// waiting publisher (PublisherWake), a relink telling a publisher which
// buffers it feeds now (setTargets()), a commit or an answer. finished()
// may be read from any thread; postShutdown() and releaseAll() are the
// listener's, as they say.
// Ownership: made and freed by the listener (once finished()); holds the
// Proton handles of its connection and links (not owning) and shares the
// outboxes of its subscriptions.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <proton/connection.hpp>
#include <proton/delivery.hpp>
#include <proton/link.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/session.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/symbol.h"
#include "bus/core/wire_names.h"
#include "flows/exchange.h"
#include "flows/wake_hold.h"
#include "services/amqp/listener/client_connections.h"
#include "services/amqp/listener/connection_host.h"
#include "services/amqp/listener/listener_stats.h"
#include "services/amqp/listener/publish_settlement.h"
#include "services/amqp/listener/publisher_credit.h"
#include "services/amqp/listener/publisher_hold.h"
#include "services/amqp/listener/publisher_wake.h"
#include "services/amqp/listener/subscriber_deliveries.h"
#include "services/amqp/listener/subscriber_outbox.h"
#include "services/amqp/listener/unsettled_budget.h"
#include "services/amqp/listener/work_coalescer.h"
#include "services/protocols/amqp/access_control.h"
#include "services/protocols/amqp/message_mapping.h"

namespace cepbus::services::amqp {

// The largest frame a client may send (the listener's connection option).
// Proton bounds what a session buffers of incoming messages (the handler
// sets its capacity to twice max-message-size plus two frames) only when
// frames are bounded too, and then lets the peer send the capacity divided
// by the frame size in transfers at a time, however small the messages: with
// 64 KiB frames and the default 1 MiB limit, 34, a third of the default
// credit window, so a flood of small messages came in a third of a window
// per round trip. So the frame is at most 64 KiB, and a power of two small
// enough that a session takes `credit_window` transfers, but never below
// AMQP's minimum of 512 bytes (a small limit under a large window keeps
// fewer transfers under way).
uint32_t maxFrameSize(uint64_t max_message_size, uint32_t credit_window);

// What every connection's handler is given, fixed when the listener starts
// (AmqpListenerOptions).
struct ClientHandlerOptions {
  uint32_t credit_window = 100;
  uint64_t max_message_size = 0;
  uint32_t max_frame_size = 64 * 1024;  // the connections' (maxFrameSize())
  std::chrono::milliseconds request_timeout{30000};
  std::chrono::milliseconds recheck_interval{20};
  std::chrono::milliseconds subscriber_stall_timeout{1000};
  Symbol sender;  // the sender of what the listener publishes
  std::shared_ptr<const AccessControl> access;
  std::shared_ptr<ListenerCounters> counters;  // the listener's
  uint64_t max_unsettled = 10000;              // per connection (unsettled_budget.h)
  uint64_t max_bytes_in_flight = 64 << 20;     // per connection
};

class ClientHandler final : public proton::messaging_handler {
 public:
  ClientHandler(ConnectionHost& host, ClientHandlerOptions options);

  // True once the connection's last event returned: the handler may go.
  bool finished() const { return finished_.load(std::memory_order_acquire); }

  // ---- the connection's events ----
  void on_connection_open(proton::connection& c) override;
  void on_session_open(proton::session& s) override;
  void on_session_close(proton::session& s) override;
  void on_receiver_open(proton::receiver& r) override;
  void on_sender_open(proton::sender& s) override;
  void on_sendable(proton::sender& s) override;
  // A subscriber's outcome (subscriber_deliveries.h).
  void on_tracker_accept(proton::tracker& t) override;
  void on_tracker_reject(proton::tracker& t) override;
  void on_tracker_release(proton::tracker& t) override;
  void on_message(proton::delivery& d, proton::message& m) override;
  void on_receiver_close(proton::receiver& r) override;
  // A publishing link keeps nothing for later: a detach ends it as a close does.
  void on_receiver_detach(proton::receiver& r) override;
  void on_sender_close(proton::sender& s) override;
  // A detach (not a close) keeps a durable subscription.
  void on_sender_detach(proton::sender& s) override;
  void on_connection_close(proton::connection& c) override;
  void on_transport_open(proton::transport&) override;
  void on_transport_close(proton::transport& t) override;
  // The default handler throws out of container::run(); a failing client
  // must not take the listener down. The close handlers clean up.
  void on_error(const proton::error_condition&) override {}

  // ---- the listener's ----
  // The buffers publishing link `id` feeds now (ConnectionHost relinks):
  // on this connection, as its work or during its own call to the host.
  void setTargets(uint64_t id, FedOutboxes targets);
  // The listener stops (any thread, control lock held): this connection
  // closes itself, as its own work.
  void postShutdown();
  // After the container threads ended: what a closing that never happened
  // left goes back to the host; work added from now on is refused.
  void releaseAll();

 private:
  struct PublisherLink {
    PublisherLink(uint64_t link_id, proton::receiver receiver,
                  std::shared_ptr<ListenerCounters> counters)
        : link(std::move(receiver)), id(link_id), hold(std::move(counters), stats) {}

    proton::receiver link;
    uint64_t id = 0;
    // What its events carry as Exchange::source (flows::newSource()).
    const uint64_t source = flows::newSource();
    // Its target address: a client's is a held name, held while the link is open.
    SharedName address;
    bool replies = false;  // a provider's link to kReplyAddress
    // Its unsettled messages are journaled on their route (ConnectionHost::journaled()).
    bool journaled = false;
    std::shared_ptr<LinkCounters> stats = std::make_shared<LinkCounters>();
    PublisherHold hold;                   // why it gets no more credit now (publisher_hold.h)
    std::shared_ptr<PublisherWake> wake;  // how drained buffers resume it
    // Unsettled messages whose journal commits are awaited (reliable routes),
    // with their encoded sizes (held in the connection's UnsettledBudget).
    std::map<uint64_t, std::pair<proton::delivery, uint64_t>> awaiting;
    uint64_t next_awaiting = 0;
    std::string entry;  // its registry entry ("" when it has none)
    // The outboxes of the subscribing links its address matches, and of
    // those matching what relays make of its events (setTargets()).
    FedOutboxes targets;
    // The message it is handed next, sized before Proton decoded it, when
    // it had arrived whole behind the one before (on_message()).
    WaitingMessage next;
  };
  struct SubscriberLink {
    SubscriberLink(proton::sender sender, Subscription taken,
                   std::shared_ptr<ListenerCounters> counters)
        : link(std::move(sender)),
          subscription(std::move(taken)),
          deliveries(subscription.outbox, std::move(counters)) {}

    SubscriberOutbox& outbox() { return *subscription.outbox; }

    proton::sender link;
    Subscription subscription;
    SubscriberDeliveries deliveries;  // sent, not yet settled by the subscriber
    // Its source when a plain address: a client's is a held name, held while the link is open.
    SharedName address;
  };

  // Refuses a link beyond max-links (true when refused).
  bool refuseLink(proton::link& l);
  void watchIncompleteMessages();
  void endOversizedIncomplete();
  SubscriberOutbox::Wake wakeDrain(uint64_t id);
  static proton::sender_options subscriberLinkOptions(const proton::sender& s);
  void openReplyLink(proton::sender& s);

  void request(PublisherLink& pub, proton::delivery& d, const proton::message& m, EventPtr event,
               bool presettled);
  void settle(const proton::tracker& t, SubscriberDeliveries::Outcome outcome);
  // The link's record, nullptr when the link is not (or no longer) known.
  PublisherLink* receive(proton::delivery& d, const proton::message& m, bool presettled);
  void awaitCommits(PublisherLink& pub, proton::delivery& d, PublishSettlement& listener,
                    uint32_t commits, uint64_t bytes);
  // Refuses an unsettled message beyond the connection's UnsettledBudget
  // (true when refused).
  bool refuseUnsettled(PublisherLink& pub, proton::delivery& d, uint64_t bytes);
  // A delivery the budget held is settled: links it kept from credit get it.
  void unsettledSettled(uint64_t bytes);
  void settleCommitted(uint64_t link, uint64_t key, bool accepted);

  void replenish(PublisherLink& pub);
  // Counts the credit `pub` now holds, for the listener and the connection.
  void countCredit(PublisherLink& pub, int credit);
  PublisherCredit creditOf(const PublisherLink& pub) const;
  void wait(PublisherLink& pub);
  void resume(PublisherLink& pub);
  void resumeWaiting(uint64_t id);
  void checkStalls(PublisherLink& pub);
  void pause(PublisherLink& pub, std::vector<std::string> congested);
  void scheduleRecheck(PublisherLink& pub);
  void recheck(uint64_t id);

  void drain(uint64_t id);
  // Records that a publishing link's source ended (flows::sourceEnds()).
  void endSource(const proton::link& l);
  void forgetLink(const proton::link& l, bool detached);
  // Frees the link the peer detached once Proton has answered (message_mapping.h, freeLink()).
  void freeWhenAnswered(const proton::link& l);
  void freeEndedLinks();
  void forgetConnection(const proton::connection& c);

  ConnectionHost& host_;
  const ClientHandlerOptions options_;
  ListenerCounters& counters_;              // options_.counters
  std::optional<ClientConnection> client_;  // once admitted
  proton::connection connection_;           // once admitted, until its transport closed
  std::map<proton::link, uint64_t> link_ids_;
  std::map<uint64_t, PublisherLink> publishers_;
  std::map<uint64_t, SubscriberLink> subscribers_;
  std::vector<proton::link> ended_links_;  // detached by their peers, to free (freeWhenAnswered())
  UnsettledBudget unsettled_;              // what its unsettled publishes hold
  // A link got less credit than it would have for want of room in
  // unsettled_: settlements top the links up again.
  bool credit_short_ = false;
  proton::message outgoing_;   // reused for every event sent to a subscriber (its allocations stay)
  std::vector<char> encoded_;  // reused to size a message received that was not sized before
  bool incomplete_watch_ = false;  // watchIncompleteMessages() is scheduled
  // What the burst being read holds: lent to each publish (host_.publish()),
  // flushed when the burst ends (on_message()).
  flows::WakeHold burst_wakes_;
  std::atomic<bool> finished_{false};
};

}  // namespace cepbus::services::amqp
