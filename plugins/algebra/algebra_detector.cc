#include "plugins/algebra/algebra_detector.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <utility>

#include "plugins/algebra/algebra_instance.h"
#include "plugins/algebra/algebra_kleene_runs.h"

namespace cepbus::plugins::algebra {

// Builds the RETURN composite from a Match; reads only the immutable plan.
class AlgebraDetector::Composer final : public plugin::MatchComposer {
 public:
  explicit Composer(const Plan& plan) : plan_(plan) {
    for (const Leaf& l : plan.leaves) {
      if (l.element >= 0) element_slot_.push_back(l.slot);
    }
  }

  EventPtr compose(const plugin::Match& match) const override {
    EventBuilder b(plan_.returns ? plan_.returns->type : Symbol::intern("Match"));
    for (size_t i = 0; i < match.size(); ++i) b.constituent(match.event(i));
    b.probability(match.probability());
    if (plan_.returns) {
      std::vector<pattern::SlotBinding> slots(plan_.layout.size());
      std::vector<const Event*> events;
      events.reserve(match.size());
      for (size_t i = 0; i < match.size(); ++i) events.push_back(match.event(i).get());
      size_t offset = 0;
      for (size_t j = 0; j < match.elementCount(); ++j) {
        const size_t n = match.elementEvents(j).size();
        const int slot = element_slot_[j];
        if (slot >= 0 && n > 0) {
          pattern::SlotBinding& sb = slots[static_cast<size_t>(slot)];
          sb.events = std::span<const Event* const>(events.data() + offset, n);
          sb.event = events[offset + n - 1];
        }
        offset += n;
      }
      plan_.returns->apply(slots, match.probability(), b);
    }
    return b.build();
  }

