#pragma once

// CepDetection: a detection (bus/host/detection/detection.h) fed by the bus,
// for one query of the CEP service or several sharing it — the broker
// endpoint subscribed to their inputs, the SEDA stage of one worker that
// hands the detection its events, and the backlog of composite events the
// bus refused for now (cep_service.h says what each does) — and its stats
// scope "cep_detection" (cep_stats.h) while it runs.
//
//   broker --> endpoint --offer--> stage (1 worker) --batch--> detection
//     --match of member i--> query i (cep_query.h) --> broker
//
// The worker hands the detection every event it took from the queue at
// once, under one lock; a control item queued between events (a flush, a
// wait for held composites, the mute of a removed query, the swap of an
// edited one) splits the batch there. When nothing is queued behind a batch
// the detection is flushed (flush_when_idle). A reliable query's composite
// the bus refuses for now is held in order with every later one, and the
// worker takes no more events until the bus took them; a run on the
// delivering thread (run_inline=when_idle) never waits for them: it leaves
// the wait to the worker.
//
// Time. Each event's source is the publishing link it came by
// (flows::Exchange::source; 0 for events of no known link, such as another
// query's composites). The detection keeps the event time itself
// (plugin::EventTime::kOwner): after each batch it is the slowest live
// source's newest ts (plugin::SourceClock, with the first query's
// idle_timeout), so an event may come up to the maximum delay behind it; a
// source silent for the idle timeout holds nothing back. With a declared
// time unit, while every source is idle, the event time is the wall clock
// in ts units (never going back), so timers fire with no traffic. The
// service's ticker asks for a tick (requestTick()) several times a second;
// the worker then moves the event time as the clocks say.
//
// An edited query (replace(), a detection of one query): the worker swaps
// the detection after the events queued before the edit, so that each event
// is detected once, by the replaced query before and by the edited one
// after; the edited detection takes over the replaced one's state when the
// edit keeps its shape (bus/host/detection/checkpoint.h). Otherwise it
// starts empty and the replaced detection runs on beside it ("retiring"),
// fed the same events, for the matches open at the edit: it publishes only
// matches that begin at or before the newest ts it had seen then, until its
// watermark passes that ts plus its horizon (CepQuery::horizon(): WITHIN or
// window length), when it is flushed and dropped. From such an edit on,
// the composite ids published are kept (a bounded window), so that a match
// both versions find goes out once. A replaced query that nothing bounds
// (no WITHIN, a session window), or that had seen no event, is flushed and
// dropped at the edit, as for a removal.
//
// Thread-safety: start(), stop(), requestFlush(), detach() and replace() are
// control calls, serialized by the service (not from inside a delivery of a
// queueing flow: removing the endpoint waits for its queues). The endpoint's consumer
// runs on delivering threads. The accessors may be called from any thread.
// Ownership: owns its detection, stage and backlog and holds its queries;
// the endpoint's consumer holds it (shared), so that a straight-through
// delivery still in flight after the endpoint was removed finds it alive
// (its stage then refuses the event). The service stops it before dropping
// it; its destructor only lets the stage drain, since the broker may be
// going away when the last holder (an endpoint) lets go.

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/base/stats/store.h"
#include "bus/core/event.h"
#include "bus/core/plugin/engine_counters.h"
#include "bus/core/status.h"
#include "bus/host/detection/checkpoint.h"
#include "bus/host/detection/detection.h"
#include "bus/host/time/source_clock.h"
#include "flows/exchange.h"
#include "flows/source_ends.h"
#include "services/cep/cep_config.h"
#include "services/cep/output_backlog.h"
#include "services/cep/query_checkpoints.h"
#include "services/query_host.h"
#include "services/service.h"
#include "stages/stage.h"

namespace Poco {
class Logger;
}

