// NfaDetector's construction of matches from the instance stacks (per event
// or in batches over clusters that share a link) and the decision of matches
// parked for a trailing negation; nfa_detector.h says how they work.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "plugins/nfa/nfa_detector.h"

namespace cepbus::plugins::nfa {

using pattern::SlotBinding;
using pattern::Strategy;

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

}  // namespace cepbus::plugins::nfa
