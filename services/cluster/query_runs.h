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
// Thread-safety: none; one per active partition, driven by its runner.
// Ownership: the queries and the listener outlive it.

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"
#include "bus/host/detection/detection.h"
#include "bus/host/time/reorder.h"
#include "services/cluster/cluster_queries.h"

namespace cepbus::services::cluster {

class QueryRuns {
 public:
  // What the runs report, synchronously, while they are fed.
  class Listener {
   public:
    virtual ~Listener() = default;
    // A detector of `query` found `match` (a view, valid during the call).
    virtual void onMatch(const CompiledQuery& query, const plugin::Match& match) = 0;
    // Every event up to `ts` went to every detector.
    virtual void onReleased(Timestamp ts) = 0;
    // A detector of `query` failed on an event or a flush; the others go on.
    virtual void onDetectorError(const CompiledQuery& query, const Status& error) = 0;
  };

  // A detector of each query of `queries`; the engine's error when one
  // cannot be made.
  static Result<std::unique_ptr<QueryRuns>> create(std::span<const CompiledQuery> queries,
                                                   Timestamp max_delay, Listener& listener);
  ~QueryRuns();
  QueryRuns(const QueryRuns&) = delete;
  QueryRuns& operator=(const QueryRuns&) = delete;

  // Takes `event` into event-time order; InvalidArgument, naming both
  // timestamps, when it comes more than the max-delay behind the newest event:
  // then it is late and reaches no detector.
  Status push(EventPtr event);
  // Feeds every detector the events now in order, then flushes them, so
  // that every composite those events make is reported before it returns.
  void release();
  // The end of the stream: every event held back for order goes to the
  // detectors, which then report everything they still hold.
  void drain();
  // A new stream after drain(): fresh detectors and a fresh order.
  void restart();
  // The newest ts pushed minus the max-delay (an event below it is late);
  // nullopt before the stream's first event.
  std::optional<Timestamp> watermark() const;

 private:
  struct Run;
  QueryRuns(Timestamp max_delay, Listener& listener);
  void feed(const EventPtr& event);
  // Has every detector report what the events fed so far make.
  void flush(bool end_of_stream);

  const Timestamp max_delay_;
  Listener& listener_;
  std::vector<std::unique_ptr<Run>> runs_;
  std::optional<plugin::ReorderBuffer> order_;  // replaced for each new stream
};

}  // namespace cepbus::services::cluster
