#include "flows/reliable_flow.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <utility>

#include "bus/base/mutex.h"
#include "flows/flat_set.h"
#include "flows/journal/event_record.h"

namespace cepbus::flows {

// Shared between a running flow and the acknowledgements it handed out. The
// flow pointer is cleared when the flow stops, which then waits until no
// acknowledgement is running (`active_`); `tokens_` are the deliveries waiting
// in parked_. `mu_` is a leaf lock, never held while an acknowledgement does
// its work: a target takes an acknowledgement from inside a delivery, which
// may run inline in a stage's offer() under the flow's other locks.
class ReliableFlow::Acknowledgements final : public DeferredAck::Receiver,
                                             public std::enable_shared_from_this<Acknowledgements> {
 public:
  explicit Acknowledgements(ReliableFlow& flow)
      : journal_path_(flow.config_.journal_path), flow_(&flow) {}

  // A target took the acknowledgement of the delivery parked under `token`.
  void expect(uint64_t token) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    tokens_.insert(token);
  }

  void acknowledge(uint64_t token, const Status& status) EXCLUDES(mu_) override {
    end(token, status, /*journaled=*/false);
  }

  // The deliveries stay parked until the transaction is over: then those it
  // acknowledged end as acknowledged OK (their records are gone from the
  // journal already), or, when it failed, they wait for the next checkpoint.
  void acknowledgeWithCheckpoint(std::vector<uint64_t> tokens, CheckpointRecord checkpoint,
                                 CheckpointDone done) EXCLUDES(mu_) override {
    ReliableFlow* running;
    {
      MutexLock lock(mu_);
      running = flow_;
      for (uint64_t token : tokens) {
        if (running != nullptr && !tokens_.contains(token)) running = nullptr;
      }
      if (running != nullptr) ++active_;
    }
    if (running == nullptr) {
      done(Status::unavailable("flow stopped or deliveries already acknowledged: checkpoint " +
                               checkpoint.name + " not stored"));
      return;
    }
    std::vector<JournalAck> acks;
    acks.reserve(tokens.size());
    for (uint64_t token : tokens) {
      running->parked_.peek(token, [&acks](const Delivery& d) {
        acks.push_back(JournalAck{d.seq, d.target_name, d.exchange.event->id(), true});
      });
    }
    running->writer_.checkpoint(std::move(checkpoint), std::move(acks),
                                [self = shared_from_this(), tokens = std::move(tokens),
                                 done = std::move(done)](const Status& status) {
                                  if (status.isOk()) self->committed(tokens);
                                  done(status);
                                });
    MutexLock lock(mu_);
    if (--active_ == 0) idle_.notify_all();
  }

  std::string journalPath() const override { return journal_path_; }

  // The flow stops: acknowledgements from now on do nothing, and the
  // deliveries still waiting for one are returned (their records stay
  // journaled). Waits for those running.
  std::vector<uint64_t> close() EXCLUDES(mu_) {
    std::vector<uint64_t> tokens;
    MutexLock lock(mu_);
    flow_ = nullptr;
    tokens_.forEach([&](uint64_t token) { tokens.push_back(token); });
    tokens_.clear();
    idle_.wait(mu_, [this]() REQUIRES(mu_) { return active_ == 0; });
    return tokens;
  }

 private:
  // A checkpoint's transaction acknowledged the deliveries of `tokens`
  // (writer thread): they end as acknowledged, unless the flow stopped
  // meanwhile (their records are gone from the journal all the same).
  void committed(const std::vector<uint64_t>& tokens) EXCLUDES(mu_) {
    for (uint64_t token : tokens) end(token, Status::ok(), /*journaled=*/true);
  }

  // Ends the delivery parked under `token` with `status`, unless the flow
  // stopped or it ended already; `journaled`: a checkpoint's transaction
  // acknowledged it in the journal already.
  void end(uint64_t token, const Status& status, bool journaled) EXCLUDES(mu_) {
    ReliableFlow* running;
    {
      MutexLock lock(mu_);
      if (flow_ == nullptr || !tokens_.erase(token)) return;
      running = flow_;
      ++active_;
    }
    ReliableFlow& flow = *running;
    ReliableFlow::Delivery delivery = flow.parked_.take(token);
    // The target may have been detached since it took the acknowledgement.
    const bool attached = flow.stages_.withAttachment(delivery.target, delivery.attachment,
                                                      [](stages::Stage&, const Attachment&) {});
    DeliveryTarget* target = delivery.target;
    if (!attached && !status.isOk()) {
      flow.orphan(delivery);
    } else {
      flow.complete(attached ? target : nullptr, std::move(delivery), status, journaled);
    }
    MutexLock lock(mu_);
    if (--active_ == 0) idle_.notify_all();
  }

