#include "plugins/nfa/nfa_detector.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>

namespace cepbus::plugins::nfa {
namespace {

using pattern::SlotBinding;
using pattern::Strategy;

// The partition value of `event` for PARTITION BY `attr`: the attribute, or
// for `key` without such an attribute the event's own partition key (the
// JSON field "key"); null (a partition of its own) when it has neither.
const Value& partitionValue(const Event& event, Symbol attr) {
  static const Symbol kKey = Symbol::intern("key");
  static const Value kNull;
  const Value* v = event.find(attr);
  if (v == nullptr && attr == kKey && !event.key().isNull()) v = &event.key();
  return v != nullptr ? *v : kNull;
}

Timestamp floorDiv(Timestamp a, Timestamp b) {
  Timestamp q = a / b;
  if (a % b != 0 && (a < 0) != (b < 0)) --q;
  return q;
}

}  // namespace

Timestamp NfaDetector::addCapped(Timestamp a, Timestamp b) {
  Timestamp sum;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

uint64_t NfaDetector::entryBytes(const Event& event) {
  return sizeof(Event) + event.attributes().size() * sizeof(Attribute) + 64;
}

std::pair<uint64_t, uint64_t> NfaDetector::dropBefore(Ring<Entry>& stack, Timestamp bound) {
  uint64_t n = 0;
  uint64_t bytes = 0;
  while (!stack.empty() && stack.front().ts < bound) {
    bytes += entryBytes(*stack.front().event);
    stack.front().event.reset();
    stack.popFront();
    ++n;
  }
  return {n, bytes};
}

bool NfaDetector::LaterDeadline::operator()(uint32_t a, uint32_t b) const {
  const Parked& x = (*parked)[a];
  const Parked& y = (*parked)[b];
  return x.deadline != y.deadline ? x.deadline > y.deadline : x.seq > y.seq;
}

NfaDetector::NfaDetector(PlanPtr plan, plugin::MatchSink& sink)
    : plan_(std::move(plan)),
      sink_(sink),
      composer_(plan_),
      m_(static_cast<int>(plan_->size())),
      any_match_(plan_->strategy == Strategy::kSkipTillAnyMatch),
      batched_(plan_->construction == Construction::kBatched),
      plain_first_(!plan_->elements[0].kleene && plan_->elements[0].complete_checks.empty() &&
                   plan_->elements[0].complete_negations.empty() &&
                   plan_->elements[0].verify_at_completion.empty() &&
                   plan_->strategy != Strategy::kStrictContiguity),
      member_checks_(!plan_->member_checks.empty() || !plan_->member_negations.empty()),
      fixed_ends_(plan_->fixed_element_ends),
      min_prob_(plan_->min_probability),
      drop_unlikely_(min_prob_ > 0 && plan_->strategy != Strategy::kSkipTillNextMatch),
      partition_cap_(plan_->partition_by.empty()
                         ? std::min(plan_->max_partition_entries, plan_->max_entries)
                         : plan_->max_partition_entries),
      total_cap_(plan_->max_entries),
      refuse_new_(plan_->state_policy == StatePolicy::kRefuseNew),
      trailing_(!plan_->trailing_negations.empty()) {
  bind_.resize(plan_->layout.size());
  scratch_.resize(1);
  if (plan_->partition_by.empty()) {
    single_ = std::make_unique<Partition>();
    single_->stacks.resize(m_);
    single_->negations.resize(plan_->negations.size());
  }
}

NfaDetector::~NfaDetector() = default;

Status NfaDetector::onEvent(const EventPtr& event) {
  const Timestamp ts = event->ts();
  if (ts < now_) {
    return Status::invalidArgument("nfa detector: event at ts " + std::to_string(ts) +
                                   " arrived after ts " + std::to_string(now_) +
                                   "; events must arrive in timestamp order");
  }
  now_ = ts;
  // Every event before ts has been seen: decide the matches whose window
  // closed before it, before expiry drops the negating events they need.
  if (trailing_ && ts > INT64_MIN) decideParked(ts - 1);
  if (ts >= next_batch_) {
    if (next_batch_ != INT64_MIN) {
      if (batched_) {
        runBatch(ts);
      } else if (!single_) {
        // Per-event construction expires a partition's stacks only when the
        // partition sees an event; sweep the quiet ones now and then.
        if (plan_->window != kNoWindow) {
          for (auto& p : live_) expire(*p, ts - plan_->window);
        }
        recycleEmptyPartitions();
      }
    }
    next_batch_ = (floorDiv(ts, plan_->batch_period) + 1) * plan_->batch_period;
  }
  const TypeRoute* route = plan_->route(event->type());
  if (route == nullptr && plan_->strategy != Strategy::kStrictContiguity) return Status::ok();
  Partition* p = single_ ? single_.get() : partitionFor(*event);
  const uint64_t seq = p->seq++;
  if (route == nullptr) return Status::ok();  // it only breaks contiguity
  if (!batched_ && plan_->window != kNoWindow) expire(*p, ts - plan_->window);
  for (int n : route->negations) {
    const NegationPlan& neg = plan_->negations[n];
    if (!passes(neg.filters, neg.slot, false, *event)) continue;
    Entry& e = p->negations[n].pushBack();
    e.ts = ts;
    e.event = event;
  }
  p->last_ts = ts;
  bool grew = false;
  for (int k : route->elements) grew |= push(*p, k, event, seq);
  // Only an event that starts or extends a partial match makes room: an
  // accepting entry waiting for its construction is about to go.
  if (grew && !refuse_new_) {
    if (p->held > partition_cap_) trimOldest(*p, partition_cap_);
    if (held_ > total_cap_) shedLeastRecent();
  }
  peak_held_ = std::max(peak_held_, held_);
  return Status::ok();
}

Status NfaDetector::flush() {
  if (batched_) {
    if (single_) {
      constructPending(*single_);
    } else {
      for (auto& p : live_) constructPending(*p);
    }
  }
  return Status::ok();
}

Status NfaDetector::onWatermark(Timestamp t) {
  if (!trailing_) return Status::ok();
  if (batched_) {
    // A match's window closes no earlier than its last event: only the
    // batches holding an accepting event at or before t can owe one now.
    auto owes = [&](Partition& p) {
      const Ring<Entry>& acc = p.stacks[m_ - 1];
      const uint64_t i = std::max(p.constructed, acc.head());
      if (i < acc.tail() && acc.at(i).ts <= t) constructPending(p);
    };
    if (single_) {
      owes(*single_);
    } else {
      for (auto& p : live_) owes(*p);
    }
  }
  decideParked(t);
  return Status::ok();
}

NfaDetector::Partition* NfaDetector::partitionFor(const Event& event) {
  uint64_t h = kKeyHashSeed;
  for (Symbol attr : plan_->partition_by)
    h = combineKeyHash(h, keyValueHash(partitionValue(event, attr)));
  auto [it, last] = by_hash_.equal_range(h);
  for (; it != last; ++it) {
    Partition* p = it->second;
    bool same = true;
    for (size_t i = 0; i < plan_->partition_by.size() && same; ++i) {
      same = sameKeyValue(p->key[i], partitionValue(event, plan_->partition_by[i]));
    }
    if (same) return p;
  }
  std::vector<Value> key;
  key.reserve(plan_->partition_by.size());
  for (Symbol attr : plan_->partition_by) key.push_back(partitionValue(event, attr));
  return addPartition(std::move(key), h);
}

NfaDetector::Partition* NfaDetector::addPartition(std::vector<Value> key, uint64_t hash) {
  std::unique_ptr<Partition> p;
  if (!pool_.empty()) {
    p = std::move(pool_.back());
    pool_.pop_back();
  } else {
    p = std::make_unique<Partition>();
    p->stacks.resize(m_);
    p->negations.resize(plan_->negations.size());
  }
  p->key = std::move(key);
  p->hash = hash;
  p->seq = 0;
  p->held = 0;
  p->constructed = p->stacks[m_ - 1].tail();
  by_hash_.emplace(hash, p.get());
  live_.push_back(std::move(p));
  return live_.back().get();
}

void NfaDetector::recycleEmptyPartitions() {
  for (size_t i = 0; i < live_.size();) {
    Partition& p = *live_[i];
    bool empty = true;
    for (const auto& s : p.stacks) empty &= s.empty();
    for (const auto& s : p.negations) empty &= s.empty();
    if (!empty || p.parked > 0) {
      ++i;
      continue;
    }
    auto [it, last] = by_hash_.equal_range(p.hash);
    for (; it != last; ++it) {
      if (it->second == &p) {
        by_hash_.erase(it);
        break;
      }
    }
    pool_.push_back(std::move(live_[i]));
    live_[i] = std::move(live_.back());
    live_.pop_back();
  }
}

bool NfaDetector::passes(const std::vector<const pattern::Conjunct*>& filters, int slot,
                         bool kleene, const Event& event) {
  if (filters.empty()) return true;
  SlotBinding& b = bind_[slot];
  if (kleene) {
    scratch_[0] = &event;
    b.events = std::span<const Event* const>(scratch_.data(), 1);
    b.current = SlotBinding::kNewest;
  } else {
    b.event = &event;
  }
  bool ok = true;
  for (const pattern::Conjunct* c : filters) {
    if (!c->test(bind_)) {
      ok = false;
      break;
    }
  }
  b = SlotBinding{};
  return ok;
}

bool NfaDetector::push(Partition& p, int k, const EventPtr& event, uint64_t seq) {
  const ElementPlan& el = plan_->elements[k];
  if (drop_unlikely_ && event->probability() < min_prob_) return false;
  if (!passes(el.push_filters, el.slot, el.kleene, *event)) return false;
  const Timestamp ts = event->ts();
  uint64_t rip = 0;
  if (k > 0) {
    const Ring<Entry>& prev = p.stacks[k - 1];
    rip = prev.tail();
    while (rip > prev.head() && prev.at(rip - 1).ts >= ts) --rip;
    // No earlier event of the previous element: no match can use this one.
    if (rip == prev.head()) return false;
  }
  if (refuse_new_ && k != m_ - 1 && atCap(p)) {
    ++evicted_;
    return false;
  }
  Ring<Entry>& stack = p.stacks[k];
  uint64_t rip_self = 0;
  if (el.kleene) {
    rip_self = stack.tail();
    while (rip_self > stack.head() && stack.at(rip_self - 1).ts >= ts) --rip_self;
  }
  const uint64_t index = stack.tail();
  Entry& e = stack.pushBack();
  ++held_;
  ++p.held;
  bytes_ += entryBytes(*event);
  e.ts = ts;
  e.rip = rip;
  e.rip_self = rip_self;
  e.seq = seq;
  e.event = event;
  if (k == m_ - 1 && !batched_) {
    constructOne(p, index);
    // skip_till_any_match never looks at an accepting entry again (unless a
    // later Kleene element builds on it); the other strategies narrow and
    // verify against it, so it stays until it expires.
    if (any_match_ && !el.kleene) {
      stack.back().event.reset();
      stack.popBack();
      --held_;
      --p.held;
      bytes_ -= entryBytes(*event);
    }
  }
  return k != m_ - 1;
}

void NfaDetector::expire(Partition& p, Timestamp bound) {
  dropEntries(p, bound);
  for (auto& s : p.negations) dropBefore(s, bound);
}

uint64_t NfaDetector::dropEntries(Partition& p, Timestamp bound) {
  uint64_t dropped = 0;
  for (auto& s : p.stacks) {
    const auto [n, bytes] = dropBefore(s, bound);
    dropped += n;
    bytes_ -= bytes;
  }
  held_ -= dropped;
  p.held -= dropped;
  p.constructed = std::max(p.constructed, p.stacks[m_ - 1].head());
  return dropped;
}

void NfaDetector::trimOldest(Partition& p, uint64_t cap) {
  // Matches the accepting entries already hold are complete: batched
  // construction builds them before their first elements go.
  if (batched_) constructPending(p);
  // One timestamp at a time: an event over the cap usually drops the one
  // oldest entry, so the cost per event stays constant at the cap.
  while (p.held > cap) {
    Timestamp oldest = INT64_MAX;
    for (const auto& s : p.stacks) {
      if (!s.empty()) oldest = std::min(oldest, s.at(s.head()).ts);
    }
    evicted_ += dropEntries(p, addCapped(oldest, 1));
  }
}

void NfaDetector::shedLeastRecent() {
  if (single_) {
    trimOldest(*single_, total_cap_);
    return;
  }
  // Down to nine tenths of the cap, so that a pass (a sort of the live
  // partitions) happens once per tenth of the cap's entries at most.
  const uint64_t target = total_cap_ - total_cap_ / 10;
  shed_order_.clear();
  for (auto& p : live_) shed_order_.push_back(p.get());
  std::sort(shed_order_.begin(), shed_order_.end(),
            [](const Partition* a, const Partition* b) { return a->last_ts < b->last_ts; });
  for (Partition* p : shed_order_) {
    if (held_ <= target) break;
    if (batched_) constructPending(*p);
    evicted_ += dropEntries(*p, INT64_MAX);
  }
}

bool NfaDetector::atCap(const Partition& p) const {
  return p.held >= partition_cap_ || held_ >= total_cap_;
}

void NfaDetector::runBatch(Timestamp now) {
  // Matches parked by this construction whose window already closed are
  // decided before expiry drops the negating events they need.
  if (single_) {
    constructPending(*single_);
    if (trailing_) decideParked(now - 1);
    if (plan_->window != kNoWindow) expire(*single_, now - plan_->window);
    return;
  }
  for (auto& p : live_) constructPending(*p);
  if (trailing_) decideParked(now - 1);
  if (plan_->window != kNoWindow) {
    for (auto& p : live_) expire(*p, now - plan_->window);
  }
  recycleEmptyPartitions();
}

void NfaDetector::constructPending(Partition& p) {
  Ring<Entry>& acc = p.stacks[m_ - 1];
  const bool kleene_last = plan_->elements[m_ - 1].kleene;
  uint64_t i = std::max(p.constructed, acc.head());
  while (i < acc.tail()) {
    uint64_t j = i + 1;
    if (any_match_) {
      // A cluster: consecutive accepting entries with identical links.
      const Entry& first = acc.at(i);
      while (j < acc.tail() && acc.at(j).rip == first.rip &&
             (!kleene_last || acc.at(j).rip_self == first.rip_self)) {
        ++j;
      }
    }
    if (j - i == 1) {
      constructOne(p, i);
    } else {
      constructCluster(p, i, j);
    }
    i = j;
  }
  p.constructed = acc.tail();
  if (any_match_ && !kleene_last) {
    const auto [n, bytes] = dropBefore(acc, INT64_MAX);
    held_ -= n;
    p.held -= n;
    bytes_ -= bytes;
  }
}

}  // namespace cepbus::plugins::nfa
