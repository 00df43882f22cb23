#pragma once

// A SEDA stage (P1): incoming event queue + event handler + thread pool +
// resource controller + admission controller, connected to other stages by
// queues and running concurrently with them.
//
//   offer() --admission--> EventQueue (cost classes) --workers--> handler
//                ^                                        |
//                |  pressure() of downstream stages ------+ (backpressure)
//
// - Admission (stages/admission_controller.h): static threshold and dynamic
//   input/output monitor degrade reliable items to best effort; the capacity
//   is the hard limit past which offer() returns kRejected, which the caller
//   must report to the sender.
// - Resource control (stages/resource_controller.h): a periodic driver grows
//   and shrinks the worker threads between min and max. A stage quiet for a
//   rate window costs no wake-ups: its driver sleeps until the next offer(),
//   and the idle workers of a fixed-size pool sleep until work comes.
// - Backpressure: while a stage named by addDownstream() is saturated, the
//   workers pause their intake (a bounded wait per batch) and admission
//   treats the stage as more loaded; pressure() shows this upstream.
// - stop() refuses new items, lets the workers run the handler on every item
//   already queued, then joins them.
// - Run inline when idle (opt-in, StageConfig::run_inline_when_idle): an item
//   offered while the stage holds nothing (no item queued, none in a
//   handler) is handled on the offering thread, after admission, instead of
//   being queued for a worker. Under light load this saves the hand-off to a
//   worker and back (two thread wake-ups on the latency path, and the CPU of
//   the switches); under load the queue is rarely empty and the stage works
//   as a queue with its own threads. Per-producer order is kept, and the
//   handler never runs on two threads at once more than a stage with
//   max_threads workers allows. The caller's thread pays for the handler,
//   so it is for cheap handlers that never block (routing, handing an event
//   to a buffer); isolation from a slow handler needs the queue.
// - Batch handler (the second constructor): a worker hands the handler every
//   item it dequeued in one call — up to batch_size, in queue order, never
//   waiting for more — so that a handler with a per-call cost (a lock, a
//   hand-off to an engine's batched entry point) pays it once per batch. A
//   run inline is a batch of one. The stage still counts per item: the
//   handler says how many of its items failed, and each item's latency is
//   taken when the call that handled it returns.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/status.h"
#include "stages/admission_controller.h"
#include "stages/event_queue.h"
#include "stages/resource_controller.h"
#include "stages/stage_metrics.h"
#include "stages/stage_types.h"
#include "stages/thread_pool.h"

namespace cepbus::stages {

// The handler runs on the stage's pool threads; it returns a Status that the stage counts
// (failed items are counted and logged, never rethrown). It must not throw.
using StageHandler = std::function<Status(StageItem&)>;

// What a batch handler reports about the items it was given: how many of
// them failed (counted one by one, at most the batch's size) and why the
// first one did (for the log; OK when none failed).
struct StageBatchResult {
  size_t failed = 0;
  Status first_error;
};

// Handles `items` (one to batch_size of them, in queue order) on a pool
// thread, or on the offering thread for a run inline. It may move from the
// items; the stage releases them after the call. It must not throw (a throw
// counts every item of the batch as failed).
using StageBatchHandler = std::function<StageBatchResult(std::span<StageItem> items)>;

struct StageConfig {
  std::string name;
  size_t capacity = 4096;  // hard limit of queued items (all priority classes)
  size_t min_threads = 1;
  size_t max_threads = 1;
  // Most items a worker takes per queue lock acquisition.
  size_t batch_size = 64;
  // Cost class boundaries (see CostClassifier): by default cost <= 0, 1..99
  // and >= 100 are three classes, the cheapest dequeued first.
  std::vector<int32_t> cost_thresholds = {1, 100};
  AdmissionConfig admission;
  ResourceConfig resource;
  // Longest a worker pauses before each batch while a downstream is saturated.
  std::chrono::microseconds backpressure_wait{2'000};
  // How long an idle worker spins before sleeping (trades CPU for hop latency).
  std::chrono::nanoseconds idle_spin = EventQueue::kDefaultSpin;
  // Handle an item on the offering thread when the stage is idle (see above).
  bool run_inline_when_idle = false;
};

// Thread-safety: offer(), offerWait(), pressure(), queueLength(), metrics()
// and name() may be called from any thread at any time, also concurrently
// with start()/stop(). start(), stop() and addDownstream() are control-plane
// calls; stop() is idempotent and may race with itself, but must not be called
// from this stage's own handler (it joins the handler's thread).
// Ownership: the stage owns its queue, threads and queued items; a downstream
// stage passed to addDownstream() is not owned and must outlive this stage
// (pressure() reads it, and so does the stage's stats scope).
class Stage {
 public:
  static constexpr size_t kMaxDownstream = 16;

