// AlgebraDetector's retention: what its node states keep between ticks
// (updateState(): the histories, Kleene runs and start sets a tick leaves),
// what time lets go of (dropOld(), dropLeading()), and the state caps
// (enforceCap()).

#include <algorithm>
#include <utility>
#include <vector>

#include "plugins/algebra/algebra_detector.h"
#include "plugins/algebra/algebra_instance.h"
#include "plugins/algebra/algebra_kleene_runs.h"

namespace cepbus::plugins::algebra {
namespace {

template <typename T>
void keepBestStart(std::vector<T>& list) {
  if (list.size() <= 1) return;
  size_t best = 0;
  for (size_t i = 1; i < list.size(); ++i) {
    if (list[i]->start > list[best]->start) best = i;
  }
  T keep = std::move(list[best]);
  list.clear();
  list.push_back(std::move(keep));
}

void mergeStarts(std::vector<Timestamp>& into, const std::vector<Timestamp>& from) {
  into.insert(into.end(), from.begin(), from.end());
}

}  // namespace

void AlgebraDetector::enforceCap() {
  const uint64_t cap = plan_->caps.perDetector();
  if (kept_ <= cap) return;
  const bool oldest = !plan_->caps.refuseNew();
  capped_lists_.clear();
  for (NodeState& st : states_) {
    for (std::vector<InstPtr>* list : {&st.lhist, &st.rhist}) {
      if (!list->empty()) capped_lists_.push_back(list);
    }
  }
  capped_drop_.assign(capped_lists_.size(), 0);
  // A merge over the histories, each in end order: the earliest-ending
  // instance next (drop_oldest) or the latest-ending (refuse_new).
  uint64_t excess = kept_ - (oldest ? plugin::trimTarget(cap) : cap);
  uint64_t dropped = 0;
  while (dropped < excess) {
    size_t pick = capped_lists_.size();
    Timestamp best = 0;
    for (size_t j = 0; j < capped_lists_.size(); ++j) {
      const std::vector<InstPtr>& list = *capped_lists_[j];
      if (capped_drop_[j] == list.size()) continue;
      const Timestamp end =
          oldest ? list[capped_drop_[j]]->end : list[list.size() - 1 - capped_drop_[j]]->end;
      if (pick == capped_lists_.size() || (oldest ? end < best : end > best)) {
        pick = j;
        best = end;
      }
    }
    if (pick == capped_lists_.size()) break;  // what is left is negations' only
    ++capped_drop_[pick];
    ++dropped;
  }
  for (size_t j = 0; j < capped_lists_.size(); ++j) {
    std::vector<InstPtr>& list = *capped_lists_[j];
    const auto n = static_cast<std::ptrdiff_t>(capped_drop_[j]);
    if (oldest) {
      list.erase(list.begin(), list.begin() + n);
    } else {
      list.erase(list.end() - n, list.end());
    }
  }
  kept_ -= dropped;
  evicted_ += dropped;
}

void AlgebraDetector::dropOld(std::vector<InstPtr>& list, int64_t horizon) const {
  if (horizon == kNoHorizon) return;
  const Timestamp limit = now_ - horizon;
  std::erase_if(list, [&](const InstPtr& p) { return p->start < limit; });
}

void AlgebraDetector::dropLeading(std::vector<InstPtr>& list, int64_t horizon) const {
  if (horizon == kNoHorizon || sweep_) {
    dropOld(list, horizon);
    return;
  }
  const Timestamp limit = now_ - horizon;
  const auto stale =
      std::find_if(list.begin(), list.end(), [&](const InstPtr& p) { return p->start >= limit; });
  if (static_cast<size_t>(stale - list.begin()) * 32 >= list.size()) {
    list.erase(list.begin(), stale);
  }
}

void AlgebraDetector::updateState(size_t i) {
  const Node& n = plan_->nodes[i];
  NodeState& st = states_[i];
  const NodeState& l = states_[static_cast<size_t>(n.left)];
  static const NodeState kEmpty;
  const NodeState& r = n.right >= 0 ? states_[static_cast<size_t>(n.right)] : kEmpty;
  if (plan_->semantics == Semantics::kUnrestricted) {
    switch (n.op) {
      case Op::kAnd:
      case Op::kConcat:
        st.lhist.insert(st.lhist.end(), l.out.begin(), l.out.end());
        st.rhist.insert(st.rhist.end(), r.out.begin(), r.out.end());
        break;
      case Op::kSeq:
        st.lhist.insert(st.lhist.end(), l.out.begin(), l.out.end());
        dropLeading(st.lhist, n.horizon);
        return;
      case Op::kIteration:
        if (n.kleene) {
          // The history of the operand's events, each once: the runs'
          // stack (runs()).
          st.lhist.insert(st.lhist.end(), l.out.begin(), l.out.end());
          dropLeading(st.lhist, n.horizon);
          return;
        }
        st.lhist.insert(st.lhist.end(), st.raw.begin(), st.raw.end());
        break;
      default:
        break;
    }
    dropOld(st.lhist, n.horizon);
    dropOld(st.rhist, n.horizon);
    dropOld(st.negated, n.horizon);
    return;
  }

  // Recent: keep only what the one-per-end choice can still need.
  const std::vector<Timestamp>& sy = r.starts;  // sorted ascending
  switch (n.op) {
    case Op::kAnd:
      // Pairs with the latest-starting past instance of the other operand.
      st.lhist.insert(st.lhist.end(), l.out.begin(), l.out.end());
      st.rhist.insert(st.rhist.end(), r.out.begin(), r.out.end());
      keepBestStart(st.lhist);
      keepBestStart(st.rhist);
      break;
    case Op::kSeq: {
      // Q: a left instance is useful only if it starts later than every
      // earlier-ending one, and, of those, only the last ending before each
      // start the right operand can still have (S_y), plus the newest.
      for (const InstPtr& x : l.out) {
        if (st.lhist.empty() || x->start > st.lhist.back()->start) st.lhist.push_back(x);
      }
      dropOld(st.lhist, n.horizon);
      std::vector<InstPtr>& q = st.lhist;
      size_t w = 0;
      for (size_t j = 0; j < q.size(); ++j) {
        bool keep = j + 1 == q.size();
        if (!keep) {
          auto it = std::upper_bound(sy.begin(), sy.end(), q[j]->end);  // first s > end(e_j)
          keep = it != sy.end() && *it <= q[j + 1]->end;
        }
        if (keep) q[w++] = std::move(q[j]);
      }
      q.resize(w);
      break;
    }
    case Op::kConcat: {
      // A past left instance pairs with a right one starting at s iff it
      // covers s (start ≤ s ≤ end); keep the latest-starting cover of each s
      // in S_y. A past right instance pairs iff it starts after the left
      // one, so the latest-starting one suffices.
      st.lhist.insert(st.lhist.end(), l.out.begin(), l.out.end());
      dropOld(st.lhist, n.horizon);
      std::vector<InstPtr> kept;
      for (Timestamp s : sy) {
        const InstPtr* best = nullptr;
        for (const InstPtr& e : st.lhist) {
          if (e->start <= s && s <= e->end && (best == nullptr || e->start > (*best)->start)) {
            best = &e;
          }
        }
        if (best != nullptr && std::find(kept.begin(), kept.end(), *best) == kept.end()) {
          kept.push_back(*best);
        }
      }
      std::sort(kept.begin(), kept.end(),
                [](const InstPtr& a, const InstPtr& b) { return a->end < b->end; });
      st.lhist = std::move(kept);
      st.rhist.insert(st.rhist.end(), r.out.begin(), r.out.end());
      keepBestStart(st.rhist);
      break;
    }
    case Op::kIteration:
      if (!n.checks.empty()) {
        st.lhist.insert(st.lhist.end(), l.out.begin(), l.out.end());
      }
      break;
    default:
      break;
  }
  dropOld(st.lhist, n.horizon);
  dropOld(st.rhist, n.horizon);
  dropOld(st.negated, n.horizon);

  // S: the start times ≤ now that this node's future outputs may have.
  std::vector<Timestamp> s;
  mergeStarts(s, l.starts);
  switch (n.op) {
    case Op::kOr:
    case Op::kConcurrent:
      mergeStarts(s, r.starts);
      break;
    case Op::kAnd:
      mergeStarts(s, r.starts);
      for (const InstPtr& e : st.rhist) s.push_back(e->start);
      [[fallthrough]];
    case Op::kSeq:
    case Op::kConcat:
    case Op::kIteration:
      for (const InstPtr& e : st.lhist) s.push_back(e->start);
      break;
    default:
      break;
  }
  if (n.horizon != kNoHorizon) {
    const Timestamp limit = now_ - n.horizon;
    std::erase_if(s, [&](Timestamp t) { return t < limit; });
  }
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  if (s != st.starts) {
    st.starts = std::move(s);
    st.changed = true;
  }
}

}  // namespace cepbus::plugins::algebra
