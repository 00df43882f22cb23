#pragma once

// The event-algebra detector (P1, section 5.4): at every clock tick (every
// distinct timestamp) it evaluates the subexpressions E1..Ek of the plan in
// order, each from its operands' instances of this tick and the little
// state it keeps about their past instances, and reports the instances of Ek.
//
// Instances are sets of atomic events, each bound to the leaf (pattern
// element) it matched; an instance's interval is ⟨start, end⟩ over its
// events, whose interval is ⟨ts, ts⟩ (P1's atomic events are instantaneous).
//
// Under Semantics::kUnrestricted every instance of P1's definitions is kept
// and reported; memory is bounded only by the time restrictions.
// Under Semantics::kRecent each subexpression outputs, per tick, at most the
// one instance with the latest start among those ending at that tick (P1's
// context, applied at every level as P1's algorithm does), and keeps per
// operand only what that choice can still need: the best past instance of a
// conjunction's operands, the pending left instances Q of a sequence or
// concatenation pruned against the start times S its right operand can
// still produce, the latest start of a negated operand. Q and S are bounded
// by the expression, never by the stream, so the work per event is O(k) and
// memory is bounded on an unbounded stream (a predicate over an iteration
// also keeps the operand's run inside its time bound, which it requires).
//
// Pruning every level equals pruning only the top (Theorem 1) for ; + | - *
// and time restriction. It does not for concatenation, concurrency and
// selection: the latest-starting operand instance need not be the one that
// relates (or satisfies the predicate). There the recent output is still a
// subset of the unrestricted one with one instance per end, but may lack an
// end the top-level context has; a selection applies to the recent instance
// (P1's f(v_x)), except over an iteration, where the latest-starting run
// that satisfies it is chosen.
//
// Events of one tick are buffered until an event with a later timestamp
// (or flush()) closes the tick, so matches are reported one tick late.
//
// Thread safety: none (plugin::Detector). The plan is shared read-only.

#include <cstdint>
#include <memory>
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
  InstPtr combine(const InstPtr& a, const InstPtr& b) const;
  void emit(const Instance& inst);
  void dropOld(std::vector<InstPtr>& list, int64_t horizon) const;

  std::shared_ptr<const Plan> plan_;
  plugin::MatchSink& sink_;
  std::unique_ptr<Composer> composer_;
  std::vector<NodeState> states_;
  std::vector<EventPtr> tick_events_;
  Timestamp now_ = 0;
  uint64_t next_seq_ = 0;
  // Scratch buffers, reused so the hot path does not allocate.
  std::vector<pattern::SlotBinding> slots_;
  std::vector<const Event*> slot_events_;
  std::vector<const EventPtr*> out_events_;
  std::vector<uint32_t> out_ends_;
  std::vector<InstPtr> candidates_;
};

}  // namespace cepbus::plugins::algebra
