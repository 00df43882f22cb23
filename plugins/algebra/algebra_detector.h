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
//
// Thread safety: none (plugin::Detector). The plan is shared read-only.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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
  std::optional<plugin::DetectorState> state() const override {
    return plugin::DetectorState{kept_, peak_kept_};
  }

 private:
  struct Binding;
  struct Instance;
  using InstPtr = std::shared_ptr<const Instance>;
  struct NodeState;
  class Composer;

  void runTick();
  void evaluate(size_t i);
  void updateState(size_t i);
  void finish(size_t i, std::vector<InstPtr>& candidates);
  bool passes(const Node& node, const Instance& inst);
  bool passes(const Node& node, const std::vector<const Binding*>& binds);
  InstPtr combine(const InstPtr& a, const InstPtr& b) const;
  // Calls f(inst), or, for a lazy instance, f(every instance it stands for).
  void expand(const InstPtr& inst, const std::function<void(const InstPtr&)>& f);
  // The ts of the latest event bound to `leaf` in `inst` (a negation's gap start).
  static Timestamp gapStart(const Instance& inst, int leaf);
  void emit(const Instance& inst);
  void emit(const std::vector<const Binding*>& binds, double prob);
  // Calls f(start) for each instance `inst` stands for (itself, or what a
  // lazy one expands to), its events pushed on stack_ while f runs: no
  // instance is built.
  void enumerate(const InstPtr& inst, const std::function<void(Timestamp)>& f);
  // The instance on stack_ (⟨start, end⟩), made by sequence node i, through
  // i's checks and the filters above it, reported if it passes (direct_).
  void reportDirect(size_t i, Timestamp start, Timestamp end);
  // The product of the probabilities of the positive events on stack_, in
  // (leaf, seq) order as combine() multiplies them.
  double stackProbability() const;
  void dropOld(std::vector<InstPtr>& list, int64_t horizon) const;
  // A sequence's left history under unrestricted semantics, in end order:
  // a stale instance there only costs a pairing the time restriction above
  // rejects, so the stale ones that lead go once they are a 32nd of it
  // (amortised O(1) an instance), every stale one at a sweep (sweep_).
  void dropLeading(std::vector<InstPtr>& list, int64_t horizon) const;
  // True when `inst` can be dropped before it reaches an operand's state:
  // unrestricted semantics below the threshold. Recent semantics picks one
  // instance per tick among all of them, so it checks at the top only.
  bool unlikely(const Instance& inst) const;

  std::shared_ptr<const Plan> plan_;
  plugin::MatchSink& sink_;
  std::unique_ptr<Composer> composer_;
  std::vector<NodeState> states_;
  // Sequence nodes whose instances are lazy (Instance::right): memory
  // follows the events in the window, not their combinations.
  std::vector<char> lazy_;
  // Sequence nodes with nothing but selections and time restrictions above
  // them (under unrestricted semantics): they report each match as they
  // enumerate it from the stack, building no instance (reportDirect).
  std::vector<char> direct_;
  std::vector<int> parent_;  // -1 for the root
  std::vector<const Binding*> stack_;
  std::vector<const Binding*> refs_;
  std::vector<EventPtr> tick_events_;
  Timestamp now_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t ticks_ = 0;
  bool sweep_ = false;  // this tick drops every stale instance (dropLeading)
  uint64_t kept_ = 0;   // retainedInstances() when the last tick closed
  uint64_t peak_kept_ = 0;
  // Scratch buffers, reused so the hot path does not allocate.
  std::vector<pattern::SlotBinding> slots_;
  std::vector<const Event*> slot_events_;
  std::vector<const EventPtr*> out_events_;
  std::vector<uint32_t> out_ends_;
  std::vector<InstPtr> candidates_;
};

}  // namespace cepbus::plugins::algebra
