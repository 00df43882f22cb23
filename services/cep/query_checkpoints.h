#pragma once

// Checkpoints of a CEP detection on the running bus (the query option
// checkpoint_interval, docs/checkpoints.md "On the bus").
//
// Input. Each journaled delivery the detection takes keeps its
// acknowledgement (flows::DeferredAck) until a checkpoint covers its event:
// the checkpoint's state (the detection's snapshot, bus/core/plugin/snapshot.h)
// and the acknowledgements are committed in one transaction of the reliable
// flow's journal (flows::DeferredAck::storeCheckpoint()). After a crash the
// journal holds, and redelivers, exactly the events after the stored state.
//
// Output. A composite event is published only once the checkpoint whose
// state produced it is committed: the detection holds it until then
// (Flink's two-phase sink, for a bus whose subscribers take no part in the
// transaction). The checkpoint stores the composites it releases (its
// outbox, with their event ids): a crash while they are being published
// loses none, since the restored detection publishes them again after its
// first checkpoint, and a reliable output flow recognises by its id each
// one it journaled or delivered already. Each composite also carries a
// deterministic id (bus/host/detection/composite_id.h); the ids of the
// newest kPublishedWindow composites are stored with the state, and one
// produced again is dropped (counted), so a replay after a restart
// publishes none twice.
//
// Time. The checkpoint keeps the detection's source clock
// (SourceClock::save()): events the detection holds back for a slower source
// are in its state, and the restored clock releases them after an idle
// timeout even when nothing more comes (SourceClock::restore()).
//
// A checkpoint that cannot be stored (the journal failing) is logged and
// counted; the detection runs on, its acknowledgements and composites wait
// for the next one, so nothing is lost. A stored checkpoint that is not this
// detection's (another query, engine or state version), corrupted or newer
// is refused with a message naming the query, counted, and the detection
// starts empty: the journal then redelivers what it holds as before.
//
// Thread-safety: delivered() and refused() on delivering threads, the rest
// on the detection's thread (restore() before its first event), stats()
// from any thread. Ownership: owns the acknowledgements and the held
// composites; the detection and the queries are its caller's.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/core/event.h"
#include "bus/core/status.h"
#include "bus/host/detection/checkpoint.h"
#include "bus/host/detection/detection.h"
#include "bus/host/time/source_clock.h"
#include "flows/delivery_context.h"
#include "flows/exchange.h"
#include "services/cep/checkpoint_outbox.h"
#include "services/query_host.h"

namespace Poco {
class Logger;
}

namespace cepbus::services::cep {

class CepQuery;

struct CheckpointSettings {
  std::string name;   // the row's key: the detection's endpoint
  std::string label;  // how the log names it ("query q")
  std::chrono::milliseconds interval{0};
  std::string journal_path;  // where restore() reads it (the bus's journal)
  detection::CheckpointIdentity identity;
};

class QueryCheckpoints {
 public:
  static constexpr size_t kPublishedWindow = 10'000;

  QueryCheckpoints(CheckpointSettings settings, Poco::Logger& log);

  // Before the first event: the stored checkpoint into `detection` and
  // `clock`, or nothing (none stored, or one refused: logged and counted).
  // The composites its outbox holds are held again, for `members` (the
  // detection's queries, by member index). False when a stored checkpoint
  // was refused: an engine may have failed part-way through its restore,
  // so `detection` is to be replaced by a new one before any event.
  bool restore(detection::Detection& detection, plugin::SourceClock& clock,
               std::span<const std::shared_ptr<CepQuery>> members);

  // A delivery of `event` whose acknowledgement `context` may give: kept
  // (when journaled) until a checkpoint covers it. Before the event is
  // offered to the detection's stage.
  void delivered(const Event* event, flows::DeliveryContext& context) EXCLUDES(mu_);
  // The stage refused the event delivered(): its delivery is not ours.
  void refused(const Event* event) EXCLUDES(mu_);
  // The detection consumed `events`: the next checkpoint covers them.
  void consumed(std::span<const EventPtr> events) EXCLUDES(mu_);

  // A composite of `query` (its constituents' ids in `constituents`): held
  // for the next checkpoint, or dropped as published already.
  void hold(CepQuery& query, EventPtr composite, std::span<const EventId> constituents);
  // Every service of the bus has started (its subscribers, durable ones
  // included, are there): checkpoints may release composites from now on.
  void activate() { activated_.store(true, std::memory_order_release); }

  // Whether a checkpoint has something to store (consumed events, their
  // acknowledgements, held composites).
  bool pending() const EXCLUDES(mu_);
  // Whether a checkpoint is due: pending() and the interval passed since the
  // last one.
  bool due(std::chrono::steady_clock::time_point now) const EXCLUDES(mu_);
  // Stores a checkpoint of `detection` and `clock` (held by the caller
  // between two calls) and waits for its transaction; then publishes the
  // composites it covers. `consumed`: the events the detection consumed in
  // this run.
  void checkpoint(const detection::Detection& detection, const plugin::SourceClock& clock,
                  uint64_t consumed) EXCLUDES(mu_);
  // The detection stops: a last checkpoint, or, when it cannot be stored,
  // the held composites are dropped (the journal's replay after the next
  // start produces them again).
  void finish(const detection::Detection& detection, const plugin::SourceClock& clock,
              uint64_t consumed) EXCLUDES(mu_);

  CheckpointStats stats() const EXCLUDES(stats_mu_);

 private:
  struct Held {
    CepQuery* query;
    EventPtr composite;
    // Restored from the outbox: it may have gone out before the crash.
    bool redelivery = false;
  };
  // The row's `published` bytes (checkpoint_outbox.h): the window, the
  // held composites and `clock`.
  Result<std::string> encodePublished(const std::optional<plugin::SourceClock::Saved>& clock) const;
  // Stops checkpointing for good: every acknowledgement given now, the held
  // composites published (they can no longer be covered).
  void giveUp(const std::string& why) EXCLUDES(mu_);
  void publishHeld();

  const CheckpointSettings settings_;
  Poco::Logger& log_;
  uint64_t position_base_ = 0;  // the restored checkpoint's position
  PublishedWindow published_{kPublishedWindow};
  std::vector<Held> held_;  // the detection's thread
  bool disabled_ = false;   // the detection's thread
  std::atomic<bool> activated_{false};
  std::chrono::steady_clock::time_point last_{};

  mutable Mutex mu_;
  // Delivered, not yet consumed.
  std::unordered_map<const Event*, std::vector<flows::DeferredAck>> delivered_ GUARDED_BY(mu_);
  // Consumed, waiting for a checkpoint.
  std::vector<flows::DeferredAck> covered_ GUARDED_BY(mu_);
  // Any acknowledgement seen: names the flow checkpoints go to.
  flows::DeferredAck via_ GUARDED_BY(mu_);
  bool changed_ GUARDED_BY(mu_) = false;  // consumed events since the last checkpoint

  mutable Mutex stats_mu_;
  CheckpointStats stats_ GUARDED_BY(stats_mu_);
};

}  // namespace cepbus::services::cep
