#pragma once

// SubscriberOutbox: the events waiting for one AMQP subscription — the
// consumer of its broker endpoint on one side, the subscribing link that
// takes them on the other (services/amqp/listener/amqp_listener.h). It bounds what it
// holds, counts what is in transit to it for the publishers' credit
// (publisher_credit.h), watches whether its subscriber is stuck, and
// outlives its link when the subscription is durable (durable_parking.h).
//
// Thread-safety: offer() runs on router threads (the endpoint's consumer);
// load(), publisherCount(), stalled() and the stall watch are read or run by
// the publishing links' connections, on any container thread; the rest runs
// on the connection of the link bound to it (or, while none is, under the
// listener's control lock). One mutex per outbox guards what they share, so
// outboxes of different subscriptions never contend; what a publisher reads
// per message (load, publisher count, stalled) is atomic. Ownership: shared by the subscribing
// link, the broker endpoint's consumer and, while its subscriber is away, the parking; it owns the
// entries it holds and gives their acknowledgements back when it closes. It knows no listener: when
// an event arrives for a bound link it calls the Wake it was bound with, which asks the link's
// connection to drain it — through the publisher's WakeHold when the delivery brings one.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <proton/message.hpp>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/core/event.h"
#include "bus/core/status.h"
#include "bus/core/symbol.h"
#include "flows/delivery_context.h"
#include "flows/exchange.h"
#include "flows/wake_hold.h"
#include "services/amqp/listener/listener_stats.h"
#include "services/amqp/listener/publisher_wake.h"

namespace cepbus::services::amqp {

// One event waiting for (or sent to) a subscriber.
struct OutboxEntry {
  EventPtr event;
  flows::DeferredAck ack;                 // the reliable flow's, when it came journaled
  uint32_t delivery_count = 0;            // earlier deliveries; > 0 marks a redelivery
  flows::Exchange request;                // an in-out request (pattern kInOut) for an AMQP provider
  std::optional<proton::message> answer;  // a reply or fault for a requester, sent as is
};

class SubscriberOutbox;

// The buffers one publishing link feeds. `direct` ones subscribe to its
// address: each message it publishes is counted in transit to them
// (SubscriberOutbox::dispatched()). `derived` ones subscribe to what relays
// (CEP queries, router/relays.h) make of its events: they pace its credit
// as well, but nothing is counted in transit to them, since a relay may make
// no event of a message, or several.
struct FedOutboxes {
  std::vector<std::shared_ptr<SubscriberOutbox>> direct;
  std::vector<std::shared_ptr<SubscriberOutbox>> derived;

  template <typename F>
  void forEach(F&& f) const {
    for (const auto& outbox : direct) f(*outbox);
    for (const auto& outbox : derived) f(*outbox);
  }
};

class SubscriberOutbox {
 public:
  // Asks the bound link's connection to drain it, through `hold` when not
  // null (the publisher's, on its thread: flows/wake_hold.h); false when it
  // cannot (the link's connection is closing): what arrived then waits for
  // the subscription's next link, or its end.
  using Wake = std::function<bool(flows::WakeHold* hold)>;

  // `capacity` bounds it while a link is bound, `away_capacity` while not
  // (a durable subscription whose subscriber is away). `sender` marks the
  // exchanges the listener publishes (counted in transit, see dispatched()).
  SubscriberOutbox(size_t capacity, size_t away_capacity, Symbol sender,
                   std::shared_ptr<ListenerCounters> counters);

  SubscriberOutbox(const SubscriberOutbox&) = delete;
  SubscriberOutbox& operator=(const SubscriberOutbox&) = delete;

  // ---- router threads ----
  // Buffers the exchange's event and wakes the bound link (through the
  // context's WakeHold, if any). Beyond the bound (or once closed) it is
  // refused: Rejected, which a reliable flow retries later without counting
  // a failure, or Unavailable once closed. A journaled delivery takes its
  // acknowledgement from the context with it, to give once the subscriber
  // settles.
  Status offer(const flows::Exchange& exchange, flows::DeliveryContext& context);

