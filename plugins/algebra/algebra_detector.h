#pragma once

// The event-algebra detector (P1, section 5.4): at every clock tick (every
// distinct timestamp) it evaluates the subexpressions E1..Ek of the plan in
// order and reports the instances of Ek. What state it keeps under each
// context, and where pruning at every level differs from pruning at the top
// (P1's Theorem 1), is described in docs/engines.md ("algebra").
//
// - Semantics::kUnrestricted reports every instance of P1's definitions;
//   memory is bounded only by the time restrictions.
// - Semantics::kRecent reports, per subexpression and tick, at most the one
//   instance with the latest start among those ending at that tick; the work
//   per event is O(k) and memory is bounded on an unbounded stream.
// - Events of one tick are buffered until an event with a later timestamp
//   (or flush()) closes the tick, so matches are reported one tick late.
// - State cap (Plan::caps): when a tick closes with more instances kept in
//   the operators' left and right histories than StateCaps::perDetector(),
//   drop_oldest drops the instances that end earliest (down to
//   trimTarget() of the cap), refuse_new those that end latest — the ones
//   this tick added — down to the cap, so what was held goes on pairing and
//   completing. Each one counts in state().evicted. Instances a negation
//   keeps only to negate are not dropped.
//
// Thread safety: none (plugin::Detector). The plan is shared read-only.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"
#include "plugins/algebra/algebra_plan.h"

namespace cepbus::plugins::algebra {

class AlgebraDetector final : public plugin::Detector {
 public:
  AlgebraDetector(std::shared_ptr<const Plan> plan, plugin::MatchSink& sink);
  ~AlgebraDetector() override;

  Status onEvent(const EventPtr& event) override;
  Status flush() override;

  // Instances held in operand state (for tests and memory accounting).
  size_t retainedInstances() const;
  // Partial matches: retainedInstances(), the operand instances kept between
  // ticks (the events of the open tick are not counted until it closes).
  // Counted once per tick, when it closes; the peak is over closed ticks.
  // The bytes: an estimate of the fixed sizes, per instance its slot in a
  // history, the instance, its shared block, one binding and the fixed part
  // of one event (an instance of several events is counted as of one).
  std::optional<plugin::DetectorState> state() const override;

  // Snapshots (plugin::Detector; algebra_snapshot.cc): the clock and arrival
  // numbers, the open tick's events, every node's state, and the instances
  // it holds, each once (they are shared between nodes and lazy instances
  // point to others) with its bound events and what it stands for.
  uint32_t snapshotVersion() const override { return kSnapshotVersion; }
  Status snapshot(plugin::SnapshotWriter& out) const override;
  Status restore(plugin::SnapshotReader& in) override;

 private:
  // 2: the evictions of the state cap.
  static constexpr uint32_t kSnapshotVersion = 2;

  struct Binding;
  struct Instance;
  using InstPtr = std::shared_ptr<const Instance>;
  struct NodeState;
  class Composer;