  // Throws std::invalid_argument (naming the stage and the field) on a bad
  // config: capacity 0, min_threads 0, min > max, batch_size 0, a bad
  // admission fraction, or cost thresholds not strictly ascending. The stage
  // reports its numbers into `scope` (a scope of kStageSchema); without one,
  // into a store of its own.
  Stage(StageConfig config, StageHandler handler, stats::ScopePtr scope = nullptr);
  // The same, with a handler that takes what a worker dequeued in one call.
  Stage(StageConfig config, StageBatchHandler handler, stats::ScopePtr scope = nullptr);
  ~Stage();  // calls stop()
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  // Starts min_threads workers and the resource controller. Items offered
  // before start() wait in the queue. No effect after the first call.
  void start();
  void stop();  // idempotent; drains queued items, then joins threads

  // Non-blocking (unless it runs the handler inline), never throws; priority
  // from item.event->cost(). kAccepted/kDegraded: queued, or already handled
  // when the stage ran it inline.
  Admission offer(StageItem item);
  // Blocks up to `timeout` while the stage is saturated (backpressure-aware wait), then offers.
  Admission offerWait(StageItem item, std::chrono::nanoseconds timeout);

  Pressure pressure() const;  // read by upstream stages and by flows
  size_t queueLength() const { return queue_.size(); }
  const std::string& name() const { return config_.name; }
  const StageConfig& config() const { return config_; }
  StageMetricsSnapshot metrics() const;  // enqueued, processed, failed, rejected, degraded,
                                         // queue length, threads, latency percentiles

  // Declares `downstream` as fed by this stage: while it is saturated this stage slows its intake.
  // Throws std::invalid_argument for null, self, or more than kMaxDownstream stages.
  void addDownstream(const Stage* downstream);

 private:
  enum class State : uint8_t { kCreated, kRunning, kStopped };

  // The constructors' common part; exactly one of the handlers is set.
  Stage(StageConfig config, StageHandler handler, StageBatchHandler batch_handler,
        stats::ScopePtr scope);
  // Registers what the stage reports by reading itself (queue length, threads, ...).
  void reportGauges();

  void workerLoop();
  // Runs the handler on `n` items, counts them and releases their events.
  void handleBatch(StageItem* items, size_t n);
  // Runs the per-item handler on one item and records its latency; true when it returned OK.
  bool handleOne(StageItem& item);
  // Runs the batch handler on `items` and records their latencies; returns how many failed.
  size_t handleAll(std::span<StageItem> items);
  void countFailures(uint64_t n, const Status& why);
  // Claims the idle stage for the calling thread and handles `item` on it;
  // false (item untouched) when the stage is not idle or not running.
  bool tryRunInline(StageItem& item);
  // A worker that took items while an inline run holds the stage waits for it.
  void waitForInlineRun() const;
  // False once the stage has been quiet for a rate window (see PeriodicTask).
  bool controllerTick(std::chrono::steady_clock::time_point now);
  bool downstreamSaturated() const;
  // Waits (bounded) while a downstream stage is saturated; true if it waited.
  bool pauseForDownstream();
  uint64_t offeredTotal() const;  // queued, run inline or rejected
  uint64_t handledTotal() const;

  const StageConfig config_;
  const StageHandler handler_;
  const StageBatchHandler batch_handler_;
  AdmissionController admission_;
  ResourceController resource_;  // used by the controller thread only
  // What the controller saw at its last tick (its thread only).
  uint64_t last_offered_ = 0;
  uint64_t last_handled_ = 0;
  int64_t quiet_ticks_ = 0;
  EventQueue queue_;
  // Handler time summed over the workers: the resource controller's input.
  alignas(stats::kCacheLine) std::atomic<uint64_t> busy_ns_{0};
  std::array<std::atomic<const Stage*>, kMaxDownstream> downstream_{};
  std::atomic<size_t> downstream_count_{0};
  // With run_inline_when_idle: items queued or in a handler (counted before
  // the push, uncounted after the handler), plus kInlineRun while an inline
  // run holds the stage. Zero means idle, which an inline run claims by CAS.
  static constexpr uint64_t kInlineRun = uint64_t{1} << 63;
  std::atomic<uint64_t> outstanding_{0};

  std::mutex lifecycle_mu_;  // serializes start(), stop(), addDownstream()
  std::atomic<State> state_{State::kCreated};
  ThreadPool pool_;
  PeriodicTask controller_;
  // Last, so destroyed first: the scope's functions read the members above.
  const stats::ScopePtr scope_;
  StageMetrics metrics_;
};

}  // namespace cepbus::stages