 private:
  const Plan& plan_;
  std::vector<int> element_slot_;
};

namespace {

// P1's concatenation, its five cases verbatim.
bool concatenates(Timestamp sm, Timestamp em, Timestamp sn, Timestamp en) {
  return em == sn || (sm < sn && em > sn) || (sm < sn && em == en) || (sm == sn && em < en) ||
         (sm < sn && em > en);
}

}  // namespace

AlgebraDetector::AlgebraDetector(std::shared_ptr<const Plan> plan, plugin::MatchSink& sink)
    : plan_(std::move(plan)),
      sink_(sink),
      composer_(std::make_unique<Composer>(*plan_)),
      states_(plan_->nodes.size()),
      lazy_(plan_->nodes.size(), 0),
      kleene_lazy_(plan_->nodes.size(), 0),
      direct_(plan_->nodes.size(), 0),
      parent_(plan_->nodes.size(), -1),
      keep_every_(plan_->nodes.size(), 0),
      direct_window_(plan_->nodes.size(), kNoHorizon),
      report_checks_(plan_->nodes.size()),
      run_checks_(plan_->nodes.size()),
      leaf_kleene_(plan_->leaves.size(), -1),
      last_filled_(plan_->nodes.size(), INT64_MIN) {
  slots_.resize(plan_->layout.size());
  bool one_each = true;  // leaf k binds element k, once
  for (const Leaf& l : plan_->leaves) {
    one_each = one_each && l.element == static_cast<int>(leaf_element_.size());
    leaf_element_.push_back(l.element);
  }
  for (const Node& n : plan_->nodes) {
    one_each = one_each && n.op != Op::kOr && n.op != Op::kIteration;
  }
  if (one_each) {
    for (uint32_t k = 1; k <= plan_->element_count; ++k) one_each_ends_.push_back(k);
  }
  for (size_t i = 0; i < plan_->nodes.size(); ++i) {
    const Node& n = plan_->nodes[i];
    if (n.left >= 0) parent_[static_cast<size_t>(n.left)] = static_cast<int>(i);
    if (n.kleene) {
      leaf_kleene_[static_cast<size_t>(plan_->nodes[static_cast<size_t>(n.left)].leaf)] =
          static_cast<int>(i);
    }
    if (n.right >= 0) parent_[static_cast<size_t>(n.right)] = static_cast<int>(i);
    if (n.op == Op::kNegation && !n.negation_checks.empty() &&
        plan_->nodes[static_cast<size_t>(n.right)].op == Op::kAtom) {
      keep_every_[static_cast<size_t>(n.right)] = 1;
    }
  }
  if (plan_->semantics == Semantics::kUnrestricted) {
    // A sequence whose instances only the left side of another sequence
    // reads: that one pairs them when its right operand comes, so they need
    // not be built before. With a predicate of its own, only when it ends
    // with a Kleene element (the predicate is checked on each match then,
    // rather than on every union of a run with its left operand).
    for (const Node& n : plan_->nodes) {
      if (n.op != Op::kSeq) continue;
      const Node& l = plan_->nodes[static_cast<size_t>(n.left)];
      if (l.op == Op::kSeq &&
          (l.checks.empty() || plan_->nodes[static_cast<size_t>(l.right)].kleene)) {
        lazy_[static_cast<size_t>(n.left)] = 1;
      }
    }
    // A sequence below nothing but filters (selections and time
    // restrictions up to the root) reports each match as it builds it.
    for (size_t i = 0; i < plan_->nodes.size(); ++i) {
      if (plan_->nodes[i].op != Op::kSeq || lazy_[i]) continue;
      bool filters = true;
      for (int k = parent_[i]; filters && k >= 0; k = parent_[static_cast<size_t>(k)]) {
        const Op op = plan_->nodes[static_cast<size_t>(k)].op;
        filters = op == Op::kTimeRestriction || op == Op::kSelection;
      }
      direct_[i] = filters ? 1 : 0;
      for (int k = static_cast<int>(i); filters && k >= 0; k = parent_[static_cast<size_t>(k)]) {
        const Node& f = plan_->nodes[static_cast<size_t>(k)];
        if (f.op == Op::kTimeRestriction) direct_window_[i] = std::min(direct_window_[i], f.window);
        for (const pattern::Conjunct& c : f.checks) report_checks_[i].push_back(&c);
      }
    }
    // A Kleene element's runs are enumerated where they are paired: as the
    // left operand of any sequence (expand() and descend() walk a left
    // history), or as the right operand of a lazy or direct one.
    for (size_t i = 0; i < plan_->nodes.size(); ++i) {
      const int p = parent_[i];
      if (!plan_->nodes[i].kleene || p < 0) continue;
      const Node& seq = plan_->nodes[static_cast<size_t>(p)];
      const bool pairs =
          seq.op == Op::kSeq && (seq.left == static_cast<int>(i) || lazy_[static_cast<size_t>(p)] ||
                                 direct_[static_cast<size_t>(p)]);
      kleene_lazy_[i] = pairs ? 1 : 0;
    }
    // The checks of the lazy nodes under a direct one wait for its matches;
    // those that read only a Kleene run and what follows it are checked as
    // each run is found (run_checks_), before what precedes it is paired.
    for (size_t i = 0; i < plan_->nodes.size(); ++i) {
      if (direct_[i]) chainChecks(i);
    }
  }
}

void AlgebraDetector::chainChecks(size_t i) {
  const Plan& plan = *plan_;
  std::vector<size_t> kleenes;  // the lazy Kleene nodes of the chain
  std::vector<size_t> below{i};
  int last_leaf = -1;
  while (!below.empty()) {
    const Node& n = plan.nodes[below.back()];
    below.pop_back();
    for (int c : {n.right, n.left}) {
      const auto k = static_cast<size_t>(c);
      if (c < 0) continue;
      if (plan.nodes[k].op == Op::kAtom) last_leaf = std::max(last_leaf, plan.nodes[k].leaf);
      if (!(lazy_[k] || kleene_lazy_[k])) continue;
      for (const pattern::Conjunct& check : plan.nodes[k].checks) {
        report_checks_[i].push_back(&check);
      }
      if (lazy_[k]) below.push_back(k);
      if (kleene_lazy_[k]) kleenes.push_back(k);
    }
  }
  for (size_t k : kleenes) {
    const int leaf = plan.nodes[static_cast<size_t>(plan.nodes[k].left)].leaf;
    last_leaf = std::max(last_leaf, leaf);
  }
  // Right to left (a later node index is further right): a conjunct goes to
  // the first run that binds every slot it reads.
  std::sort(kleenes.begin(), kleenes.end(), std::greater<>());
  for (size_t k : kleenes) {
    // The slots bound once a run of k is placed: its own and every later
    // element's up to the end of the chain.
    uint64_t bound = 0;
    for (int leaf = plan.nodes[static_cast<size_t>(plan.nodes[k].left)].leaf; leaf <= last_leaf;
         ++leaf) {
      const int slot = plan.leaves[static_cast<size_t>(leaf)].slot;
      if (slot >= 0) bound |= uint64_t{1} << slot;
    }
    std::erase_if(report_checks_[i], [&](const pattern::Conjunct* c) {
      if (c->slot_mask == 0 || (c->slot_mask & ~bound) != 0) return false;
      run_checks_[k].push_back(c);
      return true;
    });
  }
}

AlgebraDetector::~AlgebraDetector() = default;

Status AlgebraDetector::onEvent(const EventPtr& event) {
  if (!tick_events_.empty()) {
    if (event->ts() < now_) {
      return Status::invalidArgument("algebra detector: event at ts " +
                                     std::to_string(event->ts()) + " after ts " +
                                     std::to_string(now_) + " (events must be in ts order)");
    }
    if (event->ts() > now_) runTick();
  }
  now_ = event->ts();
  tick_events_.push_back(event);
  return Status::ok();
}

Status AlgebraDetector::flush() {
  if (!tick_events_.empty()) runTick();
  return Status::ok();
}

std::optional<plugin::DetectorState> AlgebraDetector::state() const {
  // make_shared's block: the instance and two counters.
  constexpr uint64_t kInstanceBytes =
      sizeof(InstPtr) + sizeof(Instance) + 16 + sizeof(Binding) + sizeof(Event);
  return plugin::DetectorState{kept_, peak_kept_, evicted_, kept_ * kInstanceBytes};
}

size_t AlgebraDetector::retainedInstances() const {
  size_t n = 0;
  for (const NodeState& s : states_) n += s.lhist.size() + s.rhist.size() + s.negated.size();
  return n;
}

uint64_t AlgebraDetector::lastSeq(const Instance& inst) {
  return inst.node < 0 ? inst.binds.back().seq : lastSeq(*inst.right);
}

Timestamp AlgebraDetector::gapStart(const Instance& inst, int leaf) {
  Timestamp ts = INT64_MIN;
  for (const Binding& b : inst.binds) {
    if (b.leaf == static_cast<uint32_t>(leaf)) ts = std::max(ts, b.event->ts());
  }
  return ts;
}

AlgebraDetector::InstPtr AlgebraDetector::combine(const InstPtr& a, const InstPtr& b) const {
  auto out = std::make_shared<Instance>();
  out->start = std::min(a->start, b->start);
  out->end = std::max(a->end, b->end);
  out->binds.reserve(a->binds.size() + b->binds.size());
  auto x = a->binds.begin();
  auto y = b->binds.begin();
  while (x != a->binds.end() || y != b->binds.end()) {
    if (y == b->binds.end() ||
        (x != a->binds.end() && (x->leaf < y->leaf || (x->leaf == y->leaf && x->seq < y->seq)))) {
      out->binds.push_back(*x++);
    } else if (x == a->binds.end() || y->leaf < x->leaf || y->seq < x->seq) {
      out->binds.push_back(*y++);
    } else {  // the same event bound to the same leaf in both: a set union keeps one
      out->binds.push_back(*x++);
      ++y;
    }
    const Binding& added = out->binds.back();
    if (plan_->leaves[added.leaf].element >= 0) out->prob *= added.event->probability();
  }
  return out;
}

void AlgebraDetector::expand(const InstPtr& inst, Timestamp lo,
                             const std::function<void(const InstPtr&)>& f) {
  if (inst->node < 0) {
    f(inst);
    return;
  }
  const auto k = static_cast<size_t>(inst->node);
  const Node& node = plan_->nodes[k];
  if (kleene_lazy_[k]) {
    runs(k, *inst->right, lo, [&](Timestamp start, size_t count) {
      InstPtr run = placedInstance(start, inst->end, count);
      if (!unlikely(*run) && passes(node, *run)) f(run);
    });
    return;
  }
  auto pair = [&](const InstPtr& right) {
    const Timestamp from = nextFloor(right->binds.front(), lo);
    for (const InstPtr& x : pairable(states_[k].lhist, from, right->start)) {
      if (x->start < lo) continue;
      expand(x, lo, [&](const InstPtr& e) {
        InstPtr v = combine(e, right);
        if (!unlikely(*v) && passes(node, *v)) f(v);
      });
    }
  };
  if (inst->right->node >= 0) {
    expand(inst->right, lo, pair);  // a lazy Kleene instance: pair each of its runs
  } else {
    pair(inst->right);
  }
}

AlgebraDetector::InstPtr AlgebraDetector::lazyOver(const InstPtr& right, size_t node) {
  auto lazy = std::make_shared<Instance>();
  lazy->start = right->start;
  lazy->end = right->end;
  lazy->prob = right->prob;
  lazy->right = right;
  lazy->node = static_cast<int>(node);
  return lazy;
}

double AlgebraDetector::placedProbability() const {
  double prob = 1;
  for (const Binding* b : placedBinds()) {
    if (leaf_element_[b->leaf] >= 0) prob *= b->event->probability();
  }
  return prob;
}

size_t AlgebraDetector::place(const Instance& inst) {
  const size_t n = inst.binds.size();
  if (back_binds_.size() - placed_ < n) {
    // Grown at the front: what is placed keeps its distance from the back.
    const size_t size = std::max<size_t>(2 * back_binds_.size(), placed_ + n + 8);
    std::vector<const Binding*> binds(size);
    std::vector<const EventPtr*> events(size);
    std::copy(back_binds_.end() - static_cast<std::ptrdiff_t>(placed_), back_binds_.end(),
              binds.end() - static_cast<std::ptrdiff_t>(placed_));
    std::copy(back_events_.end() - static_cast<std::ptrdiff_t>(placed_), back_events_.end(),
              events.end() - static_cast<std::ptrdiff_t>(placed_));
    back_binds_ = std::move(binds);
    back_events_ = std::move(events);
  }
  size_t at = back_binds_.size() - placed_;
  for (size_t k = n; k-- > 0;) {
    --at;
    back_binds_[at] = &inst.binds[k];
    back_events_[at] = &inst.binds[k].event;
  }
  placed_ += n;
  return n;
}

void AlgebraDetector::descend(size_t i, const Instance& x, Timestamp lo, Timestamp end) {
  if (plan_->strict && lastSeq(x) + 1 != placedBinds().front()->seq) return;
  if (x.node >= 0 && kleene_lazy_[static_cast<size_t>(x.node)]) {
    const auto k = static_cast<size_t>(x.node);
    runs(k, *x.right, lo, [&](Timestamp start, size_t) {
      if (passes(run_checks_[k], placedBinds())) reportDirect(i, start, end);
    });
    return;
  }
  if (x.node >= 0 && x.right->node >= 0) {
    // A lazy sequence ending with a Kleene element: each run of it, then
    // the left history before the run.
    const auto k = static_cast<size_t>(x.right->node);
    runs(k, *x.right->right, lo, [&](Timestamp start, size_t) {
      if (passes(run_checks_[k], placedBinds())) {
        descendLeft(i, static_cast<size_t>(x.node), lo, start, end);
      }
    });
    return;
  }
  // A lazy x places its right operand's events; the instances of its left
  // history that precede them go before (a sequence's left leaves precede
  // its right leaves, so the buffer stays in (leaf, seq) order).
  const size_t n = place(x.node < 0 ? x : *x.right);
  if (plan_->min_probability <= 0 || placedProbability() >= plan_->min_probability) {
    if (x.node < 0) {
      reportDirect(i, x.start, end);
    } else {
      descendLeft(i, static_cast<size_t>(x.node), lo, x.right->start, end);
    }
  }
  placed_ -= n;
}

void AlgebraDetector::descendLeft(size_t i, size_t hist, Timestamp lo, Timestamp before,
                                  Timestamp end) {
  const Timestamp from = nextFloor(*placedBinds().front(), lo);
  for (const InstPtr& e : pairable(states_[hist].lhist, from, before)) {
    if (e->start >= lo) descend(i, *e, lo, end);
  }
}

void AlgebraDetector::reportDirect(size_t i, Timestamp start, Timestamp end) {
  if (end - start > direct_window_[i]) return;
  // descend() checked the probability (unlikely() at every level, emit() at the top).
  const std::span<const Binding* const> binds = placedBinds();
  if (plan_->strict) {
    // descend() pairs only adjacent pieces; an eager sequence below may not.
    for (size_t k = 1; k < binds.size(); ++k) {
      if (binds[k - 1]->seq + 1 != binds[k]->seq) return;
    }
  }
  if (!passes(report_checks_[i], binds)) return;
  emit(binds, placedEvents());
}

void AlgebraDetector::runTick() {
  const Plan& plan = *plan_;
  sweep_ = ++ticks_ % 1024 == 0;
  const bool recent = plan.semantics == Semantics::kRecent;
  for (const EventPtr& ev : tick_events_) {
    const uint64_t seq = next_seq_++;
    for (const auto& [type, atoms] : plan.routes) {
      if (type != ev->type()) continue;
      for (int a : atoms) {
        auto inst = std::make_shared<Instance>();
        inst->start = now_;
        inst->end = now_;
        const int leaf = plan.nodes[static_cast<size_t>(a)].leaf;
        Timestamp& filled = last_filled_[static_cast<size_t>(a)];
        inst->binds.push_back(Binding{static_cast<uint32_t>(leaf), seq, ev, filled});
        if (plan.leaves[static_cast<size_t>(leaf)].element >= 0) inst->prob = ev->probability();
        if (unlikely(*inst)) continue;
        auto& out = states_[static_cast<size_t>(a)].out;
        // Recent: one instance per end; the latest event of the tick. A
        // WHERE conjunct naming only this element is placed on the atom and
        // filters it like a selection (on the recent instance under recent).
        if (recent && !keep_every_[static_cast<size_t>(a)]) out.clear();
        if (passes(plan.nodes[static_cast<size_t>(a)], *inst)) {
          filled = now_;
          out.push_back(std::move(inst));
        }
      }
    }
  }
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    const Node& n = plan.nodes[i];
    if (n.op == Op::kAtom) continue;
    const NodeState& l = states_[static_cast<size_t>(n.left)];
    const bool active = !l.out.empty() || l.changed ||
                        (n.right >= 0 && (!states_[static_cast<size_t>(n.right)].out.empty() ||
                                          states_[static_cast<size_t>(n.right)].changed));
    if (!active) continue;
    evaluate(i);
    updateState(i);
  }
  for (const InstPtr& inst : states_[plan.root()].out) emit(*inst);
  for (NodeState& s : states_) {
    s.out.clear();
    s.raw.clear();
    s.changed = false;
  }
  tick_events_.clear();
  kept_ = retainedInstances();
  enforceCap();
  peak_kept_ = std::max(peak_kept_, kept_);
}

