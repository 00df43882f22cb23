#pragma once

// QueryRuns: the detection of one active partition — a detection of each
// cluster query (detection::Detection, made from the query's recipe), fed
// the partition's events in event-time order through one reorder buffer of
// the cluster's max-delay, which every query's detection shares.
//
// It is the only place where a partition runner (partition_runner.h) meets
// detectors and event time: the runner hands it events and learns, through
// its Listener, of matches, of how far event time has gone, and of detector
// errors.
//
// Event time. The partition is its queries' one source (its publishers'
// events come in their order already: stream_sequencer.h), so event time is
// its newest ts, and the watermark that newest ts minus the max-delay; each
// detector hears the watermark as it moves, so a trailing negation or a
// window closes once it passes, with no later event released. A partition
// silent for the source idle timeout whose events declare their time unit
// follows the wall clock (plugin::WallClockAdvance, as the bus's queries
// do): tick() moves its event time to the wall-clock time, never back, so
// its windows close and its timers fire; an event that comes afterwards
// more than the max-delay behind that time is late.
//
// Thread-safety: none; one per active partition, driven by its runner.
// Ownership: the queries and the listener outlive it.

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"
#include "bus/host/detection/detection.h"
#include "bus/host/time/reorder.h"
#include "bus/host/time/source_clock.h"
#include "services/cluster/cluster_queries.h"

namespace cepbus::services::cluster {

// How a partition keeps its event time (see the file comment).
struct PartitionTime {
  Timestamp max_delay = 0;
  std::chrono::milliseconds idle_timeout = plugin::kDefaultIdleTimeout;
  pattern::TimeUnit unit = pattern::TimeUnit::kNone;  // kNone: no wall clock
};

// The event time settings of `spec`'s partitions.
PartitionTime partitionTime(const ClusterSpec& spec);

class QueryRuns {
 public:
  using Time = std::chrono::steady_clock::time_point;
  using WallTime = std::chrono::system_clock::time_point;

  // What the runs report, synchronously, while they are fed.
  class Listener {
   public:
    virtual ~Listener() = default;
    // A detector of `query` found `match` (a view, valid during the call).
    virtual void onMatch(const CompiledQuery& query, const plugin::Match& match) = 0;
    // Event time reached `ts`: every event before it went to every
    // detector, and any event still to come that is not late is at `ts`
    // or after. Never back within a stream.
    virtual void onReleased(Timestamp ts) = 0;
    // A detector of `query` failed on an event or a flush; the others go on.
    virtual void onDetectorError(const CompiledQuery& query, const Status& error) = 0;
  };

  // A detector of each query of `queries`; the engine's error when one
  // cannot be made.
  static Result<std::unique_ptr<QueryRuns>> create(std::span<const CompiledQuery> queries,
                                                   const PartitionTime& time, Listener& listener);
  ~QueryRuns();
  QueryRuns(const QueryRuns&) = delete;
  QueryRuns& operator=(const QueryRuns&) = delete;

  // Takes `event`, which the partition got at `now`, into event-time order;
  // InvalidArgument, naming both timestamps, when it comes more than the
  // max-delay behind the event time: then it is late and reaches no detector.
  Status push(EventPtr event, Time now);
  // Feeds every detector the events now in order and the watermark, then
  // flushes them, so that every composite those events and that time make
  // is reported before it returns.
  void release();
  // The periodic tick: when the partition has been silent for the idle
  // timeout and its time unit is declared, moves its event time to the
  // wall clock `wall` (never back) and release()s what that lets go.
  void tick(Time now, WallTime wall);
  // The end of the stream: every event held back for order goes to the
  // detectors, which then report everything they still hold.
  void drain();
  // A new stream after drain(): fresh detectors and a fresh order.
  void restart();
  // The event time (the newest ts pushed, or the wall-clock time it moved
  // to) minus the max-delay: an event below it is late. nullopt before the
  // stream's first event.
  std::optional<Timestamp> watermark() const;

 private:
  struct Run;
  QueryRuns(const PartitionTime& time, Listener& listener);
  void feed(const EventPtr& event);
  // Tells every detector that time passed the watermark.
  void passTime();
  // Has every detector report what the events fed so far make.
  void flush(bool end_of_stream);

  const PartitionTime time_;
  Listener& listener_;
  std::vector<std::unique_ptr<Run>> runs_;
  // The stream's order, its one source's clock and the wall-clock rule:
  // replaced for each new stream.
  std::optional<plugin::ReorderBuffer> order_;
  std::optional<plugin::SourceClock> clock_;
  std::optional<plugin::WallClockAdvance> wall_clock_;
  Timestamp reported_ = INT64_MIN;  // the last time onReleased() told
};

}  // namespace cepbus::services::cluster
