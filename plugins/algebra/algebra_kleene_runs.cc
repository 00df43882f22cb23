// The Kleene run store of AlgebraDetector: a Kleene node's history of its
// operand's events (its lhist, each event once, SASE's stack), the step
// checks a run is extended by, and what skip_till_next_match reads of it.
// The enumeration itself, a template, is in algebra_kleene_runs.h.

#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "plugins/algebra/algebra_detector.h"
#include "plugins/algebra/algebra_instance.h"

namespace cepbus::plugins::algebra {

bool AlgebraDetector::stepHolds(const Node& node, const Event* prev, const Event& next) {
  if (node.step_checks.empty()) return true;
  const Event* pair[2] = {prev, &next};
  pattern::SlotBinding& sb = slots_[*node.step_checks.front().iteration_slot];
  sb.events = prev == nullptr ? std::span<const Event* const>(pair + 1, 1)
                              : std::span<const Event* const>(pair, 2);
  sb.current = sb.events.size() - 1;
  bool ok = true;
  for (const pattern::Conjunct& c : node.step_checks) {
    if (!c.test(slots_)) {
      ok = false;
      break;
    }
  }
  sb = pattern::SlotBinding{};
  return ok;
}

size_t AlgebraDetector::positionOf(const std::vector<InstPtr>& events, const Binding& b) {
  auto by_arrival = [](const InstPtr& p, const Binding& x) {
    const Binding& e = p->binds.front();
    return e.event->ts() < x.event->ts() || (e.event->ts() == x.event->ts() && e.seq < x.seq);
  };
  return static_cast<size_t>(std::lower_bound(events.begin(), events.end(), b, by_arrival) -
                             events.begin());
}

bool AlgebraDetector::takenBefore(const Node& node, const std::vector<InstPtr>& events, size_t p,
                                  size_t at, uint64_t first_seq) {
  const Binding& from = events[p]->binds.front();
  auto takes = [&](const InstPtr& e) {
    const Event& z = *e->binds.front().event;
    return z.ts() > from.event->ts() && stepHolds(node, from.event.get(), z);
  };
  for (size_t z = p + 1; z < at; ++z) {
    if (takes(events[z])) return true;
  }
  if (at < events.size()) return false;
  // The node's own runs of a tick are found before its history holds the
  // tick's events: those that came before the run's first are in its
  // operand's output.
  for (const InstPtr& e : states_[static_cast<size_t>(node.left)].out) {
    if (e->binds.front().seq >= first_seq) break;
    if (takes(e)) return true;
  }
  return false;
}

Timestamp AlgebraDetector::nextFloor(const Binding& first, Timestamp lo) {
  if (!plan_->next_match) return lo;
  const int k = leaf_kleene_[first.leaf];
  if (k < 0 || plan_->nodes[static_cast<size_t>(k)].step_checks.empty()) {
    return std::max(lo, first.prev_filled);
  }
  // A run's first event is one its step checks accept alone: the latest
  // such event before `first` in the element's history.
  const Node& node = plan_->nodes[static_cast<size_t>(k)];
  const std::vector<InstPtr>& events = states_[static_cast<size_t>(k)].lhist;
  for (size_t z = positionOf(events, first); z-- > 0;) {
    const InstPtr& e = events[z];
    if (e->end < lo) break;
    if (stepHolds(node, nullptr, *e->binds.front().event)) return e->end;
  }
  return lo;
}

AlgebraDetector::InstPtr AlgebraDetector::placedInstance(Timestamp start, Timestamp end,
                                                         size_t count) const {
  auto out = std::make_shared<Instance>();
  out->start = start;
  out->end = end;
  out->binds.reserve(count);
  for (const Binding* b : placedBinds().first(count)) {
    out->binds.push_back(*b);
    if (plan_->leaves[b->leaf].element >= 0) out->prob *= b->event->probability();
  }
  return out;
}

}  // namespace cepbus::plugins::algebra