  const std::string journal_path_;
  Mutex mu_;
  CondVar idle_;                        // active_ dropped to 0
  ReliableFlow* flow_ GUARDED_BY(mu_);  // null once stopped
  FlatSet<uint64_t, std::hash<uint64_t>> tokens_ GUARDED_BY(mu_);
  int active_ GUARDED_BY(mu_) = 0;  // acknowledgements running
};

// The context's side of a journaled delivery while its target has it: the
// first deferAcknowledgement() parks the delivery until the acknowledgement
// comes, instead of ending it when deliver() returns.
class ReliableFlow::JournaledDelivery final : public DeliveryContext::Journaled {
 public:
  JournaledDelivery(ReliableFlow& flow, const Delivery& delivery)
      : flow_(flow), delivery_(delivery) {}

  DeferredAck defer() override {
    // Stable while a stage handles a delivery: replaced only by start and
    // stop, around the stages' lives.
    const std::shared_ptr<Acknowledgements>& acknowledgements = flow_.acknowledgements_;
    if (!parked_) {
      // A copy: the target still reads the exchange it was handed.
      token_ = flow_.parked_.park(delivery_);
      parked_ = true;
      acknowledgements->expect(token_);
    }
    return DeferredAck(acknowledgements, token_,
                       delivery_.attempts + (delivery_.recovered ? 1 : 0));
  }

 private:
  ReliableFlow& flow_;
  const Delivery& delivery_;
  uint64_t token_ = 0;
  bool parked_ = false;
};

namespace {

// Without concurrent dispatch nothing is acknowledged while a record waits
// for the writer, so a commit delay would only delay every delivery.
JournalWriterOptions writerOptions(const ReliableFlowConfig& config) {
  JournalWriterOptions options = config.writer;
  options.thread_name = "journal:" + config.name;
  if (!config.concurrent_dispatch) options.commit_delay = std::chrono::microseconds(0);
  return options;
}

}  // namespace

ReliableFlow::ReliableFlow(ReliableFlowConfig config)
    : AbstractFlow(config.name, config.stats),
      config_(std::move(config)),
      delivered_(config_.journal.delivered_window),
      writer_(
          writerOptions(config_),
          [this](std::span<const uint64_t> tokens, const Status& status) {
            onCommit(tokens, status);
          },
          [this](std::chrono::steady_clock::time_point now) { return onTick(now); }),
      journal_scope_(statsScope().child(kJournalSchema)),
      redelivered_(journal_scope_->counter(journal_stats::kRedelivered)),
      retried_(journal_scope_->counter(journal_stats::kRetries)),
      abandoned_(journal_scope_->counter(journal_stats::kAbandoned)),
      corrupt_(journal_scope_->counter(journal_stats::kCorrupt)),
      departed_(journal_scope_->counter(journal_stats::kDeparted)),
      stages_(config_.name, statsScope(), config_.stage,
              [this](DeliveryTarget& target, const Attachment&) {
                return [this, &target](stages::StageItem& item) { return handle(target, item); };
              }) {
  reportJournalGauges();
}

void ReliableFlow::reportJournalGauges() {
  namespace j = journal_stats;
  journal_scope_->counter(j::kJournaled, [this] { return writer_.metrics().inserted; });
  journal_scope_->counter(j::kCommits, [this] { return writer_.metrics().commits; });
  journal_scope_->counter(j::kAcknowledged, [this] { return writer_.metrics().acknowledged; });
  journal_scope_->counter(j::kCancelled, [this] { return writer_.metrics().cancelled; });
  journal_scope_->counter(j::kErrors, [this] { return writer_.metrics().errors; });
  journal_scope_->gauge(j::kBacklog,
                        [this] { return static_cast<double>(writer_.metrics().backlog); });
  journal_scope_->gauge(j::kInFlight, [this] {
    MutexLock lock(mu_);
    return static_cast<double>(in_flight_.size());
  });
  journal_scope_->gauge(j::kHeldBack, [this] {
    MutexLock lock(mu_);
    return static_cast<double>(held_back_);
  });
  journal_scope_->gauge(j::kOrphans, [this] { return static_cast<double>(orphanCount()); });
}

