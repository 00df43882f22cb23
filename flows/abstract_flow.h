#pragma once

// AbstractFlow: the dispatch skeleton every flow shares (P1: the delivery
// policy is modelled as flows; AbstractFlow is a template method around the
// abstract doSend() that each concrete flow implements with its own protocol).
//
// send() validates the exchange, refuses it when the flow is not running,
// calls doSend(), contains anything doSend() throws, and keeps the per-flow
// metrics. Concrete flows deliver through deliverTo(), which turns a target's
// failure or throw into a counted, reported fault instead of a crash, and
// hand each delivery its DeliveryContext (flows/delivery_context.h).
//
// What only some flows have — the stages they queue into, a journal — they
// show through virtuals whose defaults say "none", so that nobody above
// needs to know which flow it holds; their numbers are children of the
// flow's stats scope (flows/flow_stats.h), which /metrics and /api render.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bus/base/stats/store.h"
#include "bus/core/status.h"
#include "flows/delivery_context.h"
#include "flows/delivery_target.h"
#include "flows/exchange.h"
#include "flows/flow_stats.h"
#include "flows/wake_hold.h"
#include "stages/stage_metrics.h"

namespace cepbus::flows {

// What happened to one send(), target by target. Every target lands in exactly
// one of delivered / queued / rejected / failed / duplicates.
struct SendOutcome {
  uint32_t targets = 0;
  uint32_t delivered = 0;  // delivered before send() returned (StFlow)
  uint32_t queued = 0;    // accepted for later delivery (SedaFlow, ReliableFlow), degraded included
  uint32_t degraded = 0;  // of `queued`: reliable delivery degraded to best effort
  uint32_t rejected = 0;  // refused by admission; reported to the sender
  uint32_t failed = 0;    // the target failed or threw (synchronous delivery only)
  uint32_t duplicates = 0;  // suppressed: the target already had this event (ReliableFlow)
  Status status;            // OK, or the reason of the first rejection or failure

  uint32_t accounted() const { return delivered + queued + rejected + failed + duplicates; }
};

// Counters since construction. Each counter is exact; a snapshot taken while
// events flow may be torn across counters.
struct FlowMetricsSnapshot {
  std::string name;
  uint64_t sent = 0;             // send() calls
  uint64_t delivered = 0;        // target deliveries that returned OK
  uint64_t failed = 0;           // target deliveries that failed or threw
  uint64_t rejected = 0;         // target admissions refused (reported to the sender)
  uint64_t degraded = 0;         // reliable deliveries degraded to best effort
  uint64_t invalid = 0;          // exchanges refused by validation
  uint64_t duplicates = 0;       // deliveries suppressed as duplicates
  uint64_t listener_errors = 0;  // outcomes the sender's listener threw on
};

// Thread-safety: send(), metrics(), running(), queueLength() may be called from
// any thread concurrently. start(), stop(), attach() and detach() are
// control-plane calls, serialized internally; they may run concurrently with
// send(). Ownership: a flow never owns its targets (see DeliveryTarget).
class AbstractFlow {
 public:
  // The flow reports into `stats` (kFlowSchema, {flow=name}; see
  // flows/flow_stats.h); by default into a store of its own.
  explicit AbstractFlow(std::string name, const stats::Store& stats = {});
  virtual ~AbstractFlow() = default;
  AbstractFlow(const AbstractFlow&) = delete;
  AbstractFlow& operator=(const AbstractFlow&) = delete;

  const std::string& name() const { return name_; }

  // Idempotent. A flow refuses every send() until start() succeeded.
  Status start();
  // Idempotent. Refuses new sends at once, then lets the flow finish or
  // persist what it had accepted (doStop()). Derived destructors call it.
  void stop();
  bool running() const { return running_.load(std::memory_order_acquire); }