void AlgebraDetector::evaluate(size_t i) {
  const Node& n = plan_->nodes[i];
  NodeState& st = states_[i];
  const bool recent = plan_->semantics == Semantics::kRecent;
  const std::vector<InstPtr>& xs = states_[static_cast<size_t>(n.left)].out;
  static const std::vector<InstPtr> kNone;
  const std::vector<InstPtr>& ys = n.right >= 0 ? states_[static_cast<size_t>(n.right)].out : kNone;
  std::vector<InstPtr>& c = candidates_;
  c.clear();
  switch (n.op) {
    case Op::kAtom:
      return;
    case Op::kOr:
      c.insert(c.end(), xs.begin(), xs.end());
      c.insert(c.end(), ys.begin(), ys.end());
      break;
    case Op::kAnd:
      for (const InstPtr& x : xs) {
        for (const InstPtr& y : st.rhist) c.push_back(combine(x, y));
        for (const InstPtr& y : ys) c.push_back(combine(x, y));
      }
      for (const InstPtr& x : st.lhist) {
        for (const InstPtr& y : ys) c.push_back(combine(x, y));
      }
      break;
    case Op::kSeq: {
      // An instance of the left operand ending now cannot precede one of the
      // right operand ending now, so only the past ones pair; and none
      // starting before the horizon is part of an output.
      const Timestamp lo = n.horizon == kNoHorizon ? INT64_MIN : now_ - n.horizon;
      for (const InstPtr& y : ys) {
        if (lazy_[i]) {
          // Only when some left instance still in the window precedes y
          // (the history is in end order, its stale instances lead).
          const Timestamp oldest = n.horizon == kNoHorizon ? INT64_MIN : now_ - n.horizon;
          auto x = std::find_if(st.lhist.begin(), st.lhist.end(),
                                [&](const InstPtr& e) { return e->start >= oldest; });
          if (x != st.lhist.end() && (*x)->end < y->start) {
            c.push_back(lazyOver(y, i));
          }
          continue;
        }
        if (y->node >= 0) {
          // A lazy Kleene instance: each of its runs, then what precedes it.
          const auto k = static_cast<size_t>(y->node);
          runs(k, *y->right, lo, [&](Timestamp start, size_t) {
            if (passes(run_checks_[k], placedBinds())) descendLeft(i, i, lo, start, y->end);
          });
          continue;
        }
        const size_t placed = direct_[i] ? place(*y) : 0;
        const Timestamp from = nextFloor(y->binds.front(), lo);
        for (const InstPtr& x : pairable(st.lhist, from, y->start)) {
          if (x->start < lo) continue;
          if (direct_[i]) {
            descend(i, *x, lo, y->end);
          } else {
            expand(x, lo, [&](const InstPtr& e) { c.push_back(combine(e, y)); });
          }
        }
        placed_ -= placed;
      }
      break;
    }
    case Op::kConcat:
      for (const InstPtr& y : ys) {
        for (const InstPtr& x : st.lhist) {
          if (concatenates(x->start, x->end, y->start, y->end)) c.push_back(combine(x, y));
        }
        for (const InstPtr& x : xs) {
          if (concatenates(x->start, x->end, y->start, y->end)) c.push_back(combine(x, y));
        }
      }
      for (const InstPtr& x : xs) {
        for (const InstPtr& y : st.rhist) {
          if (concatenates(x->start, x->end, y->start, y->end)) c.push_back(combine(x, y));
        }
      }
      break;
    case Op::kConcurrent:
      // Instances are produced at the tick of their end, so equal ends means
      // both operands produced them now.
      for (const InstPtr& x : xs) {
        for (const InstPtr& y : ys) {
          if (x->start == y->start) c.push_back(combine(x, y));
        }
      }
      break;
    case Op::kNegation:
      if (!n.negation_checks.empty()) {
        // P1's interval holds negated instances ending now; a gap excludes
        // its end, so this tick's count from the next one.
        if (n.gap_leaf < 0) st.negated.insert(st.negated.end(), ys.begin(), ys.end());
        for (const InstPtr& x : xs) {
          if (!negatedBy(n, *x, st.negated)) c.push_back(x);
        }
        if (n.gap_leaf >= 0) st.negated.insert(st.negated.end(), ys.begin(), ys.end());
        break;
      }
      if (n.gap_leaf >= 0) {
        // Some n lies strictly inside ⟨ts(x), now⟩ iff the latest start of
        // the negated operand's instances that ended before now is > ts(x):
        // check before this tick's instances count.
        for (const InstPtr& x : xs) {
          if (!st.neg_seen || st.neg_best <= gapStart(*x, n.gap_leaf)) c.push_back(x);
        }
        for (const InstPtr& y : ys) {
          if (!st.neg_seen || y->start > st.neg_best) st.neg_best = y->start;
          st.neg_seen = true;
        }
        break;
      }
      // Some n lies inside ⟨start(m), now⟩ iff the latest start of the
      // negated operand so far (ends ≤ now) is ≥ start(m).
      for (const InstPtr& y : ys) {
        if (!st.neg_seen || y->start > st.neg_best) st.neg_best = y->start;
        st.neg_seen = true;
      }
      for (const InstPtr& x : xs) {
        if (!st.neg_seen || st.neg_best < x->start) c.push_back(x);
      }
      break;
    case Op::kIteration:
      if (n.kleene && !recent) {
        // Runs are extended only by events their step checks accept; a
        // sequence above enumerates a lazy node's runs when it pairs them.
        const Timestamp lo = n.horizon == kNoHorizon ? INT64_MIN : now_ - n.horizon;
        for (const InstPtr& x : xs) {
          if (kleene_lazy_[i]) {
            c.push_back(lazyOver(x, i));
          } else {
            runs(i, *x, lo, [&](Timestamp start, size_t count) {
              c.push_back(placedInstance(start, x->end, count));
            });
          }
        }
      } else if (recent && !n.checks.empty()) {
        // The latest-starting union ending now that satisfies the predicate:
        // search the runs x, x ∪ m_last, x ∪ m_last ∪ m_last-1, ...
        for (const InstPtr& x : xs) {
          InstPtr acc = x;
          c.push_back(acc);
          for (size_t j = st.lhist.size(); j-- > 0;) {
            acc = combine(acc, st.lhist[j]);
            c.push_back(acc);
          }
        }
      } else if (recent) {
        // Adding instances never raises the start, so the latest-starting
        // union ending now is the operand's own instance.
        c.insert(c.end(), xs.begin(), xs.end());
      } else {
        // Every union of one or more instances that includes one ending now.
        auto fresh = [&](const InstPtr& v) {
          for (const InstPtr& r : st.raw) {
            if (r->binds.size() == v->binds.size() &&
                std::equal(r->binds.begin(), r->binds.end(), v->binds.begin(),
                           [](const Binding& a, const Binding& b) {
                             return a.leaf == b.leaf && a.seq == b.seq;
                           })) {
              return false;
            }
          }
          return true;
        };
        for (const InstPtr& x : xs) {
          const size_t before = st.raw.size();
          if (fresh(x)) st.raw.push_back(x);
          // P1's iteration also unites x with this tick's unions (they end at
          // x's ts too). Only P1's iteration runs here: a SASE Kleene element,
          // whose run takes one event per ts, is extended above.
          const size_t partners = st.lhist.size() + before;
          for (size_t j = 0; j < partners; ++j) {
            const InstPtr& u = j < st.lhist.size() ? st.lhist[j] : st.raw[j - st.lhist.size()];
            InstPtr v = combine(x, u);
            if (!unlikely(*v) && fresh(v)) st.raw.push_back(std::move(v));
          }
        }
        c.insert(c.end(), st.raw.begin(), st.raw.end());
      }
      break;
    case Op::kSelection:
      c.insert(c.end(), xs.begin(), xs.end());
      break;
    case Op::kTimeRestriction:
      for (const InstPtr& x : xs) {
        if (x->end - x->start <= n.window) c.push_back(x);
      }
      break;
  }
  finish(i, c);
}

