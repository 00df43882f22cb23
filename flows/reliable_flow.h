#pragma once

// ReliableFlow: guaranteed delivery (P1's "reliable" QoS).
//
// With concurrent dispatch (the default; ActiveMQ KahaDB's
// concurrentStoreAndDispatchQueues). Why: committing first makes every
// delivery wait for an fsync and makes every event pay a JSON encoding, an
// INSERT, a DELETE and an INSERT into `delivered`, although most events reach
// a live target long before the commit; then the journal only needs to
// remember that they were delivered.
//
//   send() --(stage pressure normal, QoS reliable)--+--> JournalWriter --commit--+
//                                                   |                            +--> kAccepted
//                                                   +--> target's stage --OK ----+    (the first)
//                                                          |
//                       OK before the writer took the record: cancelled, never
//                       written; only its id is remembered (dedupe window)
//                       OK after: the row is deleted in a later transaction
//
// Without it (concurrent_dispatch = false):
//
//   send() --> JournalWriter --commit--> kAccepted to the sender --> target's
//     stage --> deliver() OK --> acknowledged (row deleted, id remembered)
//
// - An exchange is appended to the journal writer, whose thread commits many
//   records per transaction (group commit). With concurrent dispatch the
//   delivery is offered to the target's stage at the same time, so the target
//   does not wait for the fsync, and the sender hears kAccepted when the
//   first of two things happens: the record is durable, or the target
//   acknowledged it OK (the event reached its destination; nothing needs
//   keeping). A target fast enough to acknowledge while the record still
//   waits for the writer saves its insert, its delete and its JSON encoding
//   (the writer encodes events on its thread, when it writes them). The race
//   between the writer taking a record into a transaction and the target's
//   acknowledgement is decided atomically per record (JournalWriter::cancel()
//   under the writer's lock, and the record's settlement under its own lock):
//   the sender hears exactly one of kAccepted / kRejected per target.
//   Without concurrent dispatch the sender hears kAccepted only after the
//   commit, and only then is the delivery dispatched.
// - A commit that fails: the sender hears kRejected for that target, unless it
//   already heard kAccepted because the target acknowledged first. With
//   concurrent dispatch the delivery is already out and carries on (and is
//   retried as below, though nothing is journaled for it): a sender that
//   resends after kRejected may get the event delivered twice, which
//   at-least-once allows. Without it the delivery is dropped, as before.
//   For a robust in-only exchange kDelivered never precedes kAccepted, but
//   kFault (attempts used up) may come before the commit's kAccepted.
// - A record leaves the journal only when its target returns OK. A failed or
//   throwing delivery is retried, up to `max_attempts` deliveries; then the
//   sender hears kFault (robust in-only) and the record stays journaled until
//   the next start. A failed delivery never cancels its record: it is written
//   even when the failure comes before the commit, so a crash cannot lose it.
//   A full stage just delays it, and so does a target answering Rejected (its
//   own admission, e.g. a full buffer, refused it for now).
// - Retries are held back per target, in journal order: once a delivery to a
//   target is refused (its stage is full, or it answered Rejected) or fails,
//   later ones to it queue behind it instead of overtaking it. After a wait
//   that starts at `retry_delay` and doubles with every refusal up to
//   `max_retry_delay`, the first held delivery is offered alone (a probe);
//   once the target takes one delivery OK, the rest follow in order, until
//   the stage or the target refuses one again, and the next wait is
//   `retry_delay` again. So a target that stays busy costs one delivery per
//   wait, not one per held record per tick, and a target that was busy
//   receives its records in journal order; only one that refuses again while
//   they are being offered may see the refused record after later ones. A
//   probe that fails uses up one of its attempts; once it has used them all,
//   the next held record is probed after `retry_delay`. A target holds back
//   at most its stage's capacity: beyond, a send to it is kRejected.
// - start() redelivers every record left in the journal (after a crash or a
//   stop), once its target is attached; attach() after start() does the same.
// - Duplicates are suppressed per (target, event id): against the window of
//   recently acknowledged ids (kept in the journal too, so it survives a
//   restart; cancelled records are remembered there as well) and against the
//   deliveries still in flight.
// - Under admission pressure (the target's stage reports kDegraded or
//   kSaturated) an exchange is not journaled: it is offered best effort,
//   counted and reported kDegraded; if the stage refuses it, kRejected.
// - Best-effort exchanges pass through the stage without the journal.
// - stop() flushes: everything accepted is committed (or was cancelled because
//   its target already acknowledged it) and handed to the stages, the stages
//   drain, the last acknowledgements are committed.
// - A target may acknowledge a journaled delivery later instead of by
//   returning OK (it takes the acknowledgement from the delivery's context,
//   DeliveryContext::deferAcknowledgement(), e.g. until a remote subscriber
//   settled it): the record stays journaled and in flight until the
//   acknowledgement comes; OK forgets it, anything else is a failed attempt
//   (retried as above; a target detached meanwhile gets it again when it
//   attaches once more). Acknowledgements still missing at stop() leave
//   their records journaled for the next start.
// - A target that keeps state from its deliveries (a checkpointed CEP query)
//   acknowledges the deferred ones together with storing that state
//   (DeferredAck::storeCheckpoint()): one journal transaction writes the
//   state to the `checkpoints` table, every record still waiting for the
//   writer, and deletes the records the state covers. After a crash the
//   journal redelivers exactly what came after the stored state.

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bus/base/mutex.h"
#include "flows/abstract_flow.h"
#include "flows/dedupe_window.h"
#include "flows/departed_names.h"
#include "flows/journal/journal.h"
#include "flows/journal/journal_writer.h"
#include "flows/slot_pool.h"
#include "flows/target_stages.h"
#include "stages/stage.h"