namespace cepbus::services::cep {

class CepQuery;
class QueryCheckpoints;
struct QuerySettings;

// Run-time failures repeat per event under a bad feed: log when a count
// reaches 1, 2, 4, 8 ... so that the log shows them without flooding.
inline bool worthLogging(uint64_t before, uint64_t after) {
  return std::bit_width(before) < std::bit_width(after);
}

// How long a stopping detection waits for the bus to take the composite
// events it refused for now before it gives them up (counted, logged); and
// how long removing one query of a shared detection waits for a worker that
// is waiting for the bus.
inline constexpr std::chrono::seconds kStopDrain{5};

class CepDetection final : public detection::DetectionSink {
 public:
  // `members[i]` gets the matches of member i of the group; `inputs` are
  // theirs (the same for all). The stage comes with open().
  // `settings` are the first member's (the planner grouped queries that
  // agree on the ones it reads: flush_when_idle, run_inline, idle_timeout).
  CepDetection(std::vector<std::shared_ptr<CepQuery>> members, std::vector<std::string> inputs,
               const QuerySettings& settings, const CepServiceConfig& config,
               ServiceContext& context);
  ~CepDetection() override;

  // Makes a new detection for this one's members, reporting to it.
  using MakeDetection = std::function<Result<std::unique_ptr<detection::Detection>>()>;
  // Runs `detection` (made for this one's members, reporting to it);
  // `remake` makes another when a refused checkpoint may have left part of
  // its state in the first.
  void run(std::unique_ptr<detection::Detection> detection, MakeDetection remake) {
    detection_ = std::move(detection);
    remake_ = std::move(remake);
  }
  // What its state is (detection::checkpointIdentity() of its queries), for
  // its checkpoints and an edit's carry-over; set before start().
  void identify(detection::CheckpointIdentity identity) { identity_ = std::move(identity); }
  // Names the endpoint and makes the stage: once the service keeps it.
  void open(std::string endpoint);

  const std::string& endpoint() const { return endpoint_; }
  const std::string& label() const { return label_; }
  // The queries it was built for, removed ones included.
  size_t sharedBy() const { return members_.size(); }
  // Members not removed; control plane only.
  size_t live() const { return live_; }
  bool consumes(const std::string& address) const;
  // The outputs of its queries, removed ones included (for the stop order).
  const std::vector<std::string>& outputs() const { return outputs_; }

  // Its queries' registry entries, stage, stats scope, endpoint,
  // subscriptions. `self` is
  // this detection, captured by the endpoint's consumer. On failure it is
  // stopped.
  Status start(const std::shared_ptr<CepDetection>& self);
  // Unsubscribes, drains the stage, flushes the detection, takes its queries
  // out of the registry and itself out of the stats store. Idempotent; it
  // cannot run again.
  void stop();
  // Queues a flush of the detection behind the events already queued, so it
  // runs on the worker. False when the stage refused it (full).
  bool requestFlush();
  // Queues a tick behind the events already queued, unless one is queued or
  // nothing can move without events (no source yet; no time unit and one
  // source): the worker then moves the event time (see Time above).
  void requestTick();
  // Mutes `member`, one of several live members, after the events queued so
  // far: the detection is flushed (without releasing the slack) so that the
  // query's pending matches are published, and its later matches are
  // dropped. Waits (a bounded time) for the worker to get there. The caller
  // takes the query out of the registry.
  void detach(size_t member);

  // What replaces its one query (CepService::replaceQuery()).
  struct Edit {
    std::shared_ptr<CepQuery> query;  // assigned to this detection as member 0
    // Made for `query`, reporting to this detection; no event yet.
    std::unique_ptr<detection::Detection> detection;
    MakeDetection remake;  // another such, for a refused carry-over
    detection::CheckpointIdentity identity;
  };
  // Why a query read as `inputs` and `settings` cannot replace its query in
  // place (replace()): it shares it, the edit changes what the stage feeds
  // the detection or how, or its checkpoints; empty when it can.
  std::string whyNotReplaceable(const std::vector<std::string>& inputs,
                                const QuerySettings& settings) const;
  // Replaces its one query and its detection by `edit`'s, after the events
  // queued so far (see the class comment), and says what was carried over.
  // Waits (a bounded time) for the worker to get there: Unavailable when it
  // did not (it waits for the bus to take held composites); the edit is
  // then made when it gets there. The caller moved the queries' registry
  // entries.
  Result<QueryEdit> replace(Edit edit);