void AlgebraDetector::finish(size_t i, std::vector<InstPtr>& candidates) {
  const Node& n = plan_->nodes[i];
  std::vector<InstPtr>& out = states_[i].out;
  out.clear();
  if (plan_->semantics == Semantics::kUnrestricted) {
    // A lazy instance's checks wait until its instances are enumerated.
    for (InstPtr& c : candidates) {
      if (!unlikely(*c) && (c->node >= 0 || passes(n, *c))) out.push_back(std::move(c));
    }
    return;
  }
  // Recent: a selection applies to the recent instance (P1: f(v_x)); only a
  // predicate over an iteration picks the latest-starting run satisfying it,
  // since the recent iteration instance alone is a single operand instance.
  const bool search = n.op == Op::kIteration;
  for (InstPtr& c : candidates) {
    if (search && !passes(n, *c)) continue;
    if (out.empty()) {
      out.push_back(std::move(c));
    } else if (c->start > out[0]->start) {
      out[0] = std::move(c);
    }
  }
  if (!search && !out.empty() && !passes(n, *out[0])) out.clear();
}

bool AlgebraDetector::negatedBy(const Node& node, const Instance& x,
                                const std::vector<InstPtr>& negated) {
  // Inside the gap ⟨ts(x's gap leaf), now⟩, or inside P1's ⟨start(x), now⟩.
  const bool gap = node.gap_leaf >= 0;
  const Timestamp after = gap ? gapStart(x, node.gap_leaf) : x.start - 1;
  for (const InstPtr& y : negated) {
    if (y->start <= after) continue;
    refs_.clear();
    for (const Binding& b : x.binds) refs_.push_back(&b);
    for (const Binding& b : y->binds) refs_.push_back(&b);
    bindSlots(refs_);
    if (std::all_of(node.negation_checks.begin(), node.negation_checks.end(),
                    [&](const pattern::Conjunct& c) { return holds(c); })) {
      return true;
    }
  }
  return false;
}

