#pragma once

// The NFA detector: active instance stacks with links (SASE), constructed
// either on every accepting event (per_event, the baseline) or in batches
// over clusters of accepting events that share a link (P2's aggregated links).
// How the stacks, links, strategies and clusters work is described in
// docs/engines.md ("nfa").
//
// Both construction methods report the same set of matches; batched
// construction reports a match at the next batch boundary or at flush().
// A pattern that ends with NOT(C c) (trailing negation) parks each match of
// its positive elements until event time passes first.ts + W — an event
// after it or onWatermark() — and reports it then unless a C that satisfies
// the negation's predicates came in (last.ts, first.ts + W]; such matches
// come in the order their windows close.
// PARTITION BY reads attributes; an event without the attribute belongs to
// the partition of null values, except that `PARTITION BY key` falls back to
// the event's own partition key (its JSON "key" field).
//
// State caps: a partition holds at most max_partition_partial_matches stack
// entries and all partitions together max_partial_matches, checked when an
// event starts or extends a partial match; at a cap the
// plan's StatePolicy drops the oldest (or sheds the least recently active
// partitions) or refuses new partial matches, each entry dropped or refused
// counted in state().evicted. Batched construction first builds the matches
// its waiting accepting entries complete, so a cap loses no match that was
// complete before it struck. Parked matches are complete and never
// dropped; events kept only to negate are not partial matches.
//
// Thread safety: none; one thread drives a detector. Steady state allocates
// nothing per event: stacks are rings that only grow, construction buffers
// are reused, and a new partition reuses a recycled one.

#include <memory>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bus/core/plugin/detector.h"
#include "plugins/nfa/nfa_plan.h"
#include "plugins/nfa/ring.h"

namespace cepbus::plugins::nfa {

class NfaDetector final : public plugin::Detector {
 public:
  NfaDetector(PlanPtr plan, plugin::MatchSink& sink);
  ~NfaDetector() override;

  Status onEvent(const EventPtr& event) override;
  // Constructs what a batch holds; matches waiting for a trailing
  // negation's window stay parked (a pause is not the passing of time).
  Status flush() override;
  // Reports the parked matches whose window closed at or before `t`
  // (constructing first the batched matches that may be among them).
  Status onWatermark(Timestamp t) override;
  // Partial matches: the events in the active instance stacks of every
  // partition and in matches parked for a trailing negation (negation
  // stacks hold no partial match). Counted as entries are pushed and
  // dropped; the peak is taken after each event.
  // Evicted: entries the state caps dropped or refused (see StatePolicy).
  std::optional<plugin::DetectorState> state() const override {
    return plugin::DetectorState{held_, peak_held_, evicted_, bytes_};
  }

  // Snapshots (plugin::Detector): the partitions in the order they are
  // swept, each with its instance and negation stacks at their absolute
  // indices (links stay valid), the matches parked for a trailing negation,
  // and the event time and batch boundary; a match that batched
  // construction has not yet built stays pending in its stack. The state
  // carries over into an edited query of the same Plan::state_shape.
  uint32_t snapshotVersion() const override { return kSnapshotVersion; }
  Status snapshot(plugin::SnapshotWriter& out) const override;
  Status restore(plugin::SnapshotReader& in) override;

  uint64_t matches() const { return matches_; }

 private:
  struct Entry {
    Timestamp ts = 0;
    uint64_t rip = 0;       // one past the newest earlier entry of the previous stack
    uint64_t rip_self = 0;  // Kleene: one past the newest earlier entry of its own stack
    uint64_t seq = 0;       // position in the partition's stream
    EventPtr event;
  };
  struct Partition {
    std::vector<Ring<Entry>> stacks;
    std::vector<Ring<Entry>> negations;
    uint64_t seq = 0;
    uint64_t constructed = 0;  // accepting entries below this index are constructed
    std::vector<Value> key;
    uint64_t hash = 0;
    uint64_t parked = 0;            // its matches waiting in parked_
    uint64_t held = 0;              // entries in its instance stacks
    Timestamp last_ts = INT64_MIN;  // its newest event, for shedding the least recent
  };
  // A match of the positive elements waiting for its trailing negations'
  // window to close. Slots are reused, so their vectors keep their capacity.
  struct Parked {
    Timestamp deadline = 0;  // first.ts + W: decided once time passes it
    uint64_t seq = 0;        // parking order, for equal deadlines
    Partition* partition = nullptr;
    std::vector<EventPtr> events;
    std::vector<uint32_t> ends;
  };
  // Orders the parked-match heap: the earliest (deadline, seq) on top.
  struct LaterDeadline {
    const std::vector<Parked>* parked;
    bool operator()(uint32_t a, uint32_t b) const;
  };

  static constexpr uint32_t kSnapshotVersion = 1;

  // a + b, or INT64_MAX when it overflows (b >= 0).
  static Timestamp addCapped(Timestamp a, Timestamp b);
  // What an entry keeps alive, for DetectorState::bytes: the entry and the
  // fixed part of its event (an event on two stacks counts twice).
  static uint64_t entryBytes(const Event& event);
  // Drops the entries of `stack` older than `bound`; returns how many and
  // the bytes they kept alive.
  static std::pair<uint64_t, uint64_t> dropBefore(Ring<Entry>& stack, Timestamp bound);