ReliableFlow::~ReliableFlow() { stop(); }

Status ReliableFlow::attach(DeliveryTarget& target) {
  Result<Attachment> attached = stages_.attach(target);
  if (!attached) return attached.status();
  {
    MutexLock lock(mu_);
    departed_names_.remove(attached->name.name());
  }
  if (running()) redeliver(target, *attached);
  return Status::ok();
}

void ReliableFlow::detach(DeliveryTarget& target) {
  stages_.detach(target);
  // Its held deliveries wait for the next attach, as orphans (a drain under
  // way makes them orphans itself, offering them).
  std::deque<Delivery> held;
  {
    MutexLock lock(mu_);
    auto it = held_.find(&target);
    if (it == held_.end() || it->second.state == HeldBack::State::kDraining) return;
    held.swap(it->second.queue);
    held_back_ -= held.size();
    if (it->second.state != HeldBack::State::kIdle) {
      holding_.fetch_sub(1, std::memory_order_release);
    }
    held_.erase(it);
  }
  for (const Delivery& delivery : held) orphan(delivery);
}

void ReliableFlow::retire(DeliveryTarget& target) {
  SharedName name;
  stages_.with(target,
               [&](const stages::Stage&, const Attachment& attachment) { name = attachment.name; });
  detach(target);
  if (name.empty()) return;
  std::vector<Orphan> orphans;
  {
    MutexLock lock(mu_);
    departed_names_.add(name.name());
    if (auto it = orphans_.find(name); it != orphans_.end()) {
      orphans = std::move(it->second);
      orphans_.erase(it);
    }
  }
  for (Orphan& orphan : orphans) drop(orphan);
}

void ReliableFlow::forgetAway(std::string_view target_name) {
  for (const auto& [target, attachment] : stages_.attached()) {
    if (attachment.name.name() == target_name) return;  // it came back
  }
  std::vector<Orphan> orphans;
  {
    MutexLock lock(mu_);
    departed_names_.add(target_name);
    // By its text (a timer's rare path): its symbol may have no holder left
    // but its orphans.
    for (auto it = orphans_.begin(); it != orphans_.end(); ++it) {
      if (it->first.name() != target_name) continue;
      orphans = std::move(it->second);
      orphans_.erase(it);
      break;
    }
  }
  for (Orphan& orphan : orphans) drop(orphan);
}

std::vector<std::string> ReliableFlow::awayNames() const {
  std::vector<std::string> names;
  {
    MutexLock lock(mu_);
    for (const auto& [name, orphans] : orphans_) names.emplace_back(name.name());
  }
  for (const auto& [target, attachment] : stages_.attached()) {
    std::erase(names, attachment.name.name());
  }
  return names;
}

void ReliableFlow::drop(Orphan& orphan) {
  const JournalRecord& record = orphan.record;
  departed_.inc();
  acknowledgeRecord(record.seq, DeliveryKey{record.target, record.event_id},
                    orphan.settlement.get());
}

size_t ReliableFlow::orphanCount() const {
  MutexLock lock(mu_);
  size_t count = 0;
  for (const auto& [name, orphans] : orphans_) count += orphans.size();
  return count;
}

size_t ReliableFlow::queueLength(const DeliveryTarget& target) const {
  return stages_.queueLength(target);
}

Status ReliableFlow::doStart() {
  if (config_.journal_path.empty()) {
    return Status::invalidArgument("flow " + name() + ": journal_path is empty");
  }
  Result<std::unique_ptr<Journal>> journal = Journal::open(config_.journal_path, config_.journal);
  if (!journal) return journal.status();
  Result<std::vector<DeliveredId>> delivered = (*journal)->delivered();
  if (!delivered) return delivered.status();
  corrupt_.add((*journal)->corruptBatches());
  Result<std::vector<JournalRecord>> pending = (*journal)->pending();
  if (!pending) return pending.status();
  corrupt_.add((*journal)->corruptPendingRows());
  Result<uint64_t> max_seq = (*journal)->maxSeq();
  if (!max_seq) return max_seq.status();
  {
    MutexLock lock(mu_);
    delivered_.clear();
    for (const DeliveredId& id : *delivered) delivered_.insert({id.target, id.event_id});
    in_flight_.clear();
    orphans_.clear();
    for (JournalRecord& record : *pending) {
      const Symbol target = record.target;
      orphans_[target].push_back(Orphan{std::move(record), nullptr});
    }
    next_seq_ = *max_seq + 1;
  }
  acknowledgements_ = std::make_shared<Acknowledgements>(*this);
  writer_.start(std::move(*journal));
  stages_.start();
  for (auto& [target, attachment] : stages_.attached()) redeliver(*target, attachment);
  return Status::ok();
}

