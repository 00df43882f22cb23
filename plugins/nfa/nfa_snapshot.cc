// NfaDetector's snapshots (plugin::Detector::snapshot() and restore()):
// the partitions with their stacks at their absolute indices, the parked
// matches, the event time and batch boundary.

#include <algorithm>
#include <string>

#include "plugins/nfa/nfa_detector.h"

namespace cepbus::plugins::nfa {

void NfaDetector::snapshotPartition(const Partition& p, plugin::SnapshotWriter& out) const {
  out.varint(p.seq);
  out.varint(p.constructed);
  out.signedVarint(p.last_ts);
  auto ring = [&out](const Ring<Entry>& r, bool links) {
    out.varint(r.head());
    out.varint(r.size());
    for (uint64_t i = r.head(); i < r.tail(); ++i) {
      const Entry& e = r.at(i);
      out.event(e.event);
      if (!links) continue;
      out.varint(e.rip);
      out.varint(e.rip_self);
      out.varint(e.seq);
    }
  };
  for (const auto& r : p.stacks) ring(r, true);
  for (const auto& r : p.negations) ring(r, false);
}

void NfaDetector::restorePartition(Partition& p, plugin::SnapshotReader& in) {
  p.seq = in.varint();
  p.constructed = in.varint();
  p.last_ts = in.signedVarint();
  auto ring = [&](Ring<Entry>& r, const Ring<Entry>* prev, bool links) {
    r.restartAt(in.varint());
    const uint64_t n = in.count();
    for (uint64_t i = 0; i < n && in.ok(); ++i) {
      EventPtr event = in.event();
      if (!event) in.fail("an instance stack entry without its event");
      Entry e;
      if (links) {
        e.rip = in.varint();
        e.rip_self = in.varint();
        e.seq = in.varint();
        // A link past the previous stack's end would be followed blindly.
        if ((prev != nullptr && e.rip > prev->tail()) || e.rip_self > r.tail()) {
          in.fail("an instance stack link out of range");
        }
      }
      if (!in.ok()) return;
      e.ts = event->ts();
      if (links) bytes_ += entryBytes(*event);
      e.event = std::move(event);
      r.pushBack() = std::move(e);
    }
  };
  for (int k = 0; k < m_ && in.ok(); ++k) {
    ring(p.stacks[k], k > 0 ? &p.stacks[k - 1] : nullptr, true);
    held_ += p.stacks[k].size();
    p.held += p.stacks[k].size();
  }
  for (auto& r : p.negations) ring(r, nullptr, false);
  const Ring<Entry>& acc = p.stacks[m_ - 1];
  if (in.ok() && p.constructed > acc.tail()) in.fail("constructed past the accepting stack");
}

Status NfaDetector::snapshot(plugin::SnapshotWriter& out) const {
  out.section("nfa", kSnapshotVersion, plan_->state_shape);
  out.signedVarint(now_);
  out.signedVarint(next_batch_);
  out.varint(matches_);
  out.varint(peak_held_);
  out.varint(evicted_);
  out.varint(parked_seq_);
  if (single_) {
    snapshotPartition(*single_, out);
  } else {
    out.varint(live_.size());
    for (const auto& p : live_) {
      for (const Value& v : p->key) out.value(v);
      snapshotPartition(*p, out);
    }
  }
  out.varint(parked_heap_.size());
  for (uint32_t slot : parked_heap_) {
    const Parked& match = parked_[slot];
    out.varint(match.seq);
    uint64_t partition = 0;
    while (!single_ && live_[partition].get() != match.partition) ++partition;
    out.varint(partition);
    out.varint(match.events.size());
    for (const EventPtr& e : match.events) out.event(e);
    out.varint(match.ends.size());
    for (uint32_t end : match.ends) out.varint(end);
  }
  return Status::ok();
}

Status NfaDetector::restore(plugin::SnapshotReader& in) {
  if (!in.section("nfa", kSnapshotVersion, plan_->state_shape)) return in.status();
  now_ = in.signedVarint();
  next_batch_ = in.signedVarint();
  matches_ = in.varint();
  peak_held_ = in.varint();
  evicted_ = in.varint();
  parked_seq_ = in.varint();
  held_ = 0;
  bytes_ = 0;
  if (single_) {
    restorePartition(*single_, in);
  } else {
    const uint64_t partitions = in.count();
    for (uint64_t i = 0; i < partitions && in.ok(); ++i) {
      std::vector<Value> key;
      uint64_t h = kKeyHashSeed;
      for (size_t a = 0; a < plan_->partition_by.size(); ++a) {
        key.push_back(in.value());
        h = combineKeyHash(h, keyValueHash(key.back()));
      }
      restorePartition(*addPartition(std::move(key), h), in);
    }
  }
  const uint64_t parked = in.count();
  for (uint64_t i = 0; i < parked && in.ok(); ++i) {
    if (!trailing_) {
      in.fail("parked matches for a query without a trailing negation");
      break;
    }
    Parked match;
    match.seq = in.varint();
    const uint64_t partition = in.varint();
    if (single_ ? partition != 0 : partition >= live_.size()) {
      in.fail("a parked match of partition " + std::to_string(partition) + " of " +
              std::to_string(single_ ? 1 : live_.size()));
      break;
    }
    match.partition = single_ ? single_.get() : live_[partition].get();
    const uint64_t events = in.count();
    for (uint64_t e = 0; e < events && in.ok(); ++e) {
      match.events.push_back(in.event());
      if (!match.events.back()) in.fail("a parked match without its event");
    }
    const uint64_t ends = in.count();
    for (uint64_t e = 0; e < ends && in.ok(); ++e) {
      match.ends.push_back(static_cast<uint32_t>(in.varint()));
      if (match.ends.back() > match.events.size()) in.fail("a parked match's element end");
    }
    if (in.ok() && match.events.empty()) in.fail("a parked match without events");
    if (!in.ok()) break;
    // The query's WITHIN decides how long a match waits for its trailing
    // negation; an edited query's (carried over) may differ from the
    // writer's, and keeps only the matches that fit in it.
    match.deadline = addCapped(match.events.front()->ts(), plan_->window);
    if (match.events.back()->ts() - match.events.front()->ts() > plan_->window) continue;
    ++match.partition->parked;
    held_ += match.events.size();
    for (const EventPtr& e : match.events) bytes_ += entryBytes(*e);
    parked_.push_back(std::move(match));
    parked_heap_.push_back(static_cast<uint32_t>(parked_.size() - 1));
    std::push_heap(parked_heap_.begin(), parked_heap_.end(), LaterDeadline{&parked_});
  }
  return in.status();
}

}  // namespace cepbus::plugins::nfa
