#pragma once

// The algebra detector's instances and per-node state, shared by the files
// that implement AlgebraDetector (algebra_detector.cc, algebra_kleene_runs.cc);
// not part of the plugin's interface. Thread safety: none, as the detector's.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "bus/core/event.h"
#include "plugins/algebra/algebra_detector.h"

namespace cepbus::plugins::algebra {

// One atomic event bound to a leaf; `seq` is its arrival number, so sorting by
// (leaf, seq) gives pattern order and, within a leaf, stream order.
struct AlgebraDetector::Binding {
  uint32_t leaf;
  uint64_t seq;
  EventPtr event;
  // The ts of the latest event before it that passed its leaf's atom (none:
  // INT64_MIN), where skip_till_next_match looks for an event a run would
  // have taken instead (nextFloor()).
  Timestamp prev_filled;
};

// An instance: its constituents and interval. Immutable once built and
// shared between the operand state of several subexpressions.
struct AlgebraDetector::Instance {
  Timestamp start = 0;
  Timestamp end = 0;
  // The product of the probabilities of the events bound to positive
  // elements (a negated operand's events never enter a match).
  double prob = 1;
  std::vector<Binding> binds;  // sorted by (leaf, seq), no duplicates
  // A lazy instance of a sequence node (AlgebraDetector::lazy_): it stands
  // for every x ∪ right with x an instance of the node's left history
  // (states_[node].lhist, expanded in turn) and end(x) < start(right), the
  // way a SASE stack entry points into the previous stack. `binds` is empty;
  // start and prob are those of `right`, bounds on every instance it
  // stands for (their starts are earlier, their probabilities lower).
  // A lazy instance of a Kleene node (kleene_lazy_) likewise stands for
  // every run that ends with the event of `right` (runs()). Either kind
  // waits for its node's checks until the instances it stands for are
  // enumerated; `right` may be a lazy Kleene instance.
  InstPtr right;
  int node = -1;
};

struct AlgebraDetector::NodeState {
  std::vector<InstPtr> out;    // the instances ending at the current tick
  std::vector<InstPtr> raw;    // iteration, unrestricted: unions before the predicate
  std::vector<InstPtr> lhist;  // past instances of the left operand still needed
  std::vector<InstPtr> rhist;  // ... of the right operand
  bool neg_seen = false;       // negation: has the right operand had an instance
  Timestamp neg_best = 0;      // ... and the latest start among them
  // A negation with parameters (Node::negation_checks): the negated
  // operand's instances within the horizon, in end order; whether one
  // rejects a candidate depends on the candidate's events.
  std::vector<InstPtr> negated;
  std::vector<Timestamp> starts;  // recent: S, the starts ≤ now future outputs may have
  bool changed = false;           // recent: `starts` changed at this tick
};

// The entries of a history (in end order) that can pair with an instance
// starting at `before` in a match starting at or after `lo`: those ending in
// [lo, before). An entry ending before lo starts before it too.
template <typename Ptr>
inline std::span<const Ptr> pairable(const std::vector<Ptr>& hist, Timestamp lo, Timestamp before) {
  auto by_end = [](const Ptr& p, Timestamp ts) { return p->end < ts; };
  auto first = std::lower_bound(hist.begin(), hist.end(), lo, by_end);
  auto last = std::lower_bound(first, hist.end(), before, by_end);
  return {first, last};
}

}  // namespace cepbus::plugins::algebra