bool AlgebraDetector::passes(const Node& node, const Instance& inst) {
  if (node.checks.empty()) return true;
  refs_.clear();
  for (const Binding& b : inst.binds) refs_.push_back(&b);
  return passes(node, refs_);
}

bool AlgebraDetector::passes(const Node& node, std::span<const Binding* const> binds) {
  if (node.checks.empty()) return true;
  bindSlots(binds);
  for (const pattern::Conjunct& c : node.checks) {
    if (!holds(c)) return false;
  }
  return true;
}

bool AlgebraDetector::passes(std::span<const pattern::Conjunct* const> checks,
                             std::span<const Binding* const> binds) {
  if (checks.empty()) return true;
  bindSlots(binds);
  for (const pattern::Conjunct* c : checks) {
    if (!holds(*c)) return false;
  }
  return true;
}

void AlgebraDetector::bindSlots(std::span<const Binding* const> binds) {
  const Plan& plan = *plan_;
  std::fill(slots_.begin(), slots_.end(), pattern::SlotBinding{});
  slot_events_.resize(binds.size());
  for (size_t k = 0; k < binds.size(); ++k) slot_events_[k] = binds[k]->event.get();
  size_t begin = 0;
  while (begin < binds.size()) {
    size_t end = begin + 1;
    while (end < binds.size() && binds[end]->leaf == binds[begin]->leaf) ++end;
    const int slot = plan.leaves[binds[begin]->leaf].slot;
    if (slot >= 0) {
      pattern::SlotBinding& sb = slots_[static_cast<size_t>(slot)];
      sb.events = std::span<const Event* const>(slot_events_.data() + begin, end - begin);
      sb.event = slot_events_[end - 1];
    }
    begin = end;
  }
}

