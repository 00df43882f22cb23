#include "services/amqp/listener/subscriber_outbox.h"

#include <string>
#include <utility>

#include "services/amqp/listener/publisher_credit.h"

namespace cepbus::services::amqp {

SubscriberOutbox::SubscriberOutbox(size_t capacity, size_t away_capacity, Symbol sender,
                                   std::shared_ptr<ListenerCounters> counters)
    : capacity_(capacity),
      away_capacity_(away_capacity),
      sender_(sender),
      counters_(std::move(counters)) {}

Status SubscriberOutbox::offer(const flows::Exchange& exchange, flows::DeliveryContext& context) {
  MutexLock lock(mu_);
  if (closed_) return Status::unavailable("amqp subscription closed");
  const bool bound = static_cast<bool>(wake_);
  // Counted in transit only while a link is bound (see bind()).
  const bool ours = exchange.sender == sender_ && bound;
  const size_t capacity = bound ? capacity_ : away_capacity_;
  if (pending_.size() >= capacity) {
    counters_->buffer_full.inc();
    if (!bound) {
      counters_->parked_overflow.inc();
      bump(stats_->parked_overflow);
    }
    // A journaled delivery comes again; a best-effort one is gone.
    if (ours && !context.journaled()) arrived();
    return Status::rejected("amqp subscriber is slow or away: its buffer of " +
                            std::to_string(capacity) + " events is full");
  }
  OutboxEntry entry{exchange.event, context.deferAcknowledgement(), 0, {}, std::nullopt};
  if (exchange.pattern == flows::Pattern::kInOut) entry.request = exchange;
  entry.delivery_count = entry.ack.previousDeliveries();
  const bool count_out = ours && entry.delivery_count == 0;  // a redelivery was counted out
  pending_.push_back(std::move(entry));
  // Buffered first, then out of transit: in between, the container thread
  // may read the load, which must never look lower than it is (it would
  // grant credit for room that is not there).
  queued_.store(static_cast<int64_t>(pending_.size()), std::memory_order_release);
  if (count_out) arrived();
  wake(context.wakeHold());
  return Status::ok();
}

void SubscriberOutbox::bind(Wake wake) {
  MutexLock lock(mu_);
  wake_ = std::move(wake);
  drain_scheduled_ = false;
  in_transit_.store(0, std::memory_order_relaxed);
  this->wake(nullptr);
}

void SubscriberOutbox::unbind() {
  MutexLock lock(mu_);
  wake_ = nullptr;
}

void SubscriberOutbox::pushAnswer(OutboxEntry entry) {
  MutexLock lock(mu_);
  pending_.push_back(std::move(entry));
  queued_.store(static_cast<int64_t>(pending_.size()), std::memory_order_relaxed);
  wake(nullptr);
}

std::vector<OutboxEntry> SubscriberOutbox::take(int n) {
  std::vector<OutboxEntry> out;
  MutexLock lock(mu_);
  drain_scheduled_ = false;
  while (n-- > 0 && !pending_.empty()) {
    out.push_back(std::move(pending_.front()));
    pending_.pop_front();
  }
  queued_.store(static_cast<int64_t>(pending_.size()), std::memory_order_relaxed);
  taken_.fetch_add(out.size(), std::memory_order_relaxed);
  return out;
}

void SubscriberOutbox::putBack(std::vector<OutboxEntry> entries) {
  MutexLock lock(mu_);
  for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
    ++it->delivery_count;
    pending_.push_front(std::move(*it));
  }
  queued_.store(static_cast<int64_t>(pending_.size()), std::memory_order_relaxed);
}

void SubscriberOutbox::returnUnsettled(std::vector<OutboxEntry> unsettled, bool keep) {
  std::vector<OutboxEntry> back;
  for (auto& entry : unsettled) {
    if (entry.ack) {
      entry.ack(Status::unavailable("the AMQP subscriber went away"));
    } else if (keep) {
      back.push_back(std::move(entry));
    }
  }
  if (!back.empty()) putBack(std::move(back));
}

void SubscriberOutbox::close() {
  std::deque<OutboxEntry> pending;
  {
    MutexLock lock(mu_);
    closed_ = true;
    wake_ = nullptr;
    queued_.store(0, std::memory_order_relaxed);
    pending = std::move(pending_);
  }
  // Outside the lock: an acknowledgement or a report runs the flow's code.
  for (auto& entry : pending) {
    if (entry.ack) entry.ack(Status::unavailable("the AMQP subscription ended"));
    if (entry.request.pattern == flows::Pattern::kInOut) {
      entry.request.report(flows::Outcome{flows::OutcomeKind::kFault, "",
                                          Status::unavailable("the AMQP provider went away"),
                                          nullptr});
    }
  }
}

void SubscriberOutbox::dispatched() { in_transit_.fetch_add(1, std::memory_order_relaxed); }

int64_t SubscriberOutbox::load() const {
  // In transit first: an arrival seen there is seen buffered too (offer()
  // buffers before it counts out), so the sum never comes out too low.
  const int64_t in_transit = in_transit_.load(std::memory_order_acquire);
  return queued_.load(std::memory_order_relaxed) + in_transit;
}

int64_t SubscriberOutbox::lowWater() const { return PublisherCredit::lowWater(capacity_); }

void SubscriberOutbox::setPublishers(std::vector<std::shared_ptr<PublisherWake>> publishers) {
  MutexLock lock(mu_);
  publishers_ = std::move(publishers);
  publisher_count_.store(publishers_.size(), std::memory_order_release);
}

void SubscriberOutbox::wakePublishers() {
  std::vector<std::shared_ptr<PublisherWake>> publishers;
  {
    MutexLock lock(mu_);
    publishers = publishers_;
  }
  // Outside the lock: a post takes the publisher's connection's Waker.
  for (const auto& publisher : publishers) publisher->post();
}

void SubscriberOutbox::watchFrom(std::chrono::steady_clock::time_point now) {
  MutexLock lock(mu_);
  stall_mark_ = taken();
  stall_since_ = now;
}

bool SubscriberOutbox::checkStall(std::chrono::steady_clock::time_point now,
                                  std::chrono::nanoseconds timeout) {
  if (stalled() || load() <= lowWater()) return false;
  MutexLock lock(mu_);
  if (taken() != stall_mark_) {
    stall_mark_ = taken();
    stall_since_ = now;
    return false;
  }
  if (now - stall_since_ < timeout) return false;
  // Publishers on several connections may look at once: one of them counts it.
  if (stalled_.exchange(true, std::memory_order_acq_rel)) return false;
  in_transit_.store(0, std::memory_order_relaxed);
  return true;
}

bool SubscriberOutbox::drainedToLowWater() {
  if (load() > lowWater()) return false;
  stalled_.store(false, std::memory_order_release);
  return true;
}

void SubscriberOutbox::wake(flows::WakeHold* hold) {
  if (drain_scheduled_ || !wake_) return;
  drain_scheduled_ = wake_(hold);
}

void SubscriberOutbox::arrived() {
  int64_t n = in_transit_.load(std::memory_order_relaxed);
  while (n > 0 && !in_transit_.compare_exchange_weak(n, n - 1, std::memory_order_release,
                                                     std::memory_order_relaxed)) {
  }
}

}  // namespace cepbus::services::amqp