void ReliableFlow::doStop() {
  // Everything accepted reaches the journal and its stage, the stages drain
  // (deliveries acknowledge), and the last acknowledgements are committed.
  writer_.flush();
  stages_.stop();
  if (acknowledgements_) {
    // Acknowledgements still out are not waited for: their records stay
    // journaled, and the next start redelivers them.
    for (uint64_t token : acknowledgements_->close()) parked_.take(token);
    acknowledgements_.reset();
  }
  writer_.stop();  // no tick drains held deliveries from here on
  MutexLock lock(mu_);
  in_flight_.clear();
  orphans_.clear();
  // Records waiting for a retry stay journaled for the next start.
  held_.clear();
  held_back_ = 0;
  holding_.store(0, std::memory_order_relaxed);
}

void ReliableFlow::doSend(const Exchange& exchange, std::span<DeliveryTarget* const> targets,
                          WakeHold* wake_hold, SendOutcome& out) {
  for (DeliveryTarget* target : targets) {
    stages::Pressure pressure = stages::Pressure::kSaturated;
    Attachment attachment;
    const bool attached =
        stages_.with(*target, [&](const stages::Stage& stage, const Attachment& a) {
          pressure = stage.pressure();
          attachment = a;
        });
    if (!attached) {
      reject(exchange, *target,
             Status::notFound("target " + target->name() + " is not attached to flow " + name()),
             out);
      continue;
    }
    if (exchange.qos == Qos::kReliable && pressure != stages::Pressure::kNormal &&
        !exchange.degrade_under_load) {
      reject(exchange, *target,
             Status::rejected("flow " + name() + ": target " + target->name() + " is under load (" +
                              std::string(stages::pressureName(pressure)) +
                              "); its reliable deliveries wait"),
             out);
      continue;
    }
    if (exchange.qos != Qos::kReliable || pressure != stages::Pressure::kNormal) {
      offerBestEffort(exchange, *target, attachment, exchange.qos == Qos::kReliable, wake_hold,
                      out);
      continue;
    }

    const DeliveryKey key{attachment.name, exchange.event->id()};
    uint64_t seq = 0;
    size_t held = 0;
    {
      MutexLock lock(mu_);
      if (holding_.load(std::memory_order_relaxed) != 0) {
        if (auto it = held_.find(target); it != held_.end()) held = it->second.queue.size();
      }
      if (held < config_.stage.capacity && !delivered_.contains(key) && in_flight_.insert(key)) {
        seq = next_seq_++;
      }
    }
    if (held >= config_.stage.capacity) {
      // What waits behind a refusing target is bounded like its stage: the
      // sender hears rejected (an AMQP publisher: released) and may resend.
      reject(exchange, *target,
             Status::rejected("flow " + name() + ": target " + target->name() + " holds back " +
                              std::to_string(held) + " deliveries, its stage's capacity"),
             out);
      continue;
    }
    if (seq == 0) {
      ++out.duplicates;
      notify(exchange, Outcome{OutcomeKind::kAccepted, target->name(), {}, nullptr});
      continue;
    }
    // The writer thread encodes the event, if it writes the record at all.
    JournalRecord record{seq,
                         attachment.name,
                         key.event_id,
                         exchange.address,
                         exchange.sender,
                         exchange.pattern,
                         exchange.correlation_id,
                         {},
                         exchange.event};
    std::shared_ptr<Settlement> settlement;
    uint64_t token;
    if (config_.concurrent_dispatch) {
      settlement = std::make_shared<Settlement>(exchange, attachment.name);
      token = settlement->token = settling_.park(settlement);
    } else {
      token = parked_.park(Delivery{exchange, target, attachment.id, attachment.name, seq, 0,
                                    exchange.redelivery, nullptr});
    }
    const std::optional<uint64_t> ticket = writer_.append(std::move(record), token);
    if (!ticket) {
      if (settlement) {
        settling_.take(token);
      } else {
        parked_.take(token);
      }
      release(key);
      reject(exchange, *target, Status::rejected("flow " + name() + ": journal backlog is full"),
             out);
      continue;
    }
    ++out.queued;
    if (settlement) {
      // Nobody reads the ticket before the delivery is dispatched (the
      // commit callback does not need it).
      settlement->ticket = *ticket;
      dispatch(Delivery{exchange, target, attachment.id, attachment.name, seq, 0,
                        exchange.redelivery, std::move(settlement)},
               wake_hold);
    }
  }
}

