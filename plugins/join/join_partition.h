#pragma once

// One join worker's share of the window (P4's join thread): its ULI index —
// hash buckets whose lists are kept in descending probability — its expiry,
// and its adaptive spill to disk. The index, the two expiry modes and the
// spill are described in docs/engines.md ("join").
//
// - Tuples reach a partition in arrival order, and every partner of a tuple
//   reaches the same partition (the dispatcher partitions by the key's
//   hash); each tuple probes the index, reports every pair it completes,
//   then is inserted.
// - Expiry on insert and batch expiry give the same pairs: stale entries
//   never join. A stale entry may outlive its event (the events are owned by
//   a FIFO in arrival order) and is never dereferenced.
// - Spilled or not, every pair is reported exactly once; only its timing
//   changes. A restore happens when every entry spilled first is stale, when
//   the worker is idle and the spilled entries fit in the budget again, and
//   at flush.
// - A write that fails (a full disk) restores everything already spilled,
//   disables spilling for good and is reported once by takeError(); the join
//   goes on in memory and loses nothing.
//
// Thread safety: none; one worker thread owns a partition.

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/plugin/snapshot.h"
#include "bus/core/status.h"
#include "plugins/join/join_plan.h"
#include "plugins/join/spill_store.h"

namespace cepbus::plugins::join {

// A reading as the join sees it. `key` points into `event`, which owns it.
struct Tuple {
  EventPtr event;
  const Value* key = nullptr;
  uint64_t hash = 0;
  double prob = 1;
  Timestamp ts = 0;
  uint64_t seq = 0;  // arrival number, 1-based, over the whole detector
  int32_t site = -1;
  uint32_t stream = 0;
};

// A joined pair: `left` arrived first. `seq` orders reporting.
struct JoinedPair {
  EventPtr left;
  EventPtr right;
  double prob = 0;
  uint64_t seq = 0;
};

// Prefetches (for writing) the reference counts of `p`, which copying or
// releasing it writes: by the time an event enters the window, and again when
// it leaves, its control block has long left the cache, and an atomic update
// of a cold line stalls the thread, so the join loads it a few events ahead.
// libstdc++ only, where a shared_ptr is its pointer followed by its control
// block's; elsewhere it does nothing. A hint: no address can fault.
inline void prefetchRefCount(const EventPtr& p) {
#if defined(__GLIBCXX__)
  static_assert(sizeof(EventPtr) == 2 * sizeof(void*));
  const void* words[2];
  std::memcpy(static_cast<void*>(words), static_cast<const void*>(&p), sizeof words);
  __builtin_prefetch(words[1], 1);
#else
  (void)p;
#endif
}

// The key's hash as the dispatcher and the partitions use it.
uint64_t hashKey(const Value& key);

// Checks an event against the plan and makes its tuple. InvalidArgument
// names a missing or non-scalar key, a missing site or a site the time matrix
// does not know. `stream` is the event's stream (JoinPlan::streamOf).
Result<Tuple> makeTuple(const JoinPlan& plan, const EventPtr& event, int stream, uint64_t seq);

// Whether `earlier` and `later` (arrived in that order) join; sets `prob`.
bool joinable(const JoinPlan& plan, const Tuple& earlier, const Tuple& later, double& prob);

struct PartitionStats {
  size_t entries = 0;          // tuples in memory
  size_t memory_bytes = 0;     // their accounted bytes
  size_t spilled = 0;          // tuples on disk now
  uint64_t spills = 0;         // spill operations
  uint64_t spilled_total = 0;  // tuples ever written
  uint64_t restores = 0;
  uint64_t restored_pairs = 0;  // pairs found by restores
  uint64_t probes_stopped_early = 0;
  bool spill_disabled = false;
};

class JoinPartition {
 public:
  // `budget_bytes` is 0 without spill. The stores are required when the plan
  // spills (entries first, then the probe log).
  JoinPartition(JoinPlanPtr plan, size_t budget_bytes, std::unique_ptr<SpillStore> entries,
                std::unique_ptr<SpillStore> probes);

  // Probes with `t`, appends every pair it completes to `out`, inserts it.
  void process(Tuple t, std::vector<JoinedPair>& out);
  // process() for each tuple in order, with the index memory of the tuples a
  // few places ahead prefetched: a probe's bucket, group and list are three
  // dependent cache misses (and its key a fourth, on another core's cache
  // with worker threads), which this overlaps with the work on earlier
  // tuples.
  void processAll(std::vector<Tuple>& tuples, std::vector<JoinedPair>& out);
  // Restores what is on disk if it fits in the budget again (an idle worker).
  void restoreIfRoom(std::vector<JoinedPair>& out);
  // Restores everything on disk (end of stream).
  void restoreAll(std::vector<JoinedPair>& out);