  // A reliable query's composite event, on the detection's thread inside a
  // call into it: published, or held in the backlog when the bus refuses it
  // for now (the worker then waits for it).
  void publishReliably(flows::Exchange exchange);
  // The bus's services have all started (CepService::activate()).
  void activate();
  // Its checkpoints (query_checkpoints.h) from start() on; null when its
  // queries are not checkpointed.
  QueryCheckpoints* checkpoints() const { return checkpoints_.get(); }
  std::optional<CheckpointStats> checkpointStats() const;

  // The detection's numbers (QueryStats without a query's own matches and
  // publish failures).
  QueryStats stats() const;
  // What its detector holds after its last call; nullopt when the engine
  // does not count (fixed when the detection is made).
  std::optional<plugin::DetectorState> partialMatches() const {
    return current()->stats().partial_matches;
  }
  // Composite events the bus refused for now, held in the backlog.
  size_t outputHeld() const { return backlog_.size(); }
  // Member `member`'s matches.
  uint64_t matches(size_t member) const EXCLUDES(current_mu_);
  // Member `member`'s matches its output control suppressed.
  uint64_t suppressed(size_t member) const EXCLUDES(current_mu_);
  // The engine running now (engine auto's trial may change it) and the
  // trial's outcome once it decided.
  std::string engine() const { return current()->engine(); }
  std::optional<plugin::TrialOutcome> trialOutcome() const { return current()->trialOutcome(); }
  // Waits while the worker is inside the detection, so it sees the detector
  // between two events.
  Result<std::string> exportModel(std::string_view format) const EXCLUDES(detection_mu_);
  // The engine's own counters (plugin/engine_counters.h): read now when the
  // worker is not inside the detection, else as last read, so a reader never
  // waits for a batch; empty for an engine without any. Not on the
  // detection's thread.
  plugin::EngineCounters engineCounters() const EXCLUDES(detection_mu_, counters_mu_);
  bool idle() const { return pending_.load(std::memory_order_acquire) == 0; }
  // Events more than the maximum delay behind (detection::DetectionStats::late).
  uint64_t late() const EXCLUDES(current_mu_);

  // detection::DetectionSink, on the detection's thread with detection_mu_ held.
  void onMatch(size_t member, const plugin::Match& match) override;
  void onTrialDecided(const plugin::TrialOutcome& outcome) override;
  // Publishes it on the late address of each query not removed, and logs it
  // (the first, second, fourth, ... of them); the detection counts it.
  void onLate(const EventPtr& event, Timestamp newest) override;

 private:
  // Work queued for the worker behind the events (onWorker()).
  struct Control {
    EventPtr marker;
    std::function<void()> run;
    std::promise<void> done;
  };