  // ---- the bound link's connection (or the control lock) ----
  // A link takes the subscription: what arrives wakes it through `wake`, and
  // it is woken now for what is already waiting. Forgets the in-transit
  // count: what was published while nobody was bound was not counted.
  void bind(Wake wake);
  // The link went away; the outbox keeps collecting up to `away_capacity`.
  void unbind();
  // An answer to a request: not bounded, since its requester asked for it
  // and the requests bound how many there are. Wakes the bound link. Any
  // thread.
  void pushAnswer(OutboxEntry entry);
  // Up to `n` entries, oldest first; re-arms the wake-up.
  std::vector<OutboxEntry> take(int n);
  // Puts back, in front and in their order, entries sent but not settled,
  // each counted as one more delivery.
  void putBack(std::vector<OutboxEntry> entries);
  // What a subscriber that went away had not settled: journaled entries go
  // back to their flow, which redelivers them (now, or when the subscription
  // comes back); best-effort ones are put back in front when `keep` (the
  // subscription is parked), else lost.
  void returnUnsettled(std::vector<OutboxEntry> unsettled, bool keep);
  // No more offers. The acknowledgements of what was waiting go back to
  // their flows, and in-out requests fail at once instead of timing out.
  void close();

  // ---- credit accounting (subscriber-side backpressure) ----
  // A publish by the listener that will reach this outbox (before
  // Broker::publish): in transit until offer() takes or drops it.
  void dispatched();
  // Buffered plus in transit: what the buffer must still make room for.
  // Any thread.
  int64_t load() const;
  size_t capacity() const { return capacity_; }
  // Publishers it held back get credit again at or below this load.
  int64_t lowWater() const;
  // Entries taken for sending so far: the subscriber's progress.
  uint64_t taken() const { return taken_.load(std::memory_order_relaxed); }

  // ---- the publishing links it feeds (their credit reads its load) ----
  // Set whenever a link comes or goes (the listener's control lock held).
  void setPublishers(std::vector<std::shared_ptr<PublisherWake>> publishers);
  // How many links share its room. Any thread.
  size_t publisherCount() const { return publisher_count_.load(std::memory_order_acquire); }
  // Drained to its low-water mark: each waiting publisher's resume is posted
  // to its own connection (PublisherWake::post()).
  void wakePublishers();

  // ---- stall watch ----
  // A publisher started waiting for room here: progress is measured from now.
  void watchFrom(std::chrono::steady_clock::time_point now);
  // While it holds publishers back (above its low-water mark), a subscriber
  // that took nothing for `timeout` is stuck: it stops holding anybody back,
  // and an in-transit count it may have got wrong (an event lost on the
  // way) is forgotten. True when it became stuck with this call.
  bool checkStall(std::chrono::steady_clock::time_point now, std::chrono::nanoseconds timeout);
  bool stalled() const { return stalled_.load(std::memory_order_acquire); }
  // True at or below the low-water mark, which ends a stall.
  bool drainedToLowWater();

  LinkCounters& stats() { return *stats_; }
  const std::shared_ptr<LinkCounters>& sharedStats() const { return stats_; }

 private:
  void wake(flows::WakeHold* hold) REQUIRES(mu_);
  void arrived();  // one of ours was taken or dropped for good: out of transit

  const size_t capacity_;
  const size_t away_capacity_;
  const Symbol sender_;
  const std::shared_ptr<ListenerCounters> counters_;
  const std::shared_ptr<LinkCounters> stats_ = std::make_shared<LinkCounters>();

  Mutex mu_;
  std::deque<OutboxEntry> pending_ GUARDED_BY(mu_);
  Wake wake_ GUARDED_BY(mu_);  // empty while no link is bound
  bool closed_ GUARDED_BY(mu_) = false;
  bool drain_scheduled_ GUARDED_BY(mu_) = false;
  std::atomic<int64_t> queued_{0};  // pending_.size(), readable without mu_
  // Never below 0: an arrival that was not counted out (published before
  // this outbox matched) must not make room that is not there.
  std::atomic<int64_t> in_transit_{0};
  std::atomic<uint64_t> taken_{0};  // written under mu_

  std::vector<std::shared_ptr<PublisherWake>> publishers_ GUARDED_BY(mu_);
  std::atomic<size_t> publisher_count_{0};  // publishers_.size()
  std::atomic<bool> stalled_{false};
  uint64_t stall_mark_ GUARDED_BY(mu_) = 0;  // taken() when last moving
  std::chrono::steady_clock::time_point stall_since_ GUARDED_BY(mu_){};
};

}  // namespace cepbus::services::amqp