namespace cepbus::flows {

struct ReliableFlowConfig {
  std::string name = "reliable";
  std::string journal_path;   // the SQLite database file; required
  stages::StageConfig stage;  // each target's stage; named "<flow name>/<target name>"
  JournalOptions journal;
  JournalWriterOptions writer;
  std::chrono::milliseconds retry_delay{100};  // the first wait of a held-back target
  // The longest, after repeated refusals; never shorter than retry_delay.
  std::chrono::milliseconds max_retry_delay{5000};
  uint32_t max_attempts = 5;  // deliveries of one record per run before giving up until restart
  // Dispatch a journaled delivery while its record is being committed (see
  // above); false: commit first, then dispatch.
  bool concurrent_dispatch = true;
  // Where the flow, its journal and its stages report their numbers; by
  // default a store of its own.
  stats::Store stats;
};

struct ReliableMetricsSnapshot {
  uint64_t journaled = 0;     // records committed
  uint64_t commits = 0;       // journal transactions
  uint64_t acknowledged = 0;  // acknowledgements committed (row removed or, if cancelled, id only)
  uint64_t cancelled = 0;     // records acknowledged before they were written (never written)
  uint64_t redelivered = 0;   // records found in the journal and dispatched again
  uint64_t retries = 0;       // deliveries tried again (after a fault or a full stage)
  size_t held_back = 0;       // deliveries waiting for their target's next retry
  uint64_t abandoned = 0;     // records that exhausted max_attempts (still journaled)
  uint64_t corrupt = 0;       // undecodable records (removed) or id batches (skipped)
  uint64_t departed = 0;      // records removed because their target left for good
  size_t orphans = 0;         // records waiting for their target to attach again
  uint64_t journal_errors = 0;  // failed transactions
  size_t in_flight = 0;         // journaled, not yet acknowledged, in this run
  size_t backlog = 0;           // records waiting for a commit
};

// Thread-safety: as AbstractFlow. Ownership: owns the journal connection
// while running, its stages, and the exchanges it holds; not the targets.
// The journal file must not be opened by two running flows at once.
class ReliableFlow final : public AbstractFlow {
 public:
  explicit ReliableFlow(ReliableFlowConfig config);
  ~ReliableFlow() override;

  Status attach(DeliveryTarget& target) override;
  void detach(DeliveryTarget& target) override;
  // Detaches it and acknowledges its records in its place, those waiting for
  // it now and those its deliveries still out leave behind later: a
  // subscription that ended is not delivered to again, so its records would
  // otherwise stay in memory and in the journal for good.
  void retire(DeliveryTarget& target) override;
  void forgetAway(std::string_view target_name) override;
  std::vector<std::string> awayNames() const override;
  size_t queueLength(const DeliveryTarget& target) const override;

