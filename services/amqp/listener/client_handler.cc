// ClientHandler (client_handler.h): one connection's Proton events, in the
// order of the connection's life — opening, its links attaching, messages
// published and requests made, deliveries to subscribers, publisher credit,
// and links and the connection going away.

#include "services/amqp/listener/client_handler.h"

#include <algorithm>
#include <bit>
#include <proton/delivery_mode.hpp>
#include <proton/error_condition.hpp>
#include <proton/message_id.hpp>
#include <proton/receiver_options.hpp>
#include <proton/sasl.hpp>
#include <proton/source.hpp>
#include <proton/source_options.hpp>
#include <proton/target.hpp>
#include <proton/target_options.hpp>
#include <utility>
#include <variant>

#include "bus/core/wire_names.h"
#include "flows/exchange.h"
#include "flows/source_ends.h"
#include "router/topic.h"
#include "services/amqp/listener/request_router.h"
#include "services/protocols/amqp/message_mapping.h"
#include "services/protocols/amqp/sasl_plugin.h"

namespace cepbus::services::amqp {
namespace {

constexpr char kUnauthorized[] = "amqp:unauthorized-access";

// What one session buffers of incoming messages, whole or not: two at
// max-message-size (two links of a session may each have one under way),
// then the peer's transfers wait. A message far beyond the limit stalls
// there instead of filling memory, and the handler ends its link.
size_t sessionCapacity(uint64_t max_message_size, uint32_t max_frame_size) {
  return 2 * static_cast<size_t>(max_message_size) + 2 * static_cast<size_t>(max_frame_size);
}

}  // namespace

uint32_t maxFrameSize(uint64_t max_message_size, uint32_t credit_window) {
  constexpr uint64_t kLargest = 64 * 1024;
  constexpr uint64_t kSmallest = 512;  // AMQP's minimum max-frame-size
  const uint64_t fits = 2 * max_message_size / std::max<uint64_t>(credit_window, 1);
  return static_cast<uint32_t>(std::clamp(std::bit_floor(fits), kSmallest, kLargest));
}

ClientHandler::ClientHandler(ConnectionHost& host, ClientHandlerOptions options)
    : host_(host),
      options_(std::move(options)),
      counters_(*options_.counters),
      unsettled_(options_.max_unsettled, options_.max_bytes_in_flight) {}

// ---- the connection's events -----------------------------------------

void ClientHandler::on_connection_open(proton::connection& c) {
  // The handshake is over: its deadline no longer applies, whatever this
  // open is answered (handshake_watch.h).
  connectionOpened(rawTransport(c.transport()));
  if (host_.shuttingDown()) {
    c.close(proton::error_condition("amqp:connection:forced", "the bus is shutting down"));
    return;
  }
  Result<std::string> user =
      authenticatedUser(c.transport().sasl().mech(), c.user(), options_.access->allowsAnonymous());
  if (!user) {
    c.close(proton::error_condition(kUnauthorized, user.status().message()));
    return;
  }
  auto admitted = host_.admitConnection(c, std::move(*user));
  if (const auto* refusal = std::get_if<std::string>(&admitted)) {
    c.close(proton::error_condition(kResourceLimitExceeded, *refusal));
    return;
  }
  client_ = std::move(std::get<ClientConnection>(admitted));
  unsettled_.shareWith(client_->user_unsettled);
  connection_ = c;
  c.open();
}

void ClientHandler::on_session_open(proton::session& s) {
  const SessionAdmission admitted = host_.openSession(s);
  switch (admitted.verdict) {
    case SessionAdmission::Verdict::kAdmitted:
      setIncomingCapacity(s, sessionCapacity(options_.max_message_size, options_.max_frame_size));
      s.open();
      break;
    case SessionAdmission::Verdict::kRefused:
      s.close(proton::error_condition(kResourceLimitExceeded, admitted.refusal));
      break;
    case SessionAdmission::Verdict::kUnknownConnection:
      break;
  }
}
void ClientHandler::on_session_close(proton::session& s) { host_.sessionClosed(s); }

// Refuses a link beyond max-links (true when refused).
bool ClientHandler::refuseLink(proton::link& l) {
  const std::optional<std::string> refusal = host_.admitLink(client_->id);
  if (refusal) l.close(proton::error_condition(kResourceLimitExceeded, *refusal));
  return refusal.has_value();
}

void ClientHandler::on_receiver_open(proton::receiver& r) {
  if (!client_) return;
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
  if (!replies && !options_.access->mayPublish(client_->user, addr)) {
    r.close(proton::error_condition(
        kUnauthorized, "user \"" + client_->user + "\" may not publish to \"" + addr + "\""));
    return;
  }
  // A new address is a held name, charged to the client (max-names) while
  // the link and the exchanges it sent hold it, and given back after: a
  // client that opens links to ever new addresses spends its own share of
  // the names clients may create, not another client's, nor the symbol
  // table the queries need.
  std::optional<NameHold> address = holdWireName(addr, client_->names.get());
  if (!address) {
    r.close(proton::error_condition(kResourceLimitExceeded,
                                    wireNameRefusal("target address", addr, client_->names.get())));
    return;
  }
  if (refuseLink(r)) return;
  setMaxMessageSize(r, options_.max_message_size);
  r.open(proton::receiver_options().credit_window(0).auto_accept(false).target(
      proton::target_options().address(addr)));
  const uint64_t id = host_.newLinkId();
  link_ids_[r] = id;
  PublisherLink& pub = publishers_.try_emplace(id, id, r, options_.counters).first->second;
  pub.address = SharedName(std::move(*address));
  pub.replies = replies;
  pub.journaled = !replies && host_.journaled(pub.address);
  pub.wake = std::make_shared<PublisherWake>(client_->waker, [this, id] { resumeWaiting(id); });
  pub.entry = host_.attachPublisher(
      *this, PublisherAttach{id, client_->container_id, r.name(), addr, pub.address, replies,
                             client_->waker, pub.wake, pub.stats});
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
void ClientHandler::watchIncompleteMessages() {
  if (incomplete_watch_ || !client_) return;
  incomplete_watch_ = true;
  host_.schedule(std::chrono::milliseconds(1000), [this, waker = client_->waker] {
    waker->add([this] { endOversizedIncomplete(); });
  });
}

void ClientHandler::endOversizedIncomplete() {
  incomplete_watch_ = false;
  const uint64_t limit = options_.max_message_size;
  for (auto& [id, pub] : publishers_) {
    const size_t bytes = incompleteMessageBytes(pub.link);
    if (bytes <= 2 * limit || !pub.link.active()) continue;
    if (auto refusal = host_.admitMessage(bytes)) {
      bump(pub.stats->rejected);
      pub.link.close(proton::error_condition(
          kMessageSizeExceeded,
          "message of more than " + std::to_string(bytes) +
              " bytes exceeds max-message-size=" + std::to_string(limit) +
              " (it had not arrived whole: a session takes at most twice that of messages "
              "under way); link closed"));
    }
  }
  if (!publishers_.empty()) watchIncompleteMessages();
}

void ClientHandler::on_sender_open(proton::sender& s) {
  if (!client_) return;
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
  if (!options_.access->maySubscribe(client_->user, pattern)) {
    s.close(proton::error_condition(
        kUnauthorized, "user \"" + client_->user + "\" may not subscribe to \"" + pattern + "\""));
    return;
  }
  // A plain address the bus does not know is a held name charged to the
  // client (max-names) while the link holds it, as a publishing link's
  // target is: it provides the address for requests meanwhile. A pattern
  // with wildcards is no name.
  std::optional<NameHold> address;
  if (!router::hasWildcard(pattern)) {
    address = holdWireName(pattern, client_->names.get());
    if (!address) {
      s.close(proton::error_condition(
          kResourceLimitExceeded,
          wireNameRefusal("source address", pattern, client_->names.get())));
      return;
    }
  }
  if (refuseLink(s)) return;
  const bool durable = s.source().durability_mode() != proton::source::NONDURABLE;
  const uint64_t id = host_.newLinkId();
  auto opened = host_.subscribe(
      *this,
      SubscriberAttach{client_->id, id, client_->container_id, s.name(), pattern, durable,
                       client_->user, durable ? client_->owner() : std::string(), wakeDrain(id)});
  if (const auto* refusal = std::get_if<BrokerSubscriptions::Refusal>(&opened)) {
    s.close(proton::error_condition(refusal->condition, refusal->description));
    return;
  }
  proton::source_options source;
  source.address(pattern);
  if (durable) {
    source.durability_mode(s.source().durability_mode()).expiry_policy(proton::source::NEVER);
  }
  s.open(subscriberLinkOptions(s).source(source));
  link_ids_[s] = id;
  SubscriberLink& sub =
      subscribers_.try_emplace(id, s, std::move(std::get<Subscription>(opened)), options_.counters)
          .first->second;
  if (address) sub.address = SharedName(std::move(*address));
}

// What an outbox bound to subscribing link `id` calls when an event
// arrives (any thread): drain the link, as this connection's work.
SubscriberOutbox::Wake ClientHandler::wakeDrain(uint64_t id) {
  return [this, waker = client_->waker, id](flows::WakeHold* hold) {
    return waker->add([this, id] { drain(id); }, hold);
  };
}

// An at-most-once receiver gets its messages pre-settled, as it asked: it
// sends no outcomes, so unsettled ones would be held for it forever.
proton::sender_options ClientHandler::subscriberLinkOptions(const proton::sender& s) {
  proton::sender_options options;
  if (asksPresettled(s)) options.delivery_mode(proton::delivery_mode::AT_MOST_ONCE);
  return options;
}

// A receiver attached with a dynamic source: the bus names an address
// that only carries answers to the requests naming it as reply-to.
void ClientHandler::openReplyLink(proton::sender& s) {
  const uint64_t id = host_.newLinkId();
  Subscription replies = host_.subscribeReplies(id, client_->container_id, s.name(), wakeDrain(id));
  s.open(subscriberLinkOptions(s).source(proton::source_options().address(replies.pattern)));
  link_ids_[s] = id;
  subscribers_.try_emplace(id, s, std::move(replies), options_.counters);
}

// ---- request/response -------------------------------------------------

// A message with reply-to: an in-out request to the provider of the
// link's address. Its answer (reply, or a fault message) goes to the
// reply-to address with the request's correlation-id (else its
// message-id). An unsettled request is accepted once the bus took it,
// released when the route is paused, rejected (amqp:not-found) when
// nothing provides the address; a pre-settled one hears those as faults.
void ClientHandler::request(PublisherLink& pub, proton::delivery& d, const proton::message& m,
                            EventPtr event, bool presettled) {
  const std::string reply_to = m.reply_to();
  const proton::message_id correlation = RequestRouter::correlationOf(m);
  const std::chrono::nanoseconds timeout = RequestRouter::timeoutOf(m, options_.request_timeout);
  flows::Exchange exchange;
  exchange.event = std::move(event);
  exchange.address = pub.address;
  const uint64_t connection = client_->id;
  const std::optional<std::string> refusal = host_.admitRequest(connection);
  if (refusal) {
    if (presettled) {
      host_.answer(reply_to, correlation, flows::OutcomeKind::kRejected, Status::rejected(*refusal),
                   nullptr);
    } else {
      rejectWithCondition(d, proton::error_condition(kResourceLimitExceeded, *refusal));
      counters_.rejected.inc();
      bump(pub.stats->rejected);
    }
    return;
  }
  counters_.requests.inc();
  const Status why = host_.sendRequest(connection, std::move(exchange), timeout, client_->waker,
                                       reply_to, correlation);
  if (why) {
    if (!presettled) {
      d.accept();
      counters_.accepted.inc();
      bump(pub.stats->accepted);
    }
    return;
  }
  if (presettled) {
    host_.answer(reply_to, correlation, flows::OutcomeKind::kRejected, why, nullptr);
  } else if (why.code() == Status::Code::kUnavailable) {
    d.release();
    counters_.released.inc();
    bump(pub.stats->released);
  } else {
    rejectWithCondition(
        d, proton::error_condition(
               why.code() == Status::Code::kNotFound ? kNotFound : kInvalidField, why.message()));
    counters_.rejected.inc();
    bump(pub.stats->rejected);
  }
}

void ClientHandler::on_sendable(proton::sender& s) {
  auto it = link_ids_.find(s);
  if (it != link_ids_.end()) drain(it->second);
}

// A subscriber's outcome (subscriber_deliveries.h).
void ClientHandler::on_tracker_accept(proton::tracker& t) {
  settle(t, SubscriberDeliveries::Outcome::kAccepted);
}
void ClientHandler::on_tracker_reject(proton::tracker& t) {
  settle(t, SubscriberDeliveries::Outcome::kRejected);
}
void ClientHandler::on_tracker_release(proton::tracker& t) {
  settle(t, SubscriberDeliveries::Outcome::kReleased);
}

void ClientHandler::settle(const proton::tracker& t, SubscriberDeliveries::Outcome outcome) {
  (outcome == SubscriberDeliveries::Outcome::kAccepted ? counters_.acknowledged
                                                       : counters_.not_acknowledged)
      .inc();
  auto id = link_ids_.find(t.sender());
  auto sub = id == link_ids_.end() ? subscribers_.end() : subscribers_.find(id->second);
  if (sub == subscribers_.end()) return;
  const uint64_t link = sub->first;
  sub->second.deliveries.settle(t, outcome, [this, link] { drain(link); });
}

void ClientHandler::on_message(proton::delivery& d, proton::message& m) {
  const bool presettled = d.settled();
  const proton::receiver r = d.receiver();
  PublisherLink* const pub = receive(d, m, presettled);
  // Proton frees a delivery once both ends settled it: a pre-settled one
  // needs no outcome, only this settle (without it every at-most-once
  // message stayed in memory until its link closed).
  if (presettled) d.settle();
  // The next message of this link, if it is here whole: its size now, while
  // Proton has not decoded it yet (receive()).
  const WaitingMessage next = messageWaiting(r);
  if (pub != nullptr) pub->next = next;
  // The burst ends with the last whole message read from the socket for
  // this link: what is held never waits for the network.
  if (next.delivery == nullptr) burst_wakes_.flush();
}

// The publishing path: nothing here takes a lock shared with another
// connection (an in-out request or a provider's answer aside).
ClientHandler::PublisherLink* ClientHandler::receive(proton::delivery& d, const proton::message& m,
                                                     bool presettled) {
  auto id = link_ids_.find(d.receiver());
  auto link = id == link_ids_.end() ? publishers_.end() : publishers_.find(id->second);
  if (link == publishers_.end()) {
    if (!presettled) d.release();
    return nullptr;
  }
  PublisherLink& pub = link->second;
  // Sized before anything else looks at it: beyond the limit the link
  // announced on attach, what the message holds does not matter. Most
  // messages of a burst were sized before Proton decoded them (on_message());
  // the first of a burst is encoded again, which costs more than mapping it
  // to an event.
  size_t bytes = pub.next.bytes;
  if (pub.next.delivery != deliveryKey(d)) {
    m.encode(encoded_);
    bytes = encoded_.size();
  }
  if (auto refusal = host_.admitMessage(bytes)) {
    if (!presettled) {
      rejectWithCondition(d, proton::error_condition(kMessageSizeExceeded, *refusal));
      bump(pub.stats->rejected);
    }
    replenish(pub);
    return &pub;
  }
  if (pub.replies) {
    // A provider's answer (request_router.h).
    const std::optional<proton::error_condition> rejection = host_.takeProviderReply(m);
    if (!presettled) {
      if (rejection) {
        rejectWithCondition(d, *rejection);
      } else {
        d.accept();
      }
    }
    replenish(pub);
    return &pub;
  }
  // Held from here until the listener settles it: a message beyond the
  // connection's budget is refused before its names cost anything.
  if (!presettled && refuseUnsettled(pub, d, bytes)) return &pub;
  MappedEvent mapped = eventFromMessage(m, client_->names.get());
  if (!mapped.event) {
    if (!presettled) unsettledSettled(bytes);
    counters_.malformed.inc();
    if (!presettled) {
      rejectWithCondition(d, proton::error_condition(mapped.condition, mapped.description));
      bump(pub.stats->rejected);
    }
    replenish(pub);
    return &pub;
  }

  if (!m.reply_to().empty()) {
    if (!presettled) unsettledSettled(bytes);  // a request is settled before it returns
    request(pub, d, m, std::move(mapped.event), presettled);
    replenish(pub);
    return &pub;
  }
  flows::Exchange exchange;
  exchange.event = std::move(mapped.event);
  exchange.address = pub.address;
  exchange.sender = options_.sender;
  exchange.source = pub.source;
  // In transit to the subscribers it will reach from now until they take it.
  for (const auto& outbox : pub.targets.direct) outbox->dispatched();
  std::shared_ptr<PublishSettlement> listener;
  if (!presettled) {
    exchange.qos = flows::Qos::kReliable;
    listener = std::make_shared<PublishSettlement>();
    exchange.listener = listener;
  }
  // The connections this message wakes: each at once the first time in a
  // burst, then held until the burst was read (flows/wake_hold.h).
  const PublishVerdict verdict =
      host_.publish(exchange, !presettled && pub.journaled, burst_wakes_);
  counters_.published.inc();
  std::vector<std::string> congested;
  if (listener) congested = listener->published();
  if (!presettled) {
    if (verdict.refused) {
      d.release();
      counters_.released.inc();
      bump(pub.stats->released);
    } else if (verdict.commits > 0) {
      awaitCommits(pub, d, *listener, verdict.commits, bytes);
    } else {
      d.accept();
      counters_.accepted.inc();
      bump(pub.stats->accepted);
    }
    if (verdict.refused || verdict.commits == 0) unsettledSettled(bytes);
  }
  if (verdict.pause) pause(pub, std::move(congested));
  replenish(pub);
  return &pub;
}

void ClientHandler::on_receiver_close(proton::receiver& r) {
  endSource(r);
  forgetLink(r, false);
  burst_wakes_.flush();  // a burst it was reading ends with it
  freeWhenAnswered(r);
}
void ClientHandler::on_receiver_detach(proton::receiver& r) { on_receiver_close(r); }
void ClientHandler::on_sender_close(proton::sender& s) {
  forgetLink(s, false);
  freeWhenAnswered(s);
}
// A detach (not a close) keeps a durable subscription.
void ClientHandler::on_sender_detach(proton::sender& s) {
  forgetLink(s, true);
  freeWhenAnswered(s);
}

// Proton answers the peer's detach (pn_link_close or pn_link_detach) after
// the handler returns, so the link is freed by work that runs after. Links
// the bus refused or closed first are freed too, once their peer answers.
// The handles stay with the handler, not in the work, so that they go on
// the connection's thread; when the connection goes first, Proton frees
// the links with it.
void ClientHandler::freeWhenAnswered(const proton::link& l) {
  if (!client_) return;
  ended_links_.push_back(l);
  if (ended_links_.size() == 1) client_->waker->add([this] { freeEndedLinks(); });
}

void ClientHandler::freeEndedLinks() {
  if (connection_) {
    for (const proton::link& l : ended_links_) {
      // Proton gives an attach of a name the link object of that name it
      // still has, unless that link is closed on both sides: a link the
      // handler tracks again is live, not freed.
      if (link_ids_.count(l) == 0) freeLink(l);
    }
  }
  ended_links_.clear();
}

bool ClientHandler::refuseUnsettled(PublisherLink& pub, proton::delivery& d, uint64_t bytes) {
  const std::optional<UnsettledBudget::Refusal> refusal = unsettled_.hold(bytes);
  if (!refusal) return false;
  switch (refusal->limit) {
    case UnsettledLimit::kDeliveries:
      counters_.unsettled_refused.inc();
      break;
    case UnsettledLimit::kBytes:
      counters_.bytes_in_flight_refused.inc();
      break;
    case UnsettledLimit::kUserDeliveries:
      counters_.user_unsettled_refused.inc();
      break;
    case UnsettledLimit::kUserBytes:
      counters_.user_bytes_in_flight_refused.inc();
      break;
  }
  rejectWithCondition(d, proton::error_condition(kResourceLimitExceeded, refusal->description));
  counters_.rejected.inc();
  bump(pub.stats->rejected);
  replenish(pub);
  return true;
}

void ClientHandler::unsettledSettled(uint64_t bytes) {
  const bool was_full = unsettled_.full();
  unsettled_.settled(bytes);
  if (unsettled_.full() || (!was_full && !credit_short_)) return;
  credit_short_ = false;
  for (auto& [id, pub] : publishers_) replenish(pub);
}

void ClientHandler::awaitCommits(PublisherLink& pub, proton::delivery& d,
                                 PublishSettlement& listener, uint32_t commits, uint64_t bytes) {
  const uint64_t key = ++pub.next_awaiting;
  pub.awaiting.emplace(key, std::pair{d, bytes});
  counters_.awaiting_commit.inc();
  listener.awaitCommits(commits, [this, waker = client_->waker, link = pub.id, key](bool accepted) {
    // From the journal thread (or this one): settle on this connection.
    waker->add([this, link, key, accepted] { settleCommitted(link, key, accepted); });
  });
}

void ClientHandler::settleCommitted(uint64_t link, uint64_t key, bool accepted) {
  auto pub = publishers_.find(link);
  if (pub == publishers_.end()) return;
  auto it = pub->second.awaiting.find(key);
  if (it == pub->second.awaiting.end()) return;
  proton::delivery& d = it->second.first;
  if (accepted) {
    d.accept();
    counters_.accepted.inc();
    bump(pub->second.stats->accepted);
  } else {
    d.release();
    counters_.released.inc();
    bump(pub->second.stats->released);
  }
  const uint64_t bytes = it->second.second;
  pub->second.awaiting.erase(it);
  counters_.awaiting_commit.dec();
  unsettledSettled(bytes);
}

void ClientHandler::on_connection_close(proton::connection& c) {
  for (const auto& [link, key] : link_ids_) endSource(link);
  forgetConnection(c);
}
void ClientHandler::on_transport_open(proton::transport&) { host_.transportOpened(); }
void ClientHandler::on_transport_close(proton::transport& t) {
  forgetConnection(t.connection());
  burst_wakes_.flush();
  // The connection's handles go on its own thread, before anyone frees us.
  link_ids_.clear();
  publishers_.clear();
  subscribers_.clear();
  ended_links_.clear();
  connection_ = proton::connection();
  host_.transportClosed(*this);
  finished_.store(true, std::memory_order_release);  // the last use of this
}

// ---- publisher credit ---------------------------------------------------

// Tops the link's credit up to its room (at most a window; less while the
// subscriber buffers it feeds fill up) unless it is held back, and keeps
// the outstanding-credit count current (called after every change). With
// one publishing link per buffer, buffered + in transit + its credit
// never exceed the buffer: what it sends always fits. Nor does the
// connection's credit pass what its UnsettledBudget leaves.
void ClientHandler::replenish(PublisherLink& pub) {
  int credit = pub.link.active() ? pub.link.credit() : 0;
  // A connection at its UnsettledBudget gets no credit until a delivery
  // settles (unsettledSettled()).
  if (!pub.hold.held() && host_.creditOpen() && pub.link.active() && !unsettled_.full()) {
    const CreditGrant grant = creditOf(pub).grant(credit);
    if (grant.wait) {
      wait(pub);
    } else if (grant.add > 0) {
      // A link without credit gets one even when the connection's other
      // links hold all the room: idle links must not starve it.
      const int64_t room =
          std::max<int64_t>(unsettled_.creditRoom(pub.hold.credit()) - credit, credit == 0 ? 1 : 0);
      const int add = static_cast<int>(std::min<int64_t>(room, grant.add));
      if (add < grant.add) credit_short_ = true;
      if (add > 0) {
        pub.link.add_credit(add);
        credit += add;
      }
    }
  }
  countCredit(pub, credit);
}

void ClientHandler::countCredit(PublisherLink& pub, int credit) {
  unsettled_.countCredit(credit - pub.hold.credit());
  pub.hold.countCredit(credit);
}

// The buffers `pub` feeds, as its credit sees them (publisher_credit.h).
// A stuck subscriber does not count (see checkStalls()).
PublisherCredit ClientHandler::creditOf(const PublisherLink& pub) const {
  PublisherCredit credit(options_.credit_window);
  pub.targets.forEach([&credit](const SubscriberOutbox& outbox) {
    credit.feeds(outbox.capacity(), outbox.load(), outbox.publisherCount(), outbox.stalled());
  });
  return credit;
}

// No room in a subscriber buffer: credit stops until the buffers are back
// at their low-water mark (their drain posts resumeWaiting()) or a stuck
// one is given up on (the recheck timer).
void ClientHandler::wait(PublisherLink& pub) {
  pub.hold.wait();
  pub.wake->setWaiting(true);
  host_.publisherWaits(true);
  const auto now = std::chrono::steady_clock::now();
  pub.targets.forEach([now](SubscriberOutbox& outbox) { outbox.watchFrom(now); });
  scheduleRecheck(pub);
}

// Credit again for a waiting link whose buffers drained.
void ClientHandler::resume(PublisherLink& pub) {
  if (!pub.hold.waiting() || creditOf(pub).aboveLowWater()) return;
  pub.hold.stopWaiting();
  pub.wake->setWaiting(false);
  host_.publisherWaits(false);
  replenish(pub);
}

// A drained buffer's resume, posted by its subscriber's connection
// (PublisherWake::post()).
void ClientHandler::resumeWaiting(uint64_t id) {
  auto it = publishers_.find(id);
  if (it == publishers_.end()) return;
  it->second.wake->ran();
  resume(it->second);
}

// The buffers link `id` feeds now (relink()).
void ClientHandler::setTargets(uint64_t id, FedOutboxes targets) {
  auto it = publishers_.find(id);
  if (it == publishers_.end()) return;
  it->second.targets = std::move(targets);
  resume(it->second);
}

// A buffer that held `pub` back and took nothing for the stall timeout
// belongs to a stuck subscriber: it stops holding anybody back until it
// drains to its low-water mark.
void ClientHandler::checkStalls(PublisherLink& pub) {
  const auto now = std::chrono::steady_clock::now();
  pub.targets.forEach([&](SubscriberOutbox& outbox) {
    if (outbox.checkStall(now, options_.subscriber_stall_timeout)) {
      counters_.subscriber_stalls.inc();
    }
  });
}

void ClientHandler::pause(PublisherLink& pub, std::vector<std::string> congested) {
  pub.hold.pause(std::move(congested));
  scheduleRecheck(pub);
}

void ClientHandler::scheduleRecheck(PublisherLink& pub) {
  if (!pub.hold.scheduleRecheck()) return;
  // The timer is the container's: a connection's own timed work outlives
  // the connection in Proton 0.37 and crashes when it fires after a
  // close. It runs on any container thread, so it touches nothing but
  // the Waker; the recheck itself is the connection's work, so that the
  // credit it grants is written out at once.
  host_.schedule(options_.recheck_interval, [this, waker = client_->waker, id = pub.id] {
    waker->add([this, id] { recheck(id); });
  });
}

void ClientHandler::recheck(uint64_t id) {
  auto it = publishers_.find(id);
  if (it == publishers_.end()) return;
  PublisherLink& pub = it->second;
  pub.hold.recheckRan();
  if (pub.hold.waiting()) {
    checkStalls(pub);
    resume(pub);
    if (pub.hold.waiting()) scheduleRecheck(pub);
  }
  if (!pub.hold.paused()) return;
  if (host_.congested(pub.hold.congested())) {
    scheduleRecheck(pub);
    return;
  }
  pub.hold.unpause();
  replenish(pub);
}

// ---- subscriber deliveries ----------------------------------------------

void ClientHandler::drain(uint64_t id) {
  auto it = subscribers_.find(id);
  if (it == subscribers_.end()) return;
  SubscriberLink& sub = it->second;
  if (!sub.link.active()) return;
  const int n = sub.deliveries.sendable(sub.link.credit(), unsentDeliveries(sub.link));
  for (OutboxEntry& entry : sub.outbox().take(n)) {
    if (entry.answer) {
      proton::tracker t = sub.link.send(*entry.answer);
      sub.deliveries.sent(t, std::move(entry), sentSettled(t));
      continue;
    }
    proton::message& m = outgoing_;
    messageFromEvent(*entry.event, m);
    if (entry.request.pattern == flows::Pattern::kInOut) {
      host_.stampProviderRequest(entry.request, m);
    }
    if (entry.delivery_count > 0) {
      m.delivery_count(entry.delivery_count);
      m.first_acquirer(false);
      counters_.redelivered.inc();
      bump(sub.outbox().stats().redelivered);
    } else {
      m.first_acquirer(true);
    }
    proton::tracker t = sub.link.send(m);
    sub.deliveries.sent(t, std::move(entry), sentSettled(t));
  }
  if (!sub.outbox().drainedToLowWater() || !host_.publishersWaiting()) return;
  sub.outbox().wakePublishers();
}

// ---- links and the connection going away ------------------------------

// Closed by its client (the link, or its connection): the link's events
// have all been handed on, and the queries it fed stop waiting for it. A
// dropped connection's links are not ended: they go idle, for their
// client may come back.
void ClientHandler::endSource(const proton::link& l) {
  auto id = link_ids_.find(l);
  if (id == link_ids_.end()) return;
  if (auto pub = publishers_.find(id->second); pub != publishers_.end()) {
    flows::sourceEnds().end(pub->second.source);
  }
}

// `detached`: the link went away without being closed (a detach, or its
// connection ended), which keeps a durable subscription.
void ClientHandler::forgetLink(const proton::link& l, bool detached) {
  auto id = link_ids_.find(l);
  if (id == link_ids_.end()) return;
  const uint64_t key = id->second;
  link_ids_.erase(id);
  if (auto pub = publishers_.find(key); pub != publishers_.end()) {
    PublisherLink& link = pub->second;
    if (link.hold.waiting()) host_.publisherWaits(false);
    unsettled_.countCredit(-link.hold.credit());
    link.hold.release();
    link.wake->setWaiting(false);
    // Unsettled messages still waiting for a commit: the client resends them.
    counters_.awaiting_commit.sub(static_cast<int64_t>(link.awaiting.size()));
    std::vector<uint64_t> unsettled_bytes;
    for (const auto& [awaiting_key, awaited] : link.awaiting) {
      unsettled_bytes.push_back(awaited.second);
    }
    const std::string entry = std::move(link.entry);
    publishers_.erase(pub);
    // Given back once the link is gone, so that the connection's other
    // links get their credit back if they were held for them.
    for (const uint64_t bytes : unsettled_bytes) unsettledSettled(bytes);
    host_.detachPublisher(*this, client_->id, key, entry);
  }
  if (auto sub = subscribers_.find(key); sub != subscribers_.end()) {
    // What the subscriber had not settled goes back
    // (SubscriberOutbox::returnUnsettled()), or with a parked subscription.
    std::vector<OutboxEntry> unsettled = sub->second.deliveries.takeUnsettled();
    Subscription subscription = std::move(sub->second.subscription);
    subscribers_.erase(sub);
    host_.detachSubscriber(*this, client_->id, key, std::move(subscription), std::move(unsettled),
                           detached);
  }
}

void ClientHandler::forgetConnection(const proton::connection& c) {
  if (!host_.closeConnection(c)) return;
  std::vector<proton::link> links;
  for (const auto& [link, key] : link_ids_) links.push_back(link);
  for (const auto& l : links) forgetLink(l, true);
}

void ClientHandler::postShutdown() {
  if (!client_) return;
  client_->waker->add([this] {
    if (!connection_) return;
    proton::connection c = connection_;
    forgetConnection(c);
    c.close(proton::error_condition("amqp:connection:forced", "the bus is shutting down"));
  });
}

void ClientHandler::releaseAll() {
  for (auto& [id, sub] : subscribers_) {
    host_.releaseSubscriber(std::move(sub.subscription), sub.deliveries.takeUnsettled());
  }
  subscribers_.clear();
  for (auto& [id, pub] : publishers_) {
    host_.releasePublisher(pub.entry);
    countCredit(pub, 0);
  }
  publishers_.clear();
  link_ids_.clear();
  ended_links_.clear();
  connection_ = proton::connection();
  // Work added from now on (a request's answer, a commit) is refused.
  if (client_) client_->waker->close();
}

}  // namespace cepbus::services::amqp
