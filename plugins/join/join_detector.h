#pragma once

// The join engine's detector: P4's one dispatcher and n join workers.
//
// The dispatcher is the thread calling onEvent() or onEvents(): it ignores
// events of types the query does not name, drops tuples whose probability is
// below the threshold (none of their pairs could pass), checks the key and
// site, and appends each tuple to the probe buffer of the worker owning its
// key's hash.
// Every partner of a tuple has its key, so each tuple is inserted in exactly
// one place and probed where all its partners are — without P4's broadcast of
// every probe to every per-checkpoint thread. Each worker (a std::thread with
// its own JoinPartition: ULI index, expiry, spill) joins its tuples in arrival
// order.
//
// With one worker there is nothing to run in parallel: its partition runs on
// the caller's thread (no thread, no hand-off), 64 tuples at a time (or
// `batch` if smaller, so that its cache misses overlap), pairs are reported
// as soon as those are processed, and the "idle" restore check of a worker
// runs every `batch` tuples.
//
// Pairs are handed to the sink on the caller's thread, from onEvent() and
// flush(), in the arrival order of the tuple that completed them (the workers'
// results are merged by arrival number), so the output does not depend on the
// number of workers; pairs found by a restore from disk come when the restore
// happens. With several workers the dispatcher hands tuples off in batches
// (option batch, default 1024 tuples), and pairs are reported at hand-offs: a
// pair waits for at most that many more tuples, or for flush(). flush() waits
// until the workers have processed everything, brings back everything spilled
// and reports every pair.
//
// Errors: InvalidArgument from onEvent() for an event out of ts order, a
// missing or unusable key or site (the event is refused; the join goes on).
// IoError from onEvent() or flush() reports, once, a spill write that failed
// (a full disk): the event was consumed, spilling is disabled and the join
// goes on in memory with nothing lost.
//
// Thread safety: as every Detector, driven by one thread at a time; the
// workers are internal. The sink must outlive the detector.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bus/core/plugin/detector.h"
#include "plugins/join/join_partition.h"
#include "plugins/join/join_plan.h"

namespace cepbus::plugins::join {

class JoinDetector final : public plugin::Detector {
 public:
  // Starts the workers; IoError when the spill directory or files cannot be made.
  static Result<std::unique_ptr<JoinDetector>> create(const JoinPlanPtr& plan,
                                                      plugin::MatchSink& sink);
  ~JoinDetector() override;
  JoinDetector(const JoinDetector&) = delete;
  JoinDetector& operator=(const JoinDetector&) = delete;

  Status onEvent(const EventPtr& event) override;
  // onEvent() for each event, in one call: the dispatcher loads the events a
  // few places ahead (each is a separate allocation, and the first touch of
  // its fields and attributes would otherwise stall once per event). Errors
  // as onEvent(): the first one, in the order per-event calls would return
  // them.
  Status onEvents(std::span<const EventPtr> events) override;
  Status flush() override;

  // Snapshots (section "join", version 1): the clock, the arrival numbers,
  // the tuples not yet handed to a worker, the pairs found and not yet
  // reported, and each partition's window and adaptive state, with what it
  // has spilled read back from its files (restore() writes it into the new
  // detector's own). With worker threads, snapshot() first waits for them to
  // finish what they were handed (it reports nothing: their pairs go into
  // the snapshot).
  uint32_t snapshotVersion() const override { return kSnapshotVersion; }
  Status snapshot(plugin::SnapshotWriter& out) const override;
  Status restore(plugin::SnapshotReader& in) override;

  struct Stats {
    uint64_t events = 0;           // of the query's types
    uint64_t below_threshold = 0;  // dropped by the dispatcher
    uint64_t pairs = 0;            // reported to the sink
    std::vector<PartitionStats> partitions;
  };
  // Valid right after flush() (the workers are idle then).
  Stats stats() const;
  const std::string& spillDirectory() const { return spill_dir_; }

 private:
  struct Batch {
    std::vector<Tuple> tuples;
    uint64_t id = 0;
    uint64_t upto = 0;  // every tuple up to this arrival number has been dispatched
    bool flush = false;
  };
  struct Chunk {
    std::vector<JoinedPair> pairs;
    uint64_t upto = 0;
  };
  struct Worker {
    std::unique_ptr<JoinPartition> partition;
    std::thread thread;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Batch> in;
    std::deque<Chunk> out;
    uint64_t done_batch = 0;
    Status error;
    bool stop = false;
    // Caller side: pairs received, not yet reported.
    std::vector<JoinedPair> ready;
    size_t head = 0;
    uint64_t upto = 0;
  };
  class Composer;

  static constexpr uint32_t kSnapshotVersion = 1;

  JoinDetector(JoinPlanPtr plan, plugin::MatchSink& sink);
  void run(Worker& w);
  void handOff(bool flush);
  // Reports the pairs every worker is done with (all of them with `all`).
  void collect(bool all);
  void report(const JoinedPair& pair);
  Status takeError();
  // onEvent() without taking error_: the event's own error (it is refused),
  // else OK, with any error of the join itself left in error_.
  Status dispatch(const EventPtr& event);
  // One worker, on the caller's thread: queue `t`, run the queue when full.
  void processInline(Tuple t);
  Status runInline();
  // Reports and clears inline_pairs_; the partition's error, if any.
  Status reportInline();
  // Waits until every worker has processed what it was handed.
  void quiesce() const;

  JoinPlanPtr plan_;
  plugin::MatchSink& sink_;
  std::unique_ptr<Composer> composer_;
  std::string spill_dir_;  // created by this detector, removed with it
  std::vector<std::unique_ptr<Worker>> workers_;
  bool inline_ = false;                   // one worker: no thread
  std::vector<JoinedPair> inline_pairs_;  // found, not yet reported
  size_t since_idle_check_ = 0;
  std::vector<std::vector<Tuple>> pending_;  // per worker, not yet handed off
  size_t pending_count_ = 0;
  uint64_t seq_ = 0;
  uint64_t batch_id_ = 0;
  Timestamp last_ts_ = INT64_MIN;
  Stats stats_;
  Status error_;
};

}  // namespace cepbus::plugins::join