void ReliableFlow::offerBestEffort(const Exchange& exchange, DeliveryTarget& target,
                                   const Attachment& attachment, bool degraded, WakeHold* wake_hold,
                                   SendOutcome& out) {
  Delivery delivery{exchange, &target, attachment.id, attachment.name, 0, 0, false, nullptr};
  delivery.wake_hold = wake_hold;
  const uint64_t token = parked_.park(std::move(delivery));
  stages::Admission admission = stages::Admission::kRejected;
  stages_.withAttachment(&target, attachment.id, [&](stages::Stage& stage, const Attachment&) {
    admission = stage.offer(stages::StageItem{.event = exchange.event, .token = token});
  });
  if (admission == stages::Admission::kRejected) {
    parked_.take(token);
    reject(exchange, target,
           Status::rejected("stage " + name() + "/" + target.name() + " refused the event"), out);
    return;
  }
  ++out.queued;
  if (degraded) degrade(exchange, target, out);
}

void ReliableFlow::onCommit(std::span<const uint64_t> tokens, const Status& status) {
  if (config_.concurrent_dispatch) {
    for (uint64_t token : tokens) {
      const std::shared_ptr<Settlement> settlement = settling_.take(token);
      MutexLock lock(settlement->mu);
      // Acknowledged by its target meanwhile: the sender heard kAccepted then.
      if (settlement->state != Settlement::State::kWaiting) continue;
      if (status.isOk()) {
        settlement->state = Settlement::State::kDurable;
        notify(settlement->exchange,
               Outcome{OutcomeKind::kAccepted, settlement->target_name.name(), {}, nullptr});
      } else {
        // Not durable: the sender must not believe otherwise. The delivery
        // is out already and carries on (at least once).
        settlement->state = Settlement::State::kFailed;
        countLateRejection();
        notify(settlement->exchange,
               Outcome{OutcomeKind::kRejected, settlement->target_name.name(), status, nullptr});
      }
    }
    return;
  }
  for (uint64_t token : tokens) {
    Delivery delivery = parked_.take(token);
    if (!status.isOk()) {
      // Not durable: the sender must not believe otherwise.
      release(delivery.key());
      countLateRejection();
      notify(delivery.exchange,
             Outcome{OutcomeKind::kRejected, delivery.target_name.name(), status, nullptr});
      continue;
    }
    notify(delivery.exchange,
           Outcome{OutcomeKind::kAccepted, delivery.target_name.name(), {}, nullptr});
    dispatch(std::move(delivery));
  }
}

void ReliableFlow::acknowledgeRecord(uint64_t seq, const DeliveryKey& key, Settlement* settlement) {
  JournalAck ack{seq, key.target, key.event_id, true};
  if (settlement != nullptr) {
    std::shared_ptr<Settlement> withdrawn;  // released after the lock below
    MutexLock lock(settlement->mu);
    if (settlement->state == Settlement::State::kWaiting) {
      // cancel() and the writer taking its batch exclude each other: either
      // the record is never written and its callback never runs, or the
      // callback comes and finds the record settled here.
      if (writer_.cancel(settlement->ticket)) {
        withdrawn = settling_.take(settlement->token);
        settlement->state = Settlement::State::kCancelled;
        ack.written = false;
      } else {
        settlement->state = Settlement::State::kAcknowledged;
      }
      notify(settlement->exchange,
             Outcome{OutcomeKind::kAccepted, settlement->target_name.name(), {}, nullptr});
    }
  }
  // A cancelled record still has its id remembered in the journal's
  // delivered window, so a restart suppresses its duplicates as before.
  writer_.acknowledge(ack);
}