  Partition* partitionFor(const Event& event);
  // A live partition for `key` (hashed `hash`), from the pool when it can.
  Partition* addPartition(std::vector<Value> key, uint64_t hash);
  void snapshotPartition(const Partition& p, plugin::SnapshotWriter& out) const;
  void restorePartition(Partition& p, plugin::SnapshotReader& in);
  void recycleEmptyPartitions();
  bool passes(const std::vector<const pattern::Conjunct*>& filters, int slot, bool kleene,
              const Event& event);
  // True when it pushed an entry that does not complete a match.
  bool push(Partition& p, int k, const EventPtr& event, uint64_t seq);
  void expire(Partition& p, Timestamp bound);
  // Drops the entries of p's instance stacks older than `bound` and returns
  // how many; negation stacks stay (parked matches may still need them).
  uint64_t dropEntries(Partition& p, Timestamp bound);
  // State caps under StatePolicy::kDropOldest (nfa_plan.h).
  void trimOldest(Partition& p, uint64_t cap);
  void shedLeastRecent();
  // StatePolicy::kRefuseNew: whether an entry that would not complete a
  // match is refused now.
  bool atCap(const Partition& p) const;
  void runBatch(Timestamp now);
  void constructPending(Partition& p);

  // Construction (see the file comment). The bound events fill buffers from
  // the end backwards, so [pos_, end_) is always the binding in pattern order.
  void reserveBuffers(const Partition& p);
  void constructOne(Partition& p, uint64_t index);
  void constructCluster(Partition& p, uint64_t begin, uint64_t end);
  // False when the binding's probability fell below the threshold.
  bool bindPosition(uint64_t index, const Entry& entry);
  void enterElement(int k, uint64_t index);
  void grow(int k);
  void completed(int k);
  void emitFirstElements(uint64_t rip, Timestamp lo);
  void leaf();
  void leafCluster();
  void emit();
  bool testCheck(const Check& check);
  bool bindChecks(int k, bool prepended);
  bool negationBlocks(int n);
  // Whether an entry of negation n's stack with after < ts < before
  // satisfies every condition of the negation over the current binding.
  bool negatedBetween(int n, const Ring<Entry>& stack, Timestamp after, Timestamp before);
  // Trailing negation: parks the match being emitted.
  void park(std::span<const uint32_t> ends);
  // Decides every parked match whose deadline is <= t, in deadline order.
  void decideParked(Timestamp t);
  bool trailingNegated(const Parked& match);
  bool verifyElement(int k);
  bool verifyStep(int k, size_t position);
  bool qualifies(int k, size_t position, const Entry& candidate);

  const PlanPtr plan_;
  plugin::MatchSink& sink_;
  const Composer composer_;
  const int m_;
  const bool any_match_;
  const bool batched_;
  // The first element is a single event with nothing to check once bound:
  // its candidates are emitted in one tight loop (both methods use it).
  const bool plain_first_;
  const bool member_checks_;                    // batched: something names the accepting element
  const std::span<const uint32_t> fixed_ends_;  // empty when an element is Kleene
  const double min_prob_;                       // PROBABILITY >= p, else 0
  // No match can take an event less likely than the threshold. Only
  // strategies that never choose between events may leave it off the stacks:
  // skip_till_next_match would take it (and lose the match), not a later one.
  const bool drop_unlikely_;

  std::unique_ptr<Partition> single_;  // when there is no PARTITION BY
  std::unordered_multimap<uint64_t, Partition*> by_hash_;
  std::vector<std::unique_ptr<Partition>> live_;
  std::vector<std::unique_ptr<Partition>> pool_;

  Timestamp now_ = INT64_MIN;
  Timestamp next_batch_ = INT64_MIN;  // batched construction / partition sweep boundary
  uint64_t matches_ = 0;
  uint64_t held_ = 0;  // entries in the instance stacks, all partitions
  uint64_t peak_held_ = 0;
  uint64_t evicted_ = 0;  // entries the caps dropped or refused
  uint64_t bytes_ = 0;    // what the held entries keep alive (entryBytes())
  const uint64_t partition_cap_;
  const uint64_t total_cap_;
  const bool refuse_new_;
  std::vector<Partition*> shed_order_;  // shedLeastRecent()'s scratch

  // Construction state.
  Partition* cur_ = nullptr;
  Timestamp lo_ts_ = 0;  // window: every bound event has ts >= lo_ts_
  std::vector<const EventPtr*> pbuf_;
  std::vector<const Event*> ebuf_;
  std::vector<uint64_t> ibuf_;  // stack index of each bound event
  // prob_[i]: the product of the probabilities of the events at [i, end_);
  // one longer than pbuf_ (prob_[end_] is 1).
  std::vector<double> prob_;
  size_t pos_ = 0;
  size_t end_ = 0;
  size_t estart_[kMaxElements + 1] = {};
  uint32_t ends_[kMaxElements] = {};
  std::vector<pattern::SlotBinding> bind_;
  bool cluster_ = false;
  uint64_t cluster_begin_ = 0;
  uint64_t cluster_end_ = 0;
  std::vector<const Event*> scratch_;  // push filters of Kleene elements

  // Trailing negation: parked matches, a min-heap of indices into parked_
  // by (deadline, seq), and the free slots.
  const bool trailing_;
  std::vector<Parked> parked_;
  std::vector<uint32_t> parked_heap_;
  std::vector<uint32_t> parked_free_;
  uint64_t parked_seq_ = 0;
  std::vector<const Event*> parked_events_;  // decideParked(): a Kleene span's events
  std::vector<const EventPtr*> parked_match_;
};

}  // namespace cepbus::plugins::nfa