  bool hasSpilled() const { return spilled_count_ > 0; }

  // The partition's state (its window in memory, expiry and adaptive state,
  // clock and counters) for JoinDetector::snapshot(), and what is spilled:
  // the records of both spill files, read back, and the probes not yet
  // committed to the log. IoError when a spill file cannot be read.
  Status snapshot(plugin::SnapshotWriter& out) const;
  // Reads back what snapshot() wrote into a partition just made from the
  // same plan, writing the spilled records into its own spill files; what
  // does not fit it (a slot, site or stream out of range, a key in the wrong
  // bucket, a live entry without its event, spilled records for a join that
  // does not spill or files that cannot be written) fails `in`.
  void restore(plugin::SnapshotReader& in);
  bool hasError() const { return !error_.isOk(); }
  // The first error since the last call (a failed spill write or restore
  // read), else OK.
  Status takeError();
  PartitionStats stats() const;

 private:
  // A windowed tuple; its key is its group's, its event in `owned_` (valid
  // while the entry is not stale; reset when the entry is spilled).
  struct Entry {
    double prob;
    Timestamp ts;
    uint64_t seq;
    int32_t site;
    uint32_t stream;
    uint32_t bytes;  // accounted against the budget (0 without one)
    EventPtr* event;
  };
  struct Owned {
    Timestamp ts;
    EventPtr event;
  };
  // The list of one key inside a bucket, in descending probability: a probe
  // compares the key once, not once per entry.
  struct Group {
    uint64_t hash;
    Value key;
    std::vector<Entry> list;
  };
  using Bucket = std::vector<Group>;

  // Moves the tuple's event into `owned_`.
  Entry toEntry(Tuple&& t);
  // Releases the events at the FIFO's front that are stale. Every event
  // pushed by time T is stale by T + window (restored ones included: their
  // ts is within a window of their restore), so nothing stays longer.
  void release();
  // The group of `key` in bucket `slot`, created empty if absent.
  Group& groupOf(size_t slot, uint64_t hash, const Value& key);
  // Prefetch stages of processAll(): the bucket, then (once that is in
  // cache) its groups, then the list of the group with the hash.
  void prefetchBucket(uint64_t hash) const;
  void prefetchGroups(uint64_t hash) const;
  void prefetchList(uint64_t hash) const;
  void insert(Group& g, Entry e);
  void expireAll();
  void expireBucket(Bucket& bucket);
  void spill(std::vector<JoinedPair>& out);
  void noteError(Status s);
  // Appends the event's spill encoding; false (noted, spilling disabled) if
  // it cannot be encoded.
  bool encodeFor(const Event& event, std::string& payload);
  bool stale(Timestamp ts) const { return now_ - ts >= plan_->window; }
  // One entry of a group's list, its event by its place in owned_ (0: its
  // event left the FIFO: a stale entry, never dereferenced).
  void snapshotEntry(const Entry& e, const std::unordered_map<const EventPtr*, uint64_t>& at,
                     plugin::SnapshotWriter& out) const;
  Entry restoreEntry(plugin::SnapshotReader& in);
  Status snapshotSpilled(plugin::SnapshotWriter& out) const;
  void restoreSpilled(plugin::SnapshotReader& in);

  JoinPlanPtr plan_;
  size_t budget_;
  std::vector<Bucket> slots_;
  size_t mask_;
  Timestamp now_ = INT64_MIN;
  uint64_t last_seq_ = 0;
  Timestamp next_deletion_ = INT64_MIN;
  size_t sweep_hand_ = 0;  // on-insert expiry: the next bucket swept
  size_t entries_ = 0;
  size_t bytes_ = 0;
  // The windowed events in insertion order; a deque, so entries' pointers
  // stay valid as it grows and shrinks at the ends.
  std::deque<Owned> owned_;
  // Where a restored stale entry whose event had left the FIFO points.
  EventPtr released_;

  // Spill state.
  std::unique_ptr<SpillStore> entry_store_;
  std::unique_ptr<SpillStore> probe_store_;
  std::vector<Tuple> unlogged_;  // probe-log tuples buffered but not yet committed
  size_t spilled_count_ = 0;
  size_t spilled_bytes_ = 0;
  Timestamp first_spill_now_ = 0;
  bool spill_disabled_ = false;
  // prob[i] of less-than-probability: probes into and pairs out of bucket i.
  std::vector<uint32_t> bucket_probes_;
  std::vector<uint32_t> bucket_hits_;
  uint64_t total_probes_ = 0;
  uint64_t total_hits_ = 0;

  PartitionStats stats_;
  Status error_;
};

}  // namespace cepbus::plugins::join