  // The endpoint's consumer.
  Status consume(const flows::Exchange& exchange, flows::DeliveryContext& context);
  // Makes checkpoints_ and restores the stored state (start()); the service
  // checked that the detection can checkpoint (cep_service.cc).
  void openCheckpoints();
  // Stores a checkpoint when one is due (the worker, between batches); with
  // `flushed` (the bus is stopping, services/service.h) whenever there is
  // anything to store: while the flows still run, so that the last
  // acknowledgements commit and the held composites go out.
  void checkpointIfDue(bool flushed);
  // Registers its numbers in scope_ (start()).
  void reportStats();
  // Offers a control item (see isControl()), counted as pending while queued.
  stages::Admission offerControl(const EventPtr& marker);
  // The stage's handler: every event of `items` goes to the detection in
  // one onEvents() call per run between control items.
  stages::StageBatchResult handle(std::span<stages::StageItem> items);
  void detectEvents(std::span<stages::StageItem> items, stages::StageBatchResult& result)
      EXCLUDES(detection_mu_);
  // Logs a failed call into the detection (it counted it).
  void failed(const char* call, const Status& status);
  // Logs, once per doubling, the partial matches a state cap dropped or refused.
  void noteEvictions() REQUIRES(detection_mu_);
  // A stage item that is no event to detect: a flush or retry marker, or
  // one of controls_' markers.
  bool isControl(const EventPtr& event) EXCLUDES(controls_mu_);
  // Runs `run` on the worker after the events queued so far, and waits for
  // it a bounded time (kStopDrain): false when it did not get there in
  // time (it runs `run` when it does). A stage that refuses it (full) has
  // it run here at once. `run` takes detection_mu_ itself.
  bool onWorker(std::function<void()> run) EXCLUDES(controls_mu_);
  // The swap of replace(), with detection_mu_ held.
  QueryEdit swap(Edit& edit) REQUIRES(detection_mu_);
  // Runs `call` on the retiring detection: its matches go to the replaced
  // query, its late events nowhere (the edited query publishes them).
  void onRetiring(const std::function<Status(detection::Detection&)>& call) REQUIRES(detection_mu_);
  // Flushes and drops the retiring detection once its watermark passed its
  // `until`, or `now`.
  void retireIfDue(bool now) REQUIRES(detection_mu_);
  // The detection, for the readers that do not take detection_mu_ (a
  // replace() may swap it meanwhile; the copy keeps the old one alive).
  std::shared_ptr<const detection::Detection> current() const EXCLUDES(current_mu_);
  // What the versions edits replaced had counted: a query's numbers go on
  // across its edits, as counters must (only a detection of one query is
  // edited, so they are its member 0's).
  struct Replaced {
    uint64_t consumed = 0;
    uint64_t errors = 0;
    uint64_t late = 0;
    uint64_t matches = 0;
    uint64_t suppressed = 0;
  };
  // current() and what the versions before it counted, read together.
  std::pair<std::shared_ptr<const detection::Detection>, Replaced> currentAndReplaced() const
      EXCLUDES(current_mu_);
  // Flushes (when `flush`: the detection runs) and mutes `member`.
  void mute(size_t member, bool flush) EXCLUDES(detection_mu_);
  // Moves the detection's event time to what the source clock (and, with a
  // time unit and every source idle, the wall clock) says now.
  Status advanceTime() REQUIRES(detection_mu_);
  // Tells the source clock of the sources that ended before the tick being
  // handled was queued: their events were queued before it, so they are in.
  void readSourceEnds() REQUIRES(detection_mu_);
  // Waits until the bus took every held composite event, or gives them up
  // once a stop's deadline passed. Never on a delivering thread.
  void awaitOutputs();
  // Asks the worker to awaitOutputs(): from a run inline, which must not wait.
  void queueRetry();

  // members_[i] is member i's query, removed ones included; fixed at
  // construction but for an edit's swap (on the worker, detection_mu_ held).
  std::vector<std::shared_ptr<CepQuery>> members_;
  size_t live_;                // control plane only
  std::vector<bool> removed_;  // by member; control plane only
  std::vector<std::string> outputs_;
  const std::vector<std::string> inputs_;
  const bool flush_when_idle_;
  const bool run_inline_;
  const std::chrono::milliseconds idle_timeout_;
  const std::chrono::milliseconds checkpoint_interval_;
  detection::CheckpointIdentity identity_;  // set before start(); then detection_mu_
  const pattern::TimeUnit ts_unit_;
  const std::string service_;
  const size_t capacity_;
  const size_t batch_size_;
  ServiceContext& context_;
  Poco::Logger& log_;
  std::string endpoint_;  // set by open()
  std::string label_;     // "query <endpoint>" or "queries <endpoint>", for the log

