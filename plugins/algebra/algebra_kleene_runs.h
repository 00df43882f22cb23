#pragma once

// The Kleene run store's enumeration (AlgebraDetector::runs()), a template
// over the callback each run is handed to; included by the file that calls
// it (algebra_detector.cc) only. The rest of the store is in
// algebra_kleene_runs.cc. Thread safety: none, as the detector's.

#include <algorithm>
#include <span>
#include <vector>

#include "plugins/algebra/algebra_detector.h"
#include "plugins/algebra/algebra_instance.h"

namespace cepbus::plugins::algebra {

template <typename F>
void AlgebraDetector::runs(size_t k, const Instance& last, Timestamp lo, F&& f) {
  runsFrom(plan_->nodes[k], states_[k].lhist, last, lo, 0, f);
}

template <typename F>
void AlgebraDetector::runsFrom(const Node& node, const std::vector<InstPtr>& events,
                               const Instance& first, Timestamp lo, size_t count, F& f) {
  count += place(first);
  const Event& next = *first.binds.front().event;
  if (plan_->min_probability <= 0 || placedProbability() >= plan_->min_probability) {
    if (stepHolds(node, nullptr, next)) f(first.start, count);
    // One event per timestamp: the events before are those ending before it.
    // Without step checks the event a run takes after p is the next one
    // that filled the element, so p ends at or after first's prev_filled.
    const Binding& b = first.binds.front();
    const bool next_step = plan_->next_match && !node.step_checks.empty();
    const Timestamp from = plan_->next_match && !next_step ? std::max(lo, b.prev_filled) : lo;
    const std::span<const InstPtr> before = pairable(events, from, first.start);
    const size_t at = next_step ? positionOf(events, b) : 0;
    for (const InstPtr& p : before) {
      if (plan_->strict && p->binds.front().seq + 1 != b.seq) continue;
      const Event* prev = p->binds.front().event.get();
      if (!stepHolds(node, prev, next)) continue;
      if (next_step &&
          takenBefore(node, events, static_cast<size_t>(&p - events.data()), at, b.seq)) {
        continue;
      }
      runsFrom(node, events, *p, lo, count, f);
    }
  }
  placed_ -= first.binds.size();
}

}  // namespace cepbus::plugins::algebra