  // Prepares per-target resources (a stage, redelivery of journaled events).
  // A queueing flow refuses targets it was not attached to.
  virtual Status attach(DeliveryTarget& target);
  // Releases them; returns once nothing of this flow is delivering to `target`.
  virtual void detach(DeliveryTarget& target);
  // As detach(), for a target that will not come back under its name (a
  // subscriber that ended its subscription): what the flow keeps for its
  // return (a reliable flow's undelivered records) goes too.
  virtual void retire(DeliveryTarget& target) { detach(target); }
  // Drops what the flow keeps for the return of a target of this name that
  // is not attached, as retire() would have: it did not come back in time.
  // The caller makes sure that no target of this name attaches meanwhile.
  virtual void forgetAway(std::string_view /*target_name*/) {}
  // The names of targets that are not attached and that the flow keeps
  // something for: ones that went away, and ones that a restart left behind
  // (a reliable flow's records read back from its journal).
  virtual std::vector<std::string> awayNames() const { return {}; }
  // Exchanges waiting in this flow for `target`.
  virtual size_t queueLength(const DeliveryTarget& target) const;

  // The template method. Never throws. `wake_hold` is the publisher's (see
  // flows/wake_hold.h): the deliveries that run on the calling thread before
  // send() returns may put their wakes off until the publisher flushes it.
  SendOutcome send(const Exchange& exchange, std::span<DeliveryTarget* const> targets,
                   WakeHold* wake_hold = nullptr);

  FlowMetricsSnapshot metrics() const;

  // Whether a reliable exchange it carries is journaled: its sender hears
  // kAccepted once the record is durable (or its target took it), not
  // before. False unless the flow journals (ReliableFlow).
  virtual bool journals() const { return false; }
  // The stages it queues into, one per target; none unless it queues
  // (SedaFlow, ReliableFlow).
  virtual std::vector<stages::StageMetricsSnapshot> stageMetrics() const { return {}; }

 protected:
  // Delivers (or queues) `exchange` to every target, recording each target in
  // `out`. Only called while running, with a validated exchange. A delivery
  // made on this thread before doSend() returns gets `wake_hold` in its
  // context; one made later, or on another thread, never does.
  virtual void doSend(const Exchange& exchange, std::span<DeliveryTarget* const> targets,
                      WakeHold* wake_hold, SendOutcome& out) = 0;
  virtual Status doStart() { return Status::ok(); }
  virtual void doStop() {}

  // invoke() then reportDelivery(). Counts nothing: synchronous callers
  // record the result in their SendOutcome, asynchronous ones call countAsync().
  Status deliverTo(DeliveryTarget& target, const Exchange& exchange,
                   DeliveryContext& context) noexcept;
  // Calls target.deliver(), converting a throw into an Internal status.
  static Status invoke(DeliveryTarget& target, const Exchange& exchange,
                       DeliveryContext& context) noexcept;
  // Reports a delivery's result as the exchange pattern asks (kDelivered / kFault).
  void reportDelivery(const Exchange& exchange, const DeliveryTarget& target, const Status& status);
  // Counts a delivery that finished after send() returned.
  void countAsync(const Status& status);
  // Counts an accepted exchange that was refused after send() returned (for
  // instance when its journal write failed); the caller reports it.
  void countLateRejection() { rejected_.inc(); }
  // Records a refusal of `target` in `out` and reports kRejected to the sender.
  void reject(const Exchange& exchange, const DeliveryTarget& target, Status why, SendOutcome& out);
  // Records a degraded admission in `out` and reports kDegraded to the sender.
  void degrade(const Exchange& exchange, const DeliveryTarget& target, SendOutcome& out);
  // Reports to the sender, counting a listener that throws.
  void notify(const Exchange& exchange, const Outcome& outcome);
  void countDuplicate() { duplicates_.inc(); }
  // The flow's scope, whose children are its journal's and its stages'.
  const stats::Scope& statsScope() const { return *scope_; }

 private:
  static void add(stats::Counter& counter, uint64_t n) {
    if (n != 0) counter.add(n);
  }

  const std::string name_;
  std::mutex lifecycle_mu_;  // serializes start() and stop()
  std::atomic<bool> running_{false};

  const stats::ScopePtr scope_;
  stats::Counter& sent_;
  stats::Counter& delivered_;
  stats::Counter& failed_;
  stats::Counter& rejected_;
  stats::Counter& degraded_;
  stats::Counter& invalid_;
  stats::Counter& duplicates_;
  stats::Counter& listener_errors_;
};

}  // namespace cepbus::flows