  // Its queries by sender, for the composites the backlog loses; an edit's
  // query takes its name's place (the worker).
  std::unordered_map<Symbol, std::shared_ptr<CepQuery>> senders_;
  // Declared before stage_: the stage's destructor drains into the
  // detection, which publishes through the backlog.
  OutputBacklog backlog_;
  std::atomic<bool> retry_queued_{false};  // a retry marker is in the stage's queue
  // When awaitOutputs() gives up: never while running, set by stop().
  std::atomic<std::chrono::steady_clock::rep> give_up_at_{
      std::chrono::steady_clock::time_point::max().time_since_epoch().count()};
  // Held by every call into the detection: the worker's (uncontended), a
  // run inline's, exportModel()'s and detach()'s from any thread.
  mutable Mutex detection_mu_;
  // Declared before stage_: the stage's destructor drains into it. Its
  // event path, mute and export under detection_mu_; its counters and
  // trial outcome from any thread, through current(). Replaced (by an
  // edit) with both detection_mu_ and current_mu_ held, so either lock
  // keeps it in place.
  std::shared_ptr<detection::Detection> detection_;
  mutable Mutex current_mu_;
  Replaced replaced_ GUARDED_BY(current_mu_);
  MakeDetection remake_;
  // The replaced version of an edit that could not carry its state over,
  // running on beside detection_ (see the class comment).
  struct Retiring {
    std::shared_ptr<detection::Detection> detection;
    std::shared_ptr<CepQuery> query;
    Timestamp newest = 0;  // the newest ts it had seen at the edit
    Timestamp until = 0;   // it retires once its watermark passes this
  };
  std::optional<Retiring> retiring_ GUARDED_BY(detection_mu_);
  bool feeding_retiring_ GUARDED_BY(detection_mu_) = false;  // inside onRetiring()
  // The composite ids published since an edit ran two versions side by side.
  std::optional<PublishedWindow> edit_published_ GUARDED_BY(detection_mu_);
  mutable Mutex counters_mu_;
  mutable plugin::EngineCounters counters_ GUARDED_BY(counters_mu_);  // as last read
  // The events of one detectEvents() call (the worker's only): reused, empty between calls.
  std::vector<EventPtr> batch_;
  // The state evictions last logged (noteEvictions()).
  uint64_t logged_evictions_ GUARDED_BY(detection_mu_) = 0;
  // Its sources' event time, and the wall-clock time it last moved to.
  plugin::SourceClock clock_ GUARDED_BY(detection_mu_);
  plugin::WallClockAdvance wall_clock_ GUARDED_BY(detection_mu_);
  // The clock's source counts after the last batch or tick, for the stats.
  std::atomic<size_t> sources_{0};
  std::atomic<size_t> idle_sources_{0};
  std::atomic<bool> tick_queued_{false};  // a tick marker is in the stage's queue
  // flows::sourceEnds()'s count when the queued tick was queued, and how far
  // the clock has read it.
  // Ends from before it was made are no business of it.
  std::atomic<uint64_t> ends_before_tick_{flows::sourceEnds().count()};
  uint64_t ends_read_ GUARDED_BY(detection_mu_) = flows::sourceEnds().count();
  // Made by start() when checkpoint_interval_ is set; declared before
  // stage_, whose draining detection holds composites in it.
  std::unique_ptr<QueryCheckpoints> checkpoints_;
  std::unique_ptr<stages::Stage> stage_;
  Mutex controls_mu_;  // control plane and worker
  std::vector<std::shared_ptr<Control>> controls_ GUARDED_BY(controls_mu_);
  bool started_ = false;  // control plane only (the service's mutex)
  bool stopped_ = false;  // control plane only
  bool endpoint_added_ = false;

  std::atomic<uint64_t> rejected_{0};
  std::atomic<size_t> pending_{0};  // admitted to the stage, not yet detected
  // From start() to stop() (control plane); last, so that its functions,
  // which read the detection and the stage, are gone before them.
  stats::ScopePtr scope_;
};

}  // namespace cepbus::services::cep
