#pragma once

// TargetStages: one SEDA stage per delivery target (P1: each component's
// receive+process is a stage), for the flows that queue (SedaFlow,
// ReliableFlow). It maps a target to its stage and manages the stages' lives.

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/base/stats/store.h"
#include "bus/core/status.h"
#include "bus/core/wire_names.h"
#include "flows/delivery_target.h"
#include "stages/stage.h"

namespace cepbus::flows {

// What a flow knows about an attached target besides its stage.
struct Attachment {
  uint64_t id = 0;  // unique per attach(), so a stale reference to a re-attached target is detected
  // The target's name, the key of its journal records and of the deliveries
  // it took; held while attached (a client's name is given back after).
  SharedName name;
};

// Thread-safety: with(), withAttachment(), queueLength() and metrics() may run
// from any thread, concurrently with each other and with the control calls
// attach(), detach(), start() and stop(), which are serialized among
// themselves. The control calls must not be made from a stage handler (they
// wait for stages to drain). Ownership: owns the stages, not the targets.
class TargetStages {
 public:
  // Builds the handler of a target's stage.
  using HandlerFactory =
      std::function<stages::StageHandler(DeliveryTarget& target, const Attachment& attachment)>;

  // `base` is the configuration of every stage; each stage is named
  // "<flow_name>/<target name>" and reports into a child of `flow_scope`
  // (the flow's, which outlives this), labelled with its name.
  TargetStages(const std::string& flow_name, const stats::Scope& flow_scope,
               stages::StageConfig base, HandlerFactory factory);
  ~TargetStages();  // stops every stage

  // Creates the target's stage, started if the set is running. AlreadyExists
  // when attached; InvalidArgument (naming the field) when the stage config is bad.
  Result<Attachment> attach(DeliveryTarget& target);
  // Removes the target's stage after draining it. No effect when not attached.
  void detach(DeliveryTarget& target);
  // Starts every stage, replacing those a previous stop() ended.
  void start();
  // Drains and stops every stage; they stay attached.
  void stop();

  // Calls fn(stage, attachment) under a shared lock, so the stage cannot be
  // detached meanwhile. False when `target` is not attached.
  template <typename Fn>
  bool with(const DeliveryTarget& target, Fn&& fn) const {
    ReaderMutexLock lock(map_mu_);
    auto it = entries_.find(&target);
    if (it == entries_.end()) return false;
    fn(*it->second.stage, it->second.attachment);
    return true;
  }
  // As with(), but only if `target` is still the attachment `attachment_id`.
  template <typename Fn>
  bool withAttachment(const DeliveryTarget* target, uint64_t attachment_id, Fn&& fn) const {
    ReaderMutexLock lock(map_mu_);
    auto it = entries_.find(target);
    if (it == entries_.end() || it->second.attachment.id != attachment_id) return false;
    fn(*it->second.stage, it->second.attachment);
    return true;
  }

  size_t queueLength(const DeliveryTarget& target) const;
  std::vector<stages::StageMetricsSnapshot> metrics() const;
  // The attached targets (for redelivery at start).
  std::vector<std::pair<DeliveryTarget*, Attachment>> attached() const;

 private:
  struct Entry {
    DeliveryTarget* target = nullptr;
    Attachment attachment;
    std::unique_ptr<stages::Stage> stage;
    bool stopped = false;
  };

  std::unique_ptr<stages::Stage> makeStage(DeliveryTarget& target,
                                           const Attachment& attachment) const;

  const stats::Scope& flow_scope_;
  const stages::StageConfig base_;
  const HandlerFactory factory_;
  Mutex control_mu_;  // serializes attach/detach/start/stop
  mutable SharedMutex map_mu_;
  std::unordered_map<const DeliveryTarget*, Entry> entries_ GUARDED_BY(map_mu_);
  bool running_ GUARDED_BY(control_mu_) = false;
  uint64_t next_id_ GUARDED_BY(control_mu_) = 1;
};

}  // namespace cepbus::flows