void ReliableFlow::dispatch(Delivery delivery, WakeHold* wake_hold) {
  if (holding_.load(std::memory_order_acquire) != 0) {
    MutexLock lock(mu_);
    if (holdBack(delivery, false, std::chrono::steady_clock::now())) return;
  }
  if (offer(delivery, wake_hold) == Offered::kRefused) retryLater(std::move(delivery));
}

ReliableFlow::Offered ReliableFlow::offer(Delivery& delivery, WakeHold* wake_hold) {
  DeliveryTarget* target = delivery.target;
  const uint64_t attachment = delivery.attachment;
  EventPtr event = delivery.exchange.event;
  delivery.wake_hold = wake_hold;
  const uint64_t token = parked_.park(std::move(delivery));
  stages::Admission admission = stages::Admission::kRejected;
  const bool attached =
      stages_.withAttachment(target, attachment, [&](stages::Stage& stage, const Attachment&) {
        admission = stage.offer(
            stages::StageItem{.event = std::move(event), .reliable = true, .token = token});
      });
  if (!attached) {
    orphan(parked_.take(token));
    return Offered::kOrphaned;
  }
  if (admission == stages::Admission::kRejected) {
    delivery = parked_.take(token);
    delivery.wake_hold = nullptr;  // its publisher's send() is over by its next offer
    return Offered::kRefused;
  }
  return Offered::kQueued;
}

bool ReliableFlow::holdBack(Delivery& delivery, bool refused,
                            std::chrono::steady_clock::time_point now) {
  auto it = held_.find(delivery.target);
  if (!refused && (it == held_.end() || it->second.state == HeldBack::State::kIdle)) return false;
  if (it == held_.end()) it = held_.emplace(delivery.target, HeldBack(config_.retry_delay)).first;
  if (refused) delivery.retrying = true;
  HeldBack& held = it->second;
  // Mostly an append: deliveries reach here in journal order, except a
  // retried one, which goes back before the later ones.
  const auto at = std::upper_bound(held.queue.begin(), held.queue.end(), delivery.seq,
                                   [](uint64_t seq, const Delivery& d) { return seq < d.seq; });
  held.queue.insert(at, std::move(delivery));
  ++held_back_;
  if (!refused) return true;
  switch (held.state) {
    case HeldBack::State::kIdle:
      holding_.fetch_add(1, std::memory_order_release);
      startWait(held, now);
      break;
    case HeldBack::State::kDraining:  // drain() stops at it
      held.refused_while_draining = true;
      break;
    case HeldBack::State::kProbing:  // the probe, or one before it, was refused
      startWait(held, now);
      break;
    case HeldBack::State::kWaiting:  // already waiting, unless the rest was due after a probe
      if (held.probed) startWait(held, now);
      break;
  }
  return true;
}

void ReliableFlow::startWait(HeldBack& held, std::chrono::steady_clock::time_point now) const {
  held.state = HeldBack::State::kWaiting;
  held.due = now + held.delay;
  held.delay = std::min(2 * held.delay, std::max(config_.max_retry_delay, config_.retry_delay));
  held.probed = false;
}

void ReliableFlow::retryLater(Delivery delivery) {
  {
    MutexLock lock(mu_);
    holdBack(delivery, true, std::chrono::steady_clock::now());
  }
  // After holding it: a tick that saw nothing waiting may have stopped the ticks.
  writer_.requestTicks();
}

void ReliableFlow::orphan(const Delivery& delivery) {
  // The event, not its JSON: the record may come back in this run, and the
  // journal has its own copy (or gets one from the writer).
  JournalRecord record{delivery.seq,
                       delivery.target_name,
                       delivery.exchange.event->id(),
                       delivery.exchange.address,
                       delivery.exchange.sender,
                       delivery.exchange.pattern,
                       delivery.exchange.correlation_id,
                       {},
                       delivery.exchange.event};
  const Symbol name = delivery.target_name;
  std::optional<Orphan> dropped;  // its target was retired
  {
    MutexLock lock(mu_);
    in_flight_.erase(delivery.key());
    if (departed_names_.contains(name.name())) {
      dropped.emplace(Orphan{std::move(record), delivery.settlement});
    } else {
      orphans_[name].push_back(Orphan{std::move(record), delivery.settlement});
    }
  }
  if (dropped) {
    drop(*dropped);
    return;
  }
  // A target of the same name may have attached again meanwhile (a
  // subscriber that came back before this retry): it gets the record now,
  // not at its next attach. redeliver() takes the orphans atomically, so a
  // concurrent attach() and this never both deliver them.
  if (!running()) return;
  for (auto& [target, attachment] : stages_.attached()) {
    if (attachment.name == name) redeliver(*target, attachment);
  }
}