bool AlgebraDetector::holds(const pattern::Conjunct& c) {
  if (!c.iteration_slot) return c.test(slots_);
  pattern::SlotBinding& sb = slots_[*c.iteration_slot];
  const size_t count = sb.events.size();
  bool ok = true;
  for (size_t cur = 0; ok && cur < count; ++cur) {
    sb.current = cur;
    ok = c.test(slots_);
  }
  sb.current = pattern::SlotBinding::kNewest;
  return ok && (count > 0 || c.test(slots_));
}

bool AlgebraDetector::unlikely(const Instance& inst) const {
  return plan_->semantics == Semantics::kUnrestricted && inst.prob < plan_->min_probability;
}

void AlgebraDetector::emit(const Instance& inst) {
  if (inst.prob < plan_->min_probability) return;
  refs_.clear();
  ref_events_.clear();
  for (const Binding& b : inst.binds) {
    refs_.push_back(&b);
    ref_events_.push_back(&b.event);
  }
  emit(refs_, ref_events_);
}

void AlgebraDetector::emit(std::span<const Binding* const> binds,
                           std::span<const EventPtr* const> events) {
  const Plan& plan = *plan_;
  if (!one_each_ends_.empty() && binds.size() == one_each_ends_.size()) {
    // Every element bound, each by one event, in pattern order: the ends
    // are known and no binding need be read.
    sink_.onMatch(plugin::Match(events, one_each_ends_, composer_.get()));
    return;
  }
  out_events_.clear();
  out_ends_.assign(plan.element_count, 0);
  for (const Binding* b : binds) {
    const int element = leaf_element_[b->leaf];
    if (element < 0) continue;
    out_events_.push_back(&b->event);
    ++out_ends_[static_cast<size_t>(element)];
  }
  for (size_t j = 1; j < out_ends_.size(); ++j) out_ends_[j] += out_ends_[j - 1];
  sink_.onMatch(plugin::Match(out_events_, out_ends_, composer_.get()));
}

}  // namespace cepbus::plugins::algebra