  void runTick();
  void evaluate(size_t i);
  void updateState(size_t i);
  void finish(size_t i, std::vector<InstPtr>& candidates);
  // Whether an instance of negation `node`'s negated operand in `negated`
  // lies inside x's gap (or interval) and passes node.negation_checks with x.
  bool negatedBy(const Node& node, const Instance& x, const std::vector<InstPtr>& negated);
  bool passes(const Node& node, const Instance& inst);
  bool passes(const Node& node, std::span<const Binding* const> binds);
  bool passes(std::span<const pattern::Conjunct* const> checks,
              std::span<const Binding* const> binds);
  // Binds slots_ to `binds` (in (leaf, seq) order), for holds().
  void bindSlots(std::span<const Binding* const> binds);
  // `c` over slots_, an iteration predicate at every element of its run.
  bool holds(const pattern::Conjunct& c);
  // report_checks_[i] and run_checks_ of the lazy chain under direct node i.
  void chainChecks(size_t i);
  InstPtr combine(const InstPtr& a, const InstPtr& b) const;
  // A lazy instance of `node` (Instance::right) over `right`, with its interval and probability.
  static InstPtr lazyOver(const InstPtr& right, size_t node);
  // Calls f(inst), or, for a lazy instance, f(every instance it stands for
  // that starts at or after `lo`), each through the checks of the lazy
  // nodes it was made by.
  void expand(const InstPtr& inst, Timestamp lo, const std::function<void(const InstPtr&)>& f);
  // The runs of Kleene node k that end with the event of `last` and start at
  // or after `lo`, found backwards through the node's history of its
  // operand's events (SASE's stack: each event stored once, a run shares its
  // suffix with every run it extends). Each event is placed (place()) as it
  // is prepended, only when the node's step checks hold for it and the event
  // after it, and f(start, count) is called with a run of `count` events
  // placed that passes them at its first event as well.
  template <typename F>
  void runs(size_t k, const Instance& last, Timestamp lo, F&& f);
  template <typename F>
  void runsFrom(const Node& node, const std::vector<InstPtr>& events, const Instance& first,
                Timestamp lo, size_t count, F& f);
  // Whether Kleene node `node`'s step checks hold at `next` with `prev`
  // before it in the run (null: `next` is the run's first event).
  bool stepHolds(const Node& node, const Event* prev, const Event& next);
  // skip_till_next_match: the index in a Kleene node's history `events` of
  // the event of `b`, or of the first that arrived after it.
  static size_t positionOf(const std::vector<InstPtr>& events, const Binding& b);
  // Whether a run at events[p] takes another event before the one at
  // events[at] (arrival number first_seq; at is events.size() while the
  // node's own tick is evaluated): one later than events[p] that its step
  // checks accept.
  bool takenBefore(const Node& node, const std::vector<InstPtr>& events, size_t p, size_t at,
                   uint64_t first_seq);
  // skip_till_next_match: what precedes `first`, the first event of an
  // element, in a match must end at or after the returned ts (and `lo`):
  // the latest event before `first` that fills its element, which a run
  // ending earlier would have taken instead. `lo` when not next_match.
  Timestamp nextFloor(const Binding& first, Timestamp lo);
  // An instance of the last `count` events placed, ⟨start, end⟩.
  InstPtr placedInstance(Timestamp start, Timestamp end, size_t count) const;
  // Direct node i: every instance in node `hist`'s left history that can
  // precede what is placed (starting at `before`) in a match from `lo`.
  void descendLeft(size_t i, size_t hist, Timestamp lo, Timestamp before, Timestamp end);
  // The arrival number of the last event of `inst` (of a SEQ: its right
  // operand's last, for a lazy instance too).
  static uint64_t lastSeq(const Instance& inst);
  // The ts of the latest event bound to `leaf` in `inst` (a negation's gap start).
  static Timestamp gapStart(const Instance& inst, int leaf);
  void emit(const Instance& inst);
  // `events[k]` is &binds[k]->event; a PROBABILITY bound is checked before.
  void emit(std::span<const Binding* const> binds, std::span<const EventPtr* const> events);
  // The match buffer: a match of a direct node is assembled from its back,
  // its last instance first, so that each instance of an enumeration is
  // placed once however many matches it is part of. place() puts an
  // instance's events before those placed and returns their number (take
  // it off placed_ to remove them).
  size_t place(const Instance& inst);
  std::span<const Binding* const> placedBinds() const {
    return {back_binds_.data() + back_binds_.size() - placed_, placed_};
  }
  std::span<const EventPtr* const> placedEvents() const {
    return {back_events_.data() + back_events_.size() - placed_, placed_};
  }
  // Direct node i's matches ending at `end` made of x, or of the instances a
  // lazy x stands for, before what is placed, that start at or after `lo`:
  // no instance is built. A lazy instance's left history is searched, not
  // scanned: it is in end order, so the entries that can precede its right
  // operand and start after `lo` are one range.
  void descend(size_t i, const Instance& x, Timestamp lo, Timestamp end);
  // The match placed (⟨start, end⟩), made by sequence node i, through i's
  // checks and the filters above it, reported if it passes (direct_).
  void reportDirect(size_t i, Timestamp start, Timestamp end);
  // The product of the probabilities of the positive events placed, in
  // (leaf, seq) order as combine() multiplies them.
  double placedProbability() const;
  void dropOld(std::vector<InstPtr>& list, int64_t horizon) const;
  // Brings kept_ back under the cap at the close of a tick (see the file
  // comment), counting what it drops in evicted_.
  void enforceCap();
  // A sequence's left history under unrestricted semantics, in end order:
  // a stale instance there only costs a pairing the time restriction above
  // rejects, so the stale ones that lead go once they are a 32nd of it
  // (amortised O(1) an instance), every stale one at a sweep (sweep_).
  void dropLeading(std::vector<InstPtr>& list, int64_t horizon) const;
  // True when `inst` can be dropped before it reaches an operand's state:
  // unrestricted semantics below the threshold. Recent semantics picks one
  // instance per tick among all of them, so it checks at the top only.
  bool unlikely(const Instance& inst) const;
  // Reads one instance of the snapshot's table (`table`: those before it)
  // and checks what the detector relies on: bound events in (leaf, seq)
  // order, a lazy instance of a lazy node over one its enumeration reads.
  InstPtr restoreInstance(plugin::SnapshotReader& in, const std::vector<InstPtr>& table) const;