void ReliableFlow::release(const DeliveryKey& key) {
  MutexLock lock(mu_);
  in_flight_.erase(key);
}

bool ReliableFlow::onTick(std::chrono::steady_clock::time_point now) {
  std::vector<DeliveryTarget*> due;
  bool waiting = false;
  {
    MutexLock lock(mu_);
    for (auto& [target, held] : held_) {
      if (held.state != HeldBack::State::kWaiting) continue;
      if (held.due <= now) {
        held.state = HeldBack::State::kDraining;
        due.push_back(const_cast<DeliveryTarget*>(target));
      } else {
        waiting = true;
      }
    }
  }
  for (DeliveryTarget* target : due) waiting |= drain(target, now);
  // A delivery held from here on asks for ticks itself (retryLater()).
  return waiting;
}

bool ReliableFlow::drain(DeliveryTarget* target, std::chrono::steady_clock::time_point now) {
  for (;;) {
    Delivery next;
    bool probe;
    {
      MutexLock lock(mu_);
      HeldBack& held = held_.at(target);  // removed only while idle (or by doStop())
      if (held.refused_while_draining) {
        held.refused_while_draining = false;
        if (!held.queue.empty()) {
          startWait(held, now);
          return true;
        }
      }
      if (held.queue.empty()) {
        held.state = HeldBack::State::kIdle;
        holding_.fetch_sub(1, std::memory_order_release);
        return false;
      }
      next = std::move(held.queue.front());
      held.queue.pop_front();
      --held_back_;
      probe = !held.probed;
    }
    if (next.retrying) retried_.inc();
    const Offered offered = offer(next);
    if (offered == Offered::kOrphaned) continue;  // detached: the rest follow it
    MutexLock lock(mu_);
    HeldBack& held = held_.at(target);
    if (offered == Offered::kRefused) {
      held.queue.push_front(std::move(next));
      ++held_back_;
      held.refused_while_draining = false;
      startWait(held, now);
      return true;
    }
    if (probe && !held.probed && !held.refused_while_draining) {
      // complete() resumes the rest when the target takes it (or any other).
      held.state = HeldBack::State::kProbing;
      return false;
    }
  }
}

void ReliableFlow::redeliver(DeliveryTarget& target, const Attachment& attachment) {
  std::vector<Orphan> orphans;
  {
    MutexLock lock(mu_);
    auto it = orphans_.find(attachment.name);
    if (it == orphans_.end()) return;
    orphans = std::move(it->second);
    orphans_.erase(it);
  }
  for (Orphan& orphan : orphans) {
    JournalRecord& record = orphan.record;
    const DeliveryKey key{record.target, record.event_id};
    EventPtr event = std::move(record.event);
    if (event == nullptr) {
      Result<EventPtr> decoded = decodeEventRecord(record.stored_event);
      if (!decoded) {
        // Lost: said once per record, since nothing else will ever see it.
        Poco::Logger::get("cepbus.journal")
            .error("journal " + config_.journal_path + ": record " + std::to_string(record.seq) +
                   " (event " + std::to_string(record.event_id) + " for " +
                   std::string(record.target.name()) +
                   ") does not decode, removed: " + decoded.status().message());
        corrupt_.inc();
        writer_.acknowledge(JournalAck{record.seq, record.target, record.event_id, true});
        continue;
      }
      event = std::move(*decoded);
    }
    bool duplicate;
    {
      MutexLock lock(mu_);
      duplicate = delivered_.contains(key) || !in_flight_.insert(key);
    }
    if (duplicate) {
      countDuplicate();
      acknowledgeRecord(record.seq, key, orphan.settlement.get());
      continue;
    }
    redelivered_.inc();
    Exchange exchange{std::move(event), record.address,        record.pattern, Qos::kReliable,
                      record.sender,    record.correlation_id, nullptr};
    dispatch(Delivery{std::move(exchange), &target, attachment.id, attachment.name, record.seq, 0,
                      true, std::move(orphan.settlement)});
  }
}