  ReliableMetricsSnapshot reliableMetrics() const;

  bool journals() const override { return true; }
  std::vector<stages::StageMetricsSnapshot> stageMetrics() const override {
    return stages_.metrics();
  }

 protected:
  void doSend(const Exchange& exchange, std::span<DeliveryTarget* const> targets,
              WakeHold* wake_hold, SendOutcome& out) override;
  Status doStart() override;
  void doStop() override;

 private:
  // How many departures the flow remembers (DepartedNames).
  static constexpr size_t kRememberedDepartures = 4096;

  // Where the acknowledgements its targets took go (DeferredAck::Receiver);
  // outlives the flow while any is out.
  class Acknowledgements;
  // A journaled delivery being handed to its target (DeliveryContext::Journaled).
  class JournaledDelivery;

  // Who tells the sender about a journaled record with concurrent dispatch:
  // shared by the writer's commit callback and the delivery, whichever
  // settles it first reports kAccepted (or the commit's kRejected).
  struct Settlement {
    enum class State : uint8_t { kWaiting, kDurable, kFailed, kAcknowledged, kCancelled };
    Settlement(Exchange e, SharedName name)
        : exchange(std::move(e)), target_name(std::move(name)) {}
    const Exchange exchange;
    const SharedName target_name;
    uint64_t ticket = 0;  // the writer's, for cancel(); set before the delivery is dispatched
    uint64_t token = 0;   // in settling_, the commit callback's token
    Mutex mu;             // held while reporting, so kAccepted precedes kDelivered
    State state GUARDED_BY(mu) = State::kWaiting;
  };
  // One delivery of an exchange to one target, parked while queued.
  struct Delivery {
    Exchange exchange;
    DeliveryTarget* target = nullptr;
    uint64_t attachment = 0;
    SharedName target_name;  // held: the target may detach meanwhile
    uint64_t seq = 0;        // journal sequence number; 0 for a best-effort delivery
    uint32_t attempts = 0;
    // Came back from the journal (an earlier run or a detached target), or its
    // sender said it may have been delivered before (Exchange::redelivery).
    bool recovered = false;
    std::shared_ptr<Settlement> settlement;  // concurrent dispatch of a record in this run
    bool retrying = false;                   // refused or failed before: its next offer is a retry
    // The publisher's, while it is offered from inside its send(); used by a
    // run inline only (StageItem::inline_run), cleared when handled.
    WakeHold* wake_hold = nullptr;
    DeliveryKey key() const { return DeliveryKey{target_name, exchange.event->id()}; }
  };
  // A record waiting for its target to attach again. `record` carries its
  // JSON when it comes from the journal, its event when from this run.
  struct Orphan {
    JournalRecord record;
    std::shared_ptr<Settlement> settlement;
  };
  // The deliveries to one target that wait for a retry, in journal order.
  struct HeldBack {
    enum class State : uint8_t {
      kIdle,      // nothing held; the next refusal waits `delay`
      kWaiting,   // held until `due`; new deliveries queue behind
      kDraining,  // the writer's tick is offering `queue` again
      kProbing,   // one delivery is out; an OK from the target resumes the rest
    };
    explicit HeldBack(std::chrono::milliseconds first_delay) : delay(first_delay) {}
    std::deque<Delivery> queue;  // ascending seq
    std::chrono::steady_clock::time_point due;
    std::chrono::milliseconds delay;  // the next wait
    State state = State::kIdle;
    bool refused_while_draining = false;  // the target refused a delivery of this offer
    bool probed = false;                  // the target took a delivery since the last refusal
  };