  std::shared_ptr<const Plan> plan_;
  plugin::MatchSink& sink_;
  std::unique_ptr<Composer> composer_;
  std::vector<NodeState> states_;
  // Sequence nodes whose instances are lazy (Instance::right): memory
  // follows the events in the window, not their combinations.
  std::vector<char> lazy_;
  // Kleene nodes whose instances are lazy: one per event (Instance::right),
  // standing for every run that ends with it; the sequence above enumerates
  // the runs (runs()) when it pairs them.
  std::vector<char> kleene_lazy_;
  // Sequence nodes with nothing but selections and time restrictions above
  // them (under unrestricted semantics): they report each match as they
  // enumerate it from the stack, building no instance (reportDirect).
  std::vector<char> direct_;
  std::vector<int> parent_;  // -1 for the root
  // Atoms negated with parameters: under recent semantics they keep every
  // event of a tick, not one, since which one rejects a candidate depends
  // on the candidate.
  std::vector<char> keep_every_;
  // A direct node's tightest time restriction up to the root (kNoHorizon
  // without one), and the checks a match made there must pass: those of the
  // nodes on that path, and of the lazy nodes below it, which wait for the
  // whole match; less those in run_checks_.
  std::vector<int64_t> direct_window_;
  std::vector<std::vector<const pattern::Conjunct*>> report_checks_;
  // For a lazy Kleene node below a direct one, the checks of the direct
  // node's match that read only the run and the elements after it: checked
  // on each run found, before what precedes it is paired (chainChecks()).
  std::vector<std::vector<const pattern::Conjunct*>> run_checks_;
  // The Kleene node of each leaf (-1 for a 'Type var' leaf).
  std::vector<int> leaf_kleene_;
  // For each atom node, the ts of the latest event that passed it
  // (Binding::prev_filled).
  std::vector<Timestamp> last_filled_;
  // The Match element of each leaf (-1 inside a negated operand).
  std::vector<int> leaf_element_;
  // 1, 2, ..., m when leaf k is element k and no operator (| or iteration)
  // binds an element to no event or to several: a match of m events then
  // has these element ends. Empty otherwise.
  std::vector<uint32_t> one_each_ends_;
  std::vector<const Binding*> back_binds_;  // the match buffer, see place()
  std::vector<const EventPtr*> back_events_;
  size_t placed_ = 0;
  std::vector<const Binding*> refs_;
  std::vector<const EventPtr*> ref_events_;
  std::vector<EventPtr> tick_events_;
  Timestamp now_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t ticks_ = 0;
  bool sweep_ = false;  // this tick drops every stale instance (dropLeading)
  uint64_t kept_ = 0;   // retainedInstances() when the last tick closed
  uint64_t peak_kept_ = 0;
  uint64_t evicted_ = 0;  // instances the cap dropped
  // Scratch buffers, reused so the hot path does not allocate.
  std::vector<pattern::SlotBinding> slots_;
  std::vector<const Event*> slot_events_;
  std::vector<const EventPtr*> out_events_;
  std::vector<uint32_t> out_ends_;
  std::vector<InstPtr> candidates_;
  std::vector<std::vector<InstPtr>*> capped_lists_;  // enforceCap(): every history
  std::vector<size_t> capped_drop_;                  // ... and how many it drops
};

}  // namespace cepbus::plugins::algebra
