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

// a + b, or INT64_MAX when it overflows (b >= 0).
Timestamp addCapped(Timestamp a, Timestamp b) {
  Timestamp sum;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

// What an entry keeps alive, for DetectorState::bytes: the entry and the
// fixed part of its event (an event on two stacks counts twice).
uint64_t entryBytes(const Event& event) {
  return sizeof(Event) + event.attributes().size() * sizeof(Attribute) + 64;
}

// Drops the entries of `stack` older than `bound`; returns how many and the
// bytes they kept alive.
template <typename Entry>
std::pair<uint64_t, uint64_t> dropBefore(Ring<Entry>& stack, Timestamp bound) {
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

Timestamp floorDiv(Timestamp a, Timestamp b) {
  Timestamp q = a / b;
  if (a % b != 0 && (a < 0) != (b < 0)) --q;
  return q;
}

}  // namespace

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

// --- construction -----------------------------------------------------------

void NfaDetector::reserveBuffers(const Partition& p) {
  size_t needed = static_cast<size_t>(m_) + 1;
  for (int k = 0; k < m_; ++k) {
    if (plan_->elements[k].kleene) needed += p.stacks[k].size();
  }
  if (pbuf_.size() < needed) {
    const size_t size = std::max(needed, pbuf_.size() * 2);
    pbuf_.resize(size);
    ebuf_.resize(size);
    ibuf_.resize(size);
    prob_.resize(size + 1);
  }
  end_ = pbuf_.size();
  prob_[end_] = 1;
  pos_ = end_;
  estart_[m_] = end_;
}

void NfaDetector::constructOne(Partition& p, uint64_t index) {
  cur_ = &p;
  cluster_ = false;
  reserveBuffers(p);
  const Timestamp ts = p.stacks[m_ - 1].at(index).ts;
  lo_ts_ = plan_->window == kNoWindow ? INT64_MIN : ts - plan_->window;
  enterElement(m_ - 1, index);
}

void NfaDetector::constructCluster(Partition& p, uint64_t begin, uint64_t end) {
  cur_ = &p;
  cluster_ = true;
  cluster_begin_ = begin;
  cluster_end_ = end;
  reserveBuffers(p);
  // The earliest member admits the most prefixes; each member's own window
  // is checked as its matches are emitted.
  const Timestamp ts = p.stacks[m_ - 1].at(begin).ts;
  lo_ts_ = plan_->window == kNoWindow ? INT64_MIN : ts - plan_->window;
  // The first member stands in for all of them while the shared links are
  // walked; nothing that names it is checked before leaf().
  enterElement(m_ - 1, begin);
  cluster_ = false;
}

bool NfaDetector::bindPosition(uint64_t index, const Entry& entry) {
  --pos_;
  pbuf_[pos_] = &entry.event;
  ebuf_[pos_] = entry.event.get();
  ibuf_[pos_] = index;
  // A cluster's first member stands in for every member: emit() multiplies
  // in each member's own probability.
  const bool stand_in = cluster_ && pos_ + 1 == end_;
  prob_[pos_] = prob_[pos_ + 1] * (stand_in ? 1.0 : entry.event->probability());
  return prob_[pos_] >= min_prob_;
}

void NfaDetector::enterElement(int k, uint64_t index) {
  const Entry& entry = cur_->stacks[k].at(index);
  if (!bindPosition(index, entry)) {  // probabilities only shrink: no match below
    ++pos_;
    return;
  }
  estart_[k] = pos_;
  const ElementPlan& el = plan_->elements[k];
  if (el.kleene) {
    if (el.slot >= 0) {
      SlotBinding& b = bind_[el.slot];
      b.events = std::span<const Event* const>(&ebuf_[pos_], 1);
      b.current = SlotBinding::kNewest;
    }
    if (bindChecks(k, false)) grow(k);
  } else {
    if (el.slot >= 0) bind_[el.slot].event = entry.event.get();
    completed(k);
  }
  ++pos_;
}

void NfaDetector::grow(int k) {
  const ElementPlan& el = plan_->elements[k];
  const size_t first = pos_;
  auto bindSpan = [&]() {
    estart_[k] = pos_;
    if (el.slot >= 0) {
      SlotBinding& b = bind_[el.slot];
      b.events = std::span<const Event* const>(&ebuf_[pos_], estart_[k + 1] - pos_);
      b.current = SlotBinding::kNewest;
    }
  };
  bindSpan();
  // Either the element's binding starts here...
  completed(k);
  // ...or an earlier event of the same element comes before it.
  Ring<Entry>& stack = cur_->stacks[k];
  const uint64_t index = ibuf_[first];
  const Entry& f = stack.at(index);
  auto prepend = [&](uint64_t j) {
    const bool likely = bindPosition(j, stack.at(j));
    bindSpan();
    bool ok = likely && bindChecks(k, true);
    if (ok && el.verify_on_prepend && plan_->strategy == Strategy::kSkipTillNextMatch) {
      ok = verifyStep(k, pos_ + 1);
    }
    if (ok) grow(k);
    ++pos_;
  };
  if (plan_->strategy == Strategy::kStrictContiguity) {
    if (f.rip_self > stack.head()) {
      const Entry& c = stack.at(f.rip_self - 1);
      if (c.seq + 1 == f.seq && c.ts >= lo_ts_) prepend(f.rip_self - 1);
    }
    return;
  }
  Timestamp lo = lo_ts_;
  if (plan_->strategy == Strategy::kSkipTillNextMatch && el.exact_next && index > stack.head()) {
    lo = std::max(lo, stack.at(index - 1).ts);
  }
  for (uint64_t j = f.rip_self; j > stack.head();) {
    --j;
    if (stack.at(j).ts < lo) break;
    prepend(j);
  }
}

bool NfaDetector::bindChecks(int k, bool prepended) {
  const ElementPlan& el = plan_->elements[k];
  if (el.prepend_checks.empty()) return true;
  SlotBinding& b = bind_[el.slot];
  for (const Check& c : el.prepend_checks) {
    if (cluster_ && c.mentions_last) continue;
    if (c.conjunct->uses_previous) {
      if (!prepended) continue;
      b.current = 1;  // the former first element, now with a predecessor
    } else {
      b.current = 0;  // the element just bound
    }
    const bool ok = c.conjunct->test(bind_);
    b.current = SlotBinding::kNewest;
    if (!ok) return false;
  }
  return true;
}

void NfaDetector::completed(int k) {
  const ElementPlan& el = plan_->elements[k];
  for (const Check& c : el.complete_checks) {
    if (cluster_ && c.mentions_last) continue;
    if (!testCheck(c)) return;
  }
  for (int n : el.complete_negations) {
    if (cluster_ && plan_->negations[n].mentions_last) continue;
    if (negationBlocks(n)) return;
  }
  if (plan_->strategy == Strategy::kSkipTillNextMatch) {
    for (int t : el.verify_at_completion) {
      if (!verifyElement(t)) return;
    }
  }
  if (k == 0) {
    leaf();
    return;
  }
  const Ring<Entry>& stack = cur_->stacks[k];
  const uint64_t index = ibuf_[estart_[k]];
  const Entry& f = stack.at(index);
  const Ring<Entry>& prev = cur_->stacks[k - 1];
  if (plan_->strategy == Strategy::kStrictContiguity) {
    if (f.rip > prev.head()) {
      const Entry& c = prev.at(f.rip - 1);
      if (c.seq + 1 == f.seq && c.ts >= lo_ts_) enterElement(k - 1, f.rip - 1);
    }
    return;
  }
  Timestamp lo = lo_ts_;
  if (plan_->strategy == Strategy::kSkipTillNextMatch && (el.exact_next || el.verify_on_prepend) &&
      index > stack.head()) {
    // Every entry of this stack qualifies as the element's first event, so
    // the previous one would have been taken by any predecessor before it.
    lo = std::max(lo, stack.at(index - 1).ts);
  }
  if (k == 1 && plain_first_) {
    emitFirstElements(f.rip, lo);
    return;
  }
  for (uint64_t j = f.rip; j > prev.head();) {
    --j;
    if (prev.at(j).ts < lo) break;
    enterElement(k - 1, j);
  }
}

void NfaDetector::emitFirstElements(uint64_t rip, Timestamp lo) {
  const Ring<Entry>& first = cur_->stacks[0];
  const size_t p = --pos_;
  estart_[0] = p;
  if (cluster_ && !member_checks_) {
    // The links above were walked once for the whole cluster; each member
    // now takes the first-element candidates inside its own window.
    const Ring<Entry>& acc = cur_->stacks[m_ - 1];
    const size_t member_pos = end_ - 1;
    for (uint64_t i = cluster_begin_; i < cluster_end_; ++i) {
      const Entry& member = acc.at(i);
      const Timestamp member_lo =
          plan_->window == kNoWindow ? lo : std::max(lo, member.ts - plan_->window);
      pbuf_[member_pos] = &member.event;
      for (uint64_t j = rip; j > first.head();) {
        --j;
        const Entry& c = first.at(j);
        if (c.ts < member_lo) break;
        pbuf_[p] = &c.event;
        prob_[p] = prob_[p + 1] * c.event->probability();
        emit();
      }
    }
  } else {
    for (uint64_t j = rip; j > first.head();) {
      --j;
      const Entry& c = first.at(j);
      if (c.ts < lo) break;
      // Nothing checks the first element once bound, so only the match
      // buffers need it (ebuf_ for a cluster's window).
      prob_[p] = prob_[p + 1] * c.event->probability();
      if (prob_[p] < min_prob_) continue;
      pbuf_[p] = &c.event;
      ebuf_[p] = c.event.get();
      leaf();
    }
  }
  ++pos_;
}

bool NfaDetector::testCheck(const Check& check) {
  if (check.iter_element < 0) return check.conjunct->test(bind_);
  SlotBinding& b = bind_[plan_->elements[check.iter_element].slot];
  bool ok = true;
  for (size_t j = 0; j < b.events.size() && ok; ++j) {
    b.current = j;
    ok = check.conjunct->test(bind_);
  }
  b.current = SlotBinding::kNewest;
  return ok;
}

bool NfaDetector::negationBlocks(int n) {
  const NegationPlan& neg = plan_->negations[n];
  if (neg.place == NegationPlace::kLeading) {
    // No C with last.ts - W <= c.ts < first.ts.
    const Timestamp last = ebuf_[end_ - 1]->ts();
    return negatedBetween(n, cur_->negations[n], last - plan_->window - 1, ebuf_[estart_[0]]->ts());
  }
  return negatedBetween(n, cur_->negations[n], ebuf_[estart_[neg.right] - 1]->ts(),
                        ebuf_[estart_[neg.right]]->ts());
}

bool NfaDetector::negatedBetween(int n, const Ring<Entry>& stack, Timestamp after,
                                 Timestamp before) {
  const NegationPlan& neg = plan_->negations[n];
  uint64_t lo = stack.head(), hi = stack.tail();
  while (lo < hi) {  // the first entry with ts > after
    const uint64_t mid = lo + (hi - lo) / 2;
    if (stack.at(mid).ts <= after) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  for (uint64_t j = lo; j < stack.tail(); ++j) {
    const Entry& c = stack.at(j);
    if (c.ts >= before) break;
    if (neg.conditions.empty()) return true;
    bind_[neg.slot].event = c.event.get();
    bool all = true;
    for (const Check& check : neg.conditions) {
      if (!testCheck(check)) {
        all = false;
        break;
      }
    }
    bind_[neg.slot].event = nullptr;
    if (all) return true;
  }
  return false;
}

bool NfaDetector::verifyElement(int k) {
  for (size_t p = estart_[k]; p < estart_[k + 1]; ++p) {
    if (p == pos_) continue;  // the start of the run: any event may start one
    if (!verifyStep(k, p)) return false;
  }
  return true;
}

bool NfaDetector::verifyStep(int k, size_t position) {
  const Timestamp prev_ts = ebuf_[position - 1]->ts();
  const Ring<Entry>& stack = cur_->stacks[k];
  for (uint64_t q = ibuf_[position]; q > stack.head();) {
    --q;
    const Entry& c = stack.at(q);
    if (c.ts <= prev_ts) break;
    // An event between the predecessor and the bound one that qualifies
    // would have been taken instead.
    if (qualifies(k, position, c)) return false;
  }
  return true;
}

bool NfaDetector::qualifies(int k, size_t position, const Entry& candidate) {
  const ElementPlan& el = plan_->elements[k];
  SlotBinding& b = bind_[el.slot];
  const SlotBinding saved = b;
  const Event* saved_event = ebuf_[position];
  if (el.kleene) {
    ebuf_[position] = candidate.event.get();
    b.events = std::span<const Event* const>(&ebuf_[estart_[k]], position - estart_[k] + 1);
    b.current = SlotBinding::kNewest;
  } else {
    b.event = candidate.event.get();
  }
  bool ok = true;
  for (const Check& c : el.qualify) {
    ok = c.iter_element == k ? c.conjunct->test(bind_) : testCheck(c);
    if (!ok) break;
  }
  ebuf_[position] = saved_event;
  b = saved;
  return ok;
}

void NfaDetector::leaf() {
  if (cluster_) {
    leafCluster();
  } else {
    emit();
  }
}

void NfaDetector::leafCluster() {
  const Ring<Entry>& acc = cur_->stacks[m_ - 1];
  const size_t member_pos = end_ - 1;
  // Members are in time order: after the first one outside this prefix's
  // window, all are.
  Timestamp limit = INT64_MAX;
  if (pos_ != member_pos && plan_->window != kNoWindow &&
      __builtin_add_overflow(ebuf_[pos_]->ts(), plan_->window, &limit)) {
    limit = INT64_MAX;
  }
  if (!member_checks_) {
    for (uint64_t i = cluster_begin_; i < cluster_end_; ++i) {
      const Entry& member = acc.at(i);
      if (member.ts > limit) break;
      pbuf_[member_pos] = &member.event;
      emit();
    }
    return;
  }
  const ElementPlan& last = plan_->elements[m_ - 1];
  for (uint64_t i = cluster_begin_; i < cluster_end_; ++i) {
    const Entry& member = acc.at(i);
    if (member.ts > limit) break;
    pbuf_[member_pos] = &member.event;
    ebuf_[member_pos] = member.event.get();
    ibuf_[member_pos] = i;
    if (last.slot >= 0 && !last.kleene) bind_[last.slot].event = member.event.get();
    bool ok = true;
    for (const Check& check : plan_->member_checks) {
      if (!testCheck(check)) {
        ok = false;
        break;
      }
    }
    for (size_t n = 0; ok && n < plan_->member_negations.size(); ++n) {
      ok = !negationBlocks(plan_->member_negations[n]);
    }
    if (ok) emit();
  }
}

void NfaDetector::emit() {
  double probability = prob_[pos_];
  if (cluster_) probability *= (*pbuf_[end_ - 1])->probability();
  if (probability < min_prob_) return;
  std::span<const uint32_t> ends = fixed_ends_;
  if (ends.empty()) {  // Kleene elements: their lengths vary per match
    for (int k = 0; k < m_; ++k) ends_[k] = static_cast<uint32_t>(estart_[k + 1] - pos_);
    ends = std::span<const uint32_t>(ends_, m_);
  }
  if (trailing_) {
    park(ends);
    return;
  }
  const plugin::Match match(std::span<const EventPtr* const>(&pbuf_[pos_], end_ - pos_), ends,
                            &composer_);
  ++matches_;
  sink_.onMatch(match);
}

// --- trailing negation ------------------------------------------------------

void NfaDetector::park(std::span<const uint32_t> ends) {
  uint32_t slot;
  if (parked_free_.empty()) {
    slot = static_cast<uint32_t>(parked_.size());
    parked_.emplace_back();
  } else {
    slot = parked_free_.back();
    parked_free_.pop_back();
  }
  Parked& match = parked_[slot];
  for (size_t i = pos_; i < end_; ++i) match.events.push_back(*pbuf_[i]);
  match.ends.assign(ends.begin(), ends.end());
  match.deadline = addCapped(match.events.front()->ts(), plan_->window);
  match.seq = parked_seq_++;
  match.partition = cur_;
  ++cur_->parked;
  held_ += match.events.size();
  for (const EventPtr& e : match.events) bytes_ += entryBytes(*e);
  parked_heap_.push_back(slot);
  std::push_heap(parked_heap_.begin(), parked_heap_.end(), LaterDeadline{&parked_});
}

void NfaDetector::decideParked(Timestamp t) {
  const LaterDeadline later{&parked_};
  while (!parked_heap_.empty() && parked_[parked_heap_.front()].deadline <= t) {
    std::pop_heap(parked_heap_.begin(), parked_heap_.end(), later);
    const uint32_t slot = parked_heap_.back();
    parked_heap_.pop_back();
    Parked& match = parked_[slot];
    if (!trailingNegated(match)) {
      parked_match_.clear();
      for (const EventPtr& e : match.events) parked_match_.push_back(&e);
      ++matches_;
      sink_.onMatch(plugin::Match(parked_match_, match.ends, &composer_));
    }
    held_ -= match.events.size();
    for (const EventPtr& e : match.events) bytes_ -= entryBytes(*e);
    --match.partition->parked;
    match.events.clear();
    parked_free_.push_back(slot);
  }
}

bool NfaDetector::trailingNegated(const Parked& match) {
  // Bind the positive variables to the match's events for the negations'
  // conditions, as construction had them.
  parked_events_.clear();
  for (const EventPtr& e : match.events) parked_events_.push_back(e.get());
  for (int k = 0; k < m_; ++k) {
    const ElementPlan& el = plan_->elements[k];
    if (el.slot < 0) continue;
    const uint32_t begin = k == 0 ? 0 : match.ends[k - 1];
    SlotBinding& b = bind_[el.slot];
    if (el.kleene) {
      b.events = std::span<const Event* const>(&parked_events_[begin], match.ends[k] - begin);
      b.current = SlotBinding::kNewest;
    } else {
      b.event = parked_events_[begin];
    }
  }
  const Timestamp last = match.events.back()->ts();
  const Timestamp before = addCapped(match.deadline, 1);  // the window's end is included
  bool negated = false;
  for (int n : plan_->trailing_negations) {
    negated = negatedBetween(n, match.partition->negations[n], last, before);
    if (negated) break;
  }
  for (const ElementPlan& el : plan_->elements) {
    if (el.slot >= 0) bind_[el.slot] = SlotBinding{};
  }
  return negated;
}

// --- snapshots ----------------------------------------------------------------

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
