#pragma once

// SedaFlow: delivery through one SEDA stage per target (P1). send() only
// offers the exchange to each target's stage and returns; the stage's pool
// delivers it. Admission answers map to outcomes: kAccepted queues it,
// kDegraded queues it but is counted and reported (reliable asked, best effort
// given — this flow keeps nothing on disk), kRejected is reported to the
// sender and returned in the SendOutcome: never a silent drop.

#include <string>
#include <vector>

#include "flows/abstract_flow.h"
#include "flows/slot_pool.h"
#include "flows/target_stages.h"
#include "stages/stage.h"

namespace cepbus::flows {

struct SedaFlowConfig {
  std::string name = "seda";
  // The configuration of each target's stage; its name is replaced by
  // "<flow name>/<target name>".
  stages::StageConfig stage;
  // Where the flow and its stages report their numbers; by default a store
  // of its own.
  stats::Store stats;
};

// Thread-safety: as AbstractFlow. Targets must be attached before they are
// sent to; a send to an unattached target is rejected.
class SedaFlow final : public AbstractFlow {
 public:
  explicit SedaFlow(SedaFlowConfig config);
  ~SedaFlow() override;

  Status attach(DeliveryTarget& target) override;
  void detach(DeliveryTarget& target) override;
  size_t queueLength(const DeliveryTarget& target) const override;
  std::vector<stages::StageMetricsSnapshot> stageMetrics() const override {
    return stages_.metrics();
  }

 protected:
  void doSend(const Exchange& exchange, std::span<DeliveryTarget* const> targets,
              WakeHold* wake_hold, SendOutcome& out) override;
  Status doStart() override;
  void doStop() override;

 private:
  // An exchange while it waits in a stage queue.
  struct Parked {
    Exchange exchange;
    // The publisher's, for a run inline only (StageItem::inline_run): a
    // worker's run must not touch it.
    WakeHold* wake_hold = nullptr;
  };

  Status handle(DeliveryTarget& target, stages::StageItem& item);

  SlotPool<Parked> parked_;
  TargetStages stages_;  // last: its stages' handlers use parked_
};

}  // namespace cepbus::flows
