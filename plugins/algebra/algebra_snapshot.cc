// AlgebraDetector's snapshots: its state between ticks written to bytes and
// read back into a detector of the same plan. Instances are shared (a left
// history holds the instances a node below put out, a lazy instance points
// to the one it extends), so they are written once, in a table where each
// comes after the instances it points to, and the node states list them by
// index. Everything read is checked against the plan before it is used: an
// index, a leaf, a node, a lazy instance the enumeration could not walk.

#include <string>
#include <vector>

#include "plugins/algebra/algebra_detector.h"
#include "plugins/algebra/algebra_instance.h"

namespace cepbus::plugins::algebra {
Status AlgebraDetector::snapshot(plugin::SnapshotWriter& out) const {
  out.section("algebra", kSnapshotVersion);
  out.signedVarint(now_);
  out.varint(next_seq_);
  out.varint(ticks_);
  out.varint(kept_);
  out.varint(peak_kept_);
  out.varint(evicted_);
  out.varint(tick_events_.size());
  for (const EventPtr& e : tick_events_) out.event(e);
  out.varint(last_filled_.size());
  for (Timestamp ts : last_filled_) out.signedVarint(ts);

  plugin::SnapshotTable<Instance> table;
  auto pointees = [](const Instance& inst, const auto& visit) { visit(inst.right.get()); };
  for (const NodeState& st : states_) {
    for (const auto* list : {&st.lhist, &st.rhist, &st.negated}) {
      for (const InstPtr& inst : *list) table.add(inst.get(), pointees);
    }
  }
  out.varint(table.order().size());
  for (const Instance* inst : table.order()) {
    out.signedVarint(inst->node);
    out.varint(table.ref(inst->right.get()));
    out.signedVarint(inst->start);
    out.signedVarint(inst->end);
    out.real(inst->prob);
    out.varint(inst->binds.size());
    for (const Binding& b : inst->binds) {
      out.varint(b.leaf);
      out.varint(b.seq);
      out.event(b.event);
      out.signedVarint(b.prev_filled);
    }
  }
  out.varint(states_.size());
  for (const NodeState& st : states_) {
    for (const auto* list : {&st.lhist, &st.rhist, &st.negated}) {
      out.varint(list->size());
      for (const InstPtr& inst : *list) out.varint(table.ref(inst.get()) - 1);
    }
    out.flag(st.neg_seen);
    out.signedVarint(st.neg_best);
    out.varint(st.starts.size());
    for (Timestamp ts : st.starts) out.signedVarint(ts);
  }
  return Status::ok();
}

AlgebraDetector::InstPtr AlgebraDetector::restoreInstance(plugin::SnapshotReader& in,
                                                          const std::vector<InstPtr>& table) const {
  auto inst = std::make_shared<Instance>();
  const int64_t node = in.signedVarint();
  const uint64_t right = in.varint();
  inst->start = in.signedVarint();
  inst->end = in.signedVarint();
  inst->prob = in.real();
  const uint64_t binds = in.count(4);
  const std::string what = "instance " + std::to_string(table.size());
  if (!in.ok()) return nullptr;
  if (node < -1 || node >= static_cast<int64_t>(plan_->nodes.size())) {
    in.fail(what + " of node " + std::to_string(node) + " of " +
            std::to_string(plan_->nodes.size()));
    return nullptr;
  }
  if (right > table.size() || (node >= 0) != (right > 0) || (node >= 0) != (binds == 0)) {
    in.fail(what + ": neither a lazy instance over an earlier one nor one with bound events");
    return nullptr;
  }
  if (node >= 0) {
    // What expand(), descend() and runs() walk: a Kleene node's run ends
    // with an event; a sequence's lazy instance ends with an event or a
    // lazy Kleene instance.
    const auto k = static_cast<size_t>(node);
    inst->node = static_cast<int>(node);
    inst->right = table[right - 1];
    const int under = inst->right->node;
    const bool walks = kleene_lazy_[k]
                           ? under < 0
                           : lazy_[k] && (under < 0 || kleene_lazy_[static_cast<size_t>(under)]);
    if (!walks) {
      in.fail(what + ": a lazy instance of node " + std::to_string(node) +
              ", which holds none such");
      return nullptr;
    }
  }
  for (uint64_t i = 0; i < binds && in.ok(); ++i) {
    Binding b;
    const uint64_t leaf = in.varint();
    b.seq = in.varint();
    b.event = in.event();
    b.prev_filled = in.signedVarint();
    if (!in.ok()) break;
    if (leaf >= plan_->leaves.size() || !b.event || b.seq >= next_seq_) {
      in.fail(what + ": a bound event of leaf " + std::to_string(leaf) + " of " +
              std::to_string(plan_->leaves.size()) + ", or missing, or not yet arrived");
      break;
    }
    b.leaf = static_cast<uint32_t>(leaf);
    if (!inst->binds.empty()) {
      const Binding& prev = inst->binds.back();
      if (prev.leaf > b.leaf || (prev.leaf == b.leaf && prev.seq >= b.seq)) {
        in.fail(what + ": bound events out of (leaf, arrival) order");
        break;
      }
    }
    inst->binds.push_back(std::move(b));
  }
  return in.ok() ? inst : nullptr;
}

Status AlgebraDetector::restore(plugin::SnapshotReader& in) {
  if (!in.section("algebra", kSnapshotVersion)) return in.status();
  now_ = in.signedVarint();
  next_seq_ = in.varint();
  ticks_ = in.varint();
  kept_ = in.varint();
  peak_kept_ = in.varint();
  evicted_ = in.varint();
  const uint64_t open = in.count();
  for (uint64_t i = 0; i < open && in.ok(); ++i) {
    EventPtr e = in.event();
    if (in.ok() && (!e || e->ts() != now_))
      in.fail("an open tick's event missing or not at its ts");
    tick_events_.push_back(std::move(e));
  }
  if (const uint64_t n = in.count(); in.ok() && n != last_filled_.size()) {
    in.fail("state of " + std::to_string(n) + " atoms' last events for a plan of " +
            std::to_string(last_filled_.size()) + " nodes");
  }
  for (Timestamp& ts : last_filled_) ts = in.signedVarint();

  std::vector<InstPtr> table;
  const uint64_t instances = in.count(12);
  for (uint64_t i = 0; i < instances && in.ok(); ++i) {
    if (InstPtr inst = restoreInstance(in, table)) table.push_back(std::move(inst));
  }
  if (const uint64_t n = in.count(); in.ok() && n != states_.size()) {
    in.fail("state of " + std::to_string(n) + " nodes for a plan of " +
            std::to_string(states_.size()));
  }
  for (size_t i = 0; i < states_.size() && in.ok(); ++i) {
    NodeState& st = states_[i];
    for (auto* list : {&st.lhist, &st.rhist, &st.negated}) {
      const uint64_t n = in.count();
      for (uint64_t j = 0; j < n && in.ok(); ++j) {
        const uint64_t at = in.varint();
        if (at >= table.size()) {
          in.fail("node " + std::to_string(i) + " holds instance " + std::to_string(at) + " of " +
                  std::to_string(table.size()));
          break;
        }
        // A lazy instance is read only from the left history of the node
        // above the one that made it.
        const int node = table[at]->node;
        if (node >= 0 && (list != &st.lhist || plan_->nodes[i].left != node)) {
          in.fail("node " + std::to_string(i) + " holds a lazy instance of node " +
                  std::to_string(node));
          break;
        }
        list->push_back(table[at]);
      }
    }
    st.neg_seen = in.flag();
    st.neg_best = in.signedVarint();
    const uint64_t starts = in.count();
    for (uint64_t j = 0; j < starts && in.ok(); ++j) {
      st.starts.push_back(in.signedVarint());
      if (j > 0 && st.starts[j - 1] >= st.starts[j]) in.fail("node starts out of order");
    }
  }
  return in.status();
}

}  // namespace cepbus::plugins::algebra