Status ReliableFlow::handle(DeliveryTarget& target, stages::StageItem& item) {
  Delivery delivery = parked_.take(item.token);
  // The publisher's hold is this thread's only during a run inline, inside
  // its send(); a worker's run gets none.
  WakeHold* const wake_hold = item.inline_run ? delivery.wake_hold : nullptr;
  delivery.wake_hold = nullptr;
  if (delivery.seq == 0) {
    DeliveryContext context(wake_hold);
    Status status = deliverTo(target, delivery.exchange, context);
    countAsync(status);
    return status;
  }
  // The target may take the acknowledgement from the context; then the
  // delivery waits in parked_ for it instead of ending here.
  JournaledDelivery journaled(*this, delivery);
  DeliveryContext context(wake_hold, acknowledgements_ ? &journaled : nullptr);
  Status status = invoke(target, delivery.exchange, context);
  if (context.deferred()) return Status::ok();
  complete(&target, std::move(delivery), status);
  return status;
}

void ReliableFlow::complete(DeliveryTarget* target, Delivery delivery, const Status& status,
                            bool acknowledged) {
  const DeliveryKey key = delivery.key();
  bool gave_up = false;
  if (status.isOk()) {
    bool resume = false;
    {
      MutexLock lock(mu_);
      in_flight_.erase(key);
      delivered_.insert(key);
      // The target takes deliveries again: what it has held back follows
      // at the next tick, and its next refusal waits the shortest time.
      if (auto it = held_.find(delivery.target); it != held_.end()) {
        HeldBack& held = it->second;
        held.delay = config_.retry_delay;
        held.probed = true;  // a drain under way goes on past its probe
        if (held.state == HeldBack::State::kIdle) {
          held_.erase(it);
        } else if (held.state == HeldBack::State::kProbing) {
          held.state = HeldBack::State::kWaiting;
          held.due = std::chrono::steady_clock::now();
          resume = true;
        }
      }
    }
    if (resume) writer_.requestTicks();
    if (!acknowledged) acknowledgeRecord(delivery.seq, key, delivery.settlement.get());
  } else if (status.code() == Status::Code::kRejected ||
             ++delivery.attempts < config_.max_attempts) {
    // Rejected is the target's own admission refusing it (a full buffer):
    // like a full stage, that only delays it and costs no attempt.
    retryLater(std::move(delivery));
    return;
  } else {
    gave_up = true;
    bool probe_given_up = false;
    {
      MutexLock lock(mu_);
      in_flight_.erase(key);
      // A probe given up proves nothing about the next held delivery: it is
      // probed after the shortest wait, and backs off on its own failures
      // (as a broker's blocking redelivery does, one message at a time).
      auto it = held_.find(delivery.target);
      if (it != held_.end()) {
        HeldBack& held = it->second;
        if (held.state == HeldBack::State::kProbing) {
          held.delay = config_.retry_delay;
          startWait(held, std::chrono::steady_clock::now());
          probe_given_up = true;
        } else if (held.state == HeldBack::State::kDraining) {
          // drain() has not seen its probe's end yet: it waits instead.
          held.delay = config_.retry_delay;
          held.refused_while_draining = true;
        }
      }
    }
    if (probe_given_up) writer_.requestTicks();
  }
  if (target != nullptr) reportDelivery(delivery.exchange, *target, status);
  countAsync(status);
  // Last: whoever sees the count sees the sender told.
  if (gave_up) abandoned_.inc();
}

ReliableMetricsSnapshot ReliableFlow::reliableMetrics() const {
  const JournalWriterMetrics w = writer_.metrics();
  ReliableMetricsSnapshot m;
  m.journaled = w.inserted;
  m.commits = w.commits;
  m.acknowledged = w.acknowledged;
  m.cancelled = w.cancelled;
  m.journal_errors = w.errors;
  m.backlog = w.backlog;
  m.redelivered = redelivered_.value();
  m.retries = retried_.value();
  m.abandoned = abandoned_.value();
  m.corrupt = corrupt_.value();
  m.departed = departed_.value();
  m.orphans = orphanCount();
  MutexLock lock(mu_);
  m.in_flight = in_flight_.size();
  m.held_back = held_back_;
  return m;
}

}  // namespace cepbus::flows