  void offerBestEffort(const Exchange& exchange, DeliveryTarget& target,
                       const Attachment& attachment, bool degraded, WakeHold* wake_hold,
                       SendOutcome& out);
  Status handle(DeliveryTarget& target, stages::StageItem& item);
  void onCommit(std::span<const uint64_t> tokens, const Status& status);
  // A record's target acknowledged it OK (or already has it): cancels the
  // record if the writer has not taken it yet, settles the sender if nobody
  // did, and queues the acknowledgement for the journal.
  void acknowledgeRecord(uint64_t seq, const DeliveryKey& key, Settlement* settlement);
  // Offers the held-back deliveries that are due; true while others wait
  // (the writer's ticks).
  bool onTick(std::chrono::steady_clock::time_point now);
  // Offers one target's held-back deliveries in order until one is refused;
  // true when they wait again.
  bool drain(DeliveryTarget* target, std::chrono::steady_clock::time_point now);
  // Offers a journaled delivery to its target's stage, unless earlier ones
  // to that target are held back (it queues behind them); a full stage
  // holds it back. `wake_hold`: the publisher's, when called from its send().
  void dispatch(Delivery delivery, WakeHold* wake_hold = nullptr);
  enum class Offered : uint8_t { kQueued, kRefused, kOrphaned };
  // Offers it to its target's stage now. kRefused leaves it in `delivery`;
  // a detached target's delivery becomes an orphan. `wake_hold`: as dispatch().
  Offered offer(Delivery& delivery, WakeHold* wake_hold = nullptr);
  // Queues `delivery` behind its target's held-back deliveries. Without
  // `refused` only when some are held (returns false, leaving it, when none
  // is); a refused one starts a wait when none was running.
  bool holdBack(Delivery& delivery, bool refused, std::chrono::steady_clock::time_point now)
      REQUIRES(mu_);
  // Starts `held`'s wait (one of held_), doubles the next one (up to
  // max_retry_delay) and makes its next offer a probe.
  void startWait(HeldBack& held, std::chrono::steady_clock::time_point now) const REQUIRES(mu_);
  // Holds a refused or failed delivery back for a retry.
  void retryLater(Delivery delivery);
  // The target went away: its record waits for the next attach(), or is
  // dropped if the target was retired.
  void orphan(const Delivery& delivery);
  // Acknowledges the record of a retired target in its place.
  void drop(Orphan& orphan);
  size_t orphanCount() const;
  void redeliver(DeliveryTarget& target, const Attachment& attachment);
  // Forgets an in-flight delivery that will not be acknowledged in this run.
  void release(const DeliveryKey& key);
  // The end of a journaled delivery: acknowledged, retried or abandoned.
  // `target` is null when it was detached meanwhile (nothing is reported to it).
  // `acknowledged`: an OK whose acknowledgement a checkpoint's transaction
  // committed already (nothing more goes to the journal).
  void complete(DeliveryTarget* target, Delivery delivery, const Status& status,
                bool acknowledged = false);
  // Registers the journal numbers the flow reads from itself and its writer.
  void reportJournalGauges();

  const ReliableFlowConfig config_;

  mutable Mutex mu_;
  DedupeWindow delivered_ GUARDED_BY(mu_);
  DeliveryKeySet in_flight_ GUARDED_BY(mu_);
  std::unordered_map<Symbol, std::vector<Orphan>> orphans_ GUARDED_BY(mu_);
  DepartedNames departed_names_ GUARDED_BY(mu_){kRememberedDepartures};
  std::unordered_map<const DeliveryTarget*, HeldBack> held_ GUARDED_BY(mu_);
  size_t held_back_ GUARDED_BY(mu_) = 0;  // in held_ queues
  // Targets whose HeldBack is not idle, read without mu_ so that dispatch()
  // only takes the lock when something may be held.
  std::atomic<size_t> holding_{0};
  uint64_t next_seq_ GUARDED_BY(mu_) = 1;

  SlotPool<Delivery> parked_;
  SlotPool<std::shared_ptr<Settlement>> settling_;  // records waiting for the writer (concurrent)
  std::shared_ptr<Acknowledgements> acknowledgements_;  // replaced at each start
  JournalWriter writer_;
  // The journal's numbers ({flow}): after what its functions read.
  const stats::ScopePtr journal_scope_;
  stats::Counter& redelivered_;
  stats::Counter& retried_;
  stats::Counter& abandoned_;
  stats::Counter& corrupt_;
  stats::Counter& departed_;
  TargetStages stages_;  // last: its stages' handlers use everything above
};

}  // namespace cepbus::flows
