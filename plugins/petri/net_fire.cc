// The run-time token game: each event fires the transitions of its type,
// deepest first, and every token reaching an output place is a match.

#include <algorithm>

#include "plugins/petri/net_parts.h"

namespace cepbus::plugins::petri {

Status PetriNet::onEvent(const EventPtr& event) {
  if (event->ts() < now_) {
    return Status::invalidArgument("event at ts " + std::to_string(event->ts()) +
                                   " arrived after ts " + std::to_string(now_) +
                                   "; the petri net needs non-decreasing timestamps");
  }
  now_ = event->ts();
  ++seq_;
  if (auto inh = inhibitors_.find(event->type()); inh != inhibitors_.end()) {
    for (const auto& [t, index] : inh->second) {
      std::vector<EventPtr>& place = t->inhibitors[index].place;
      if (t->window != kNoWindow) {
        // Sorted by ts: the stale ones lead. The window is copied out of the
        // structured binding because clang before 16 cannot capture one.
        const auto window = t->window;
        auto stale = std::find_if(place.begin(), place.end(),
                                  [&](const EventPtr& c) { return now_ - c->ts() <= window; });
        place.erase(place.begin(), stale);
      }
      place.push_back(event);
    }
  }
  auto it = by_type_.find(event->type());
  if (it != by_type_.end()) {
    for (Transition* t : it->second) fire(*t, event);
  }
  if (native_) {
    // Runs no event can extend any more (strict_contiguity: one that did not
    // take this event; skip_till_next_match: one every reader took) go now.
    for (const auto& t : transitions_) {
      if (t->strategy != pattern::Strategy::kSkipTillAnyMatch) {
        held_ -= std::erase_if(t->place, [&](const auto& tok) { return spent(*t, *tok); });
      }
    }
  }
  // Places whose consumers see no events still let their tokens expire.
  if (seq_ % 1024 == 0) {
    for (const auto& t : transitions_) {
      if (t->window == kNoWindow) continue;
      held_ -= std::erase_if(t->place,
                             [&](const auto& tok) { return now_ - tok->first_ts > t->window; });
      held_ -= t->runs.dropBefore(now_ - t->window);
    }
  }
  if (held_ > cap_) enforceCap();
  peak_held_ = std::max(peak_held_, held_);
  return Status::ok();
}

void PetriNet::enforceCap() {
  // A merge over the places, each in last_ts order: the token (or lazy
  // Kleene entry) whose last event is oldest next, or newest under refuse_new.
  struct Side {
    Transition* t;
    bool runs;  // the lazy Kleene place, not the token place
    size_t drop = 0;
    size_t size() const { return runs ? t->runs.entries.size() : t->place.size(); }
    Timestamp lastTs(size_t i) const {
      return runs ? t->runs.entries[i].token.last_ts : t->place[i]->last_ts;
    }
  };
  std::vector<Side> sides;
  for (const auto& t : transitions_) {
    if (!t->place.empty()) sides.push_back(Side{t.get(), false});
    if (!t->runs.entries.empty()) sides.push_back(Side{t.get(), true});
  }
  const bool oldest = !refuse_new_;
  const uint64_t excess = held_ - (oldest ? plugin::trimTarget(cap_) : cap_);
  uint64_t dropped = 0;
  while (dropped < excess) {
    Side* pick = nullptr;
    Timestamp best = 0;
    for (Side& side : sides) {
      const size_t n = side.size();
      if (side.drop == n) continue;
      const Timestamp ts = side.lastTs(oldest ? side.drop : n - 1 - side.drop);
      if (pick == nullptr || (oldest ? ts < best : ts > best)) {
        pick = &side;
        best = ts;
      }
    }
    if (pick == nullptr) break;
    ++pick->drop;
    ++dropped;
  }
  for (Side& side : sides) {
    const auto n = static_cast<std::ptrdiff_t>(side.drop);
    if (side.runs) {
      KleenePlace& runs = side.t->runs;
      if (oldest) {
        runs.entries.erase(runs.entries.begin(), runs.entries.begin() + n);
        runs.first += side.drop;
      } else {
        runs.entries.erase(runs.entries.end() - n, runs.entries.end());
      }
    } else if (oldest) {
      side.t->place.erase(side.t->place.begin(), side.t->place.begin() + n);
    } else {
      side.t->place.erase(side.t->place.end() - n, side.t->place.end());
    }
  }
  held_ -= dropped;
  evicted_ += dropped;
}

uint64_t PetriNet::heldBytes() const {
  constexpr uint64_t kTokenBytes =
      sizeof(std::shared_ptr<const Token>) + sizeof(Token) + 16 + sizeof(Event);
  return held_ * kTokenBytes;
}

void PetriNet::fire(Transition& t, const EventPtr& event) {
  const Timestamp ts = event->ts();
  if (t.group >= 0) {
    // A consuming transition: the event is gone once its group used it.
    if (static_cast<size_t>(t.group) >= taken_.size()) taken_.resize(t.group + 1, 0);
    if (taken_[t.group] == seq_) return;
  }
  if (t.loop) {
    if (t.lazy_runs) {
      fireLazyLoop(t, event);
    } else {
      fireLoop(t, event);
    }
    return;
  }
  if (t.input == nullptr) {
    if (guardsHold(t, nullptr, nullptr, event.get())) {
      if (t.group >= 0) taken_[t.group] = seq_;
      produce(t, nullptr, nullptr, event);
    }
    return;
  }
  if (t.input->lazy_runs) {
    enumerateRuns(t, event);
    return;
  }
  std::vector<std::shared_ptr<const Token>>& in = t.input->place;
  if (t.input->window != kNoWindow) {
    // The stale tokens that lead the place, dropped once they are an eighth
    // of it (amortised O(1) a token); firings skip the others, and onEvent()
    // sweeps every place now and then.
    const Timestamp w = t.input->window;
    const auto stale = std::find_if(in.begin(), in.end(),
                                    [&](const auto& tok) { return ts - tok->first_ts <= w; });
    if (static_cast<size_t>(stale - in.begin()) * 8 >= in.size()) {
      held_ -= static_cast<uint64_t>(stale - in.begin());
      in.erase(in.begin(), stale);
    }
  }
  if (t.lazy) {
    // One token for the event: the pairs it makes with the input place are
    // built when a reader extends them (Token::lazy).
    if (!in.empty() && !t.unlikely(event->probability()) &&
        guardsHold(t, nullptr, nullptr, event.get())) {
      produce(t, nullptr, nullptr, event);
    }
    return;
  }
  // By index: a join fired from produce() may append to another place.
  const Timestamp from = t.window == kNoWindow ? INT64_MIN : ts - t.window;
  const bool direct = reportsPairs(t);
  for (size_t i = 0, n = in.size(); i < n; ++i) {
    const Token* tok = in[i].get();
    if (tok->last_ts >= ts) continue;
    if (t.group < 0) {
      if (tok->first_ts < from) continue;
      if (direct && tok->lazy) {
        reportPairs(t, *tok, event, from);
        continue;
      }
      if (t.strategy != pattern::Strategy::kSkipTillAnyMatch &&
          !takes(t, *tok, Transition::kNextTook, *event)) {
        continue;
      }
      expand(*t.input, in[i], from,
             [&](const std::shared_ptr<const Token>& pair) { extend(t, pair, event); });
      continue;
    }
    if (t.window != kNoWindow && ts - tok->first_ts > t.window) continue;
    if (t.unlikely(tok->prob * event->probability())) continue;
    if (!guardsHold(t, tok, nullptr, event.get())) continue;
    if (!t.inhibitors.empty() && negated(t, tok, *event)) continue;
    // The oldest token that fits takes the event; both are consumed.
    std::shared_ptr<const Token> taken = std::move(in[i]);
    in.erase(in.begin() + static_cast<std::ptrdiff_t>(i));
    --held_;
    taken_[t.group] = seq_;
    produce(t, taken, nullptr, event);
    return;
  }
}

void PetriNet::extend(Transition& t, const std::shared_ptr<const Token>& tok,
                      const EventPtr& event) {
  if (t.window != kNoWindow && event->ts() - tok->first_ts > t.window) return;
  if (t.unlikely(tok->prob * event->probability())) return;
  if (!guardsHold(t, tok.get(), nullptr, event.get())) return;
  if (!t.inhibitors.empty() && negated(t, tok.get(), *event)) return;
  produce(t, tok, nullptr, event);
}

void PetriNet::expand(const Transition& t, const std::shared_ptr<const Token>& tok, Timestamp from,
                      const TokenVisitor& f) const {
  if (!tok->lazy) {
    f(tok);
    return;
  }
  // The input place is sorted by last_ts (tokens are made at their last
  // event and kept in order), so the tokens ending before `tok` lead, and
  // of those the ones ending before `from` start before it too.
  const std::vector<std::shared_ptr<const Token>>& in = t.input->place;
  auto by_last = [](const std::shared_ptr<const Token>& p, Timestamp ts) {
    return p->last_ts < ts;
  };
  const auto end = std::lower_bound(in.begin(), in.end(), tok->last_ts, by_last);
  const auto begin = std::lower_bound(in.begin(), end, from, by_last);
  // One pair on the stack, rewritten for each parent.
  Token pair;
  pair.event = EventPtr(EventPtr(), tok->event.get());
  pair.last_ts = tok->last_ts;
  pair.element = tok->element;
  pair.origin = tok.get();
  const std::shared_ptr<const Token> pair_ptr(std::shared_ptr<const Token>(), &pair);
  auto with = [&](const std::shared_ptr<const Token>& parent) {
    if (t.window != kNoWindow && tok->last_ts - parent->first_ts > t.window) return;
    const double prob = parent->prob * tok->prob;
    if (t.unlikely(prob)) return;
    pair.parent = std::shared_ptr<const Token>(std::shared_ptr<const Token>(), parent.get());
    pair.first_ts = parent->first_ts;
    pair.first_seq = parent->first_seq;
    pair.prob = prob;
    pair.parent_owner = &parent;
    f(pair_ptr);
  };
  for (auto it = begin; it != end; ++it) {
    if ((*it)->first_ts < from) continue;  // so does every pair a lazy one stands for
    if ((*it)->lazy) {
      expand(*t.input, *it, from, with);
    } else {
      with(*it);
    }
  }
}

bool PetriNet::reportsPairs(const Transition& t) const {
  if (t.group >= 0 || t.loop || t.by_element || !t.guards.empty() || !t.inhibitors.empty() ||
      t.consumers > 0 || !t.joins.empty() || t.input == nullptr || !t.input->lazy ||
      t.input->input == nullptr || t.input->input->lazy) {
    return false;
  }
  return std::all_of(t.outputs.begin(), t.outputs.end(),
                     [](const PatternEntry* p) { return p->completion->empty(); });
}

void PetriNet::reportPairs(Transition& t, const Token& lazy, const EventPtr& event,
                           Timestamp from) {
  // What expand() and extend() check of each pair, in the same order,
  // with the same window and probability bounds; the pair is never built.
  const Transition& mid = *t.input;
  const std::vector<std::shared_ptr<const Token>>& in = mid.input->place;
  auto by_last = [](const std::shared_ptr<const Token>& p, Timestamp ts) {
    return p->last_ts < ts;
  };
  const auto end = std::lower_bound(in.begin(), in.end(), lazy.last_ts, by_last);
  const auto begin = std::lower_bound(in.begin(), end, from, by_last);
  // chain_: the parent's events, the lazy token's, the event's.
  const size_t parent_events = static_cast<size_t>(mid.depth);
  chain_.resize(parent_events + 2);
  chain_[parent_events] = &lazy.event;
  chain_[parent_events + 1] = &event;
  const Timestamp ts = event->ts();
  for (auto it = begin; it != end; ++it) {
    const Token& parent = **it;
    if (parent.first_ts < from) continue;
    if (mid.window != kNoWindow && lazy.last_ts - parent.first_ts > mid.window) continue;
    const double pair_prob = parent.prob * lazy.prob;
    if (mid.unlikely(pair_prob)) continue;
    if (t.window != kNoWindow && ts - parent.first_ts > t.window) continue;
    const Stamps stamps{parent.first_ts, ts, parent.first_seq, pair_prob * event->probability()};
    if (t.unlikely(stamps.prob)) continue;
    report(t, stamps, &parent, event.get(), [&] {
      if (parent.event && parent_events == 1) {
        chain_[0] = &parent.event;  // the common case: one event before the lazy one
        return;
      }
      bound_.clear();
      collect(&parent, bound_);
      std::copy(bound_.begin(), bound_.end(), chain_.begin());
    });
  }
}

template <typename Collect>
void PetriNet::report(Transition& t, const Stamps& tok, const Token* parent, const Event* event,
                      Collect&& collect_chain) {
  bool collected = false;
  for (const std::vector<PatternEntry*>& group : t.output_groups) {
    SharedComposer composer(*group.front()->composer);
    for (const PatternEntry* p : group) {
      if (tok.first_seq < p->since_seq) continue;
      if (p->window != kNoWindow && tok.last_ts - tok.first_ts > p->window) continue;
      if (tok.prob < p->min_probability) continue;
      const std::vector<const pattern::Conjunct*>& completion = *p->completion;
      if (!completion.empty()) {
        bind(t, parent, nullptr, event);
        if (!std::all_of(completion.begin(), completion.end(),
                         [&](const pattern::Conjunct* c) { return c->test(bind_); })) {
          continue;
        }
      }
      if (!collected) {
        // Once per token: every output of `t` binds the same events.
        collect_chain();
        collected = true;
      }
      p->sink->onMatch(plugin::Match(chain_, t.by_element ? ends_ : p->ends, &composer));
    }
  }
}

std::shared_ptr<const PetriNet::Token> PetriNet::own(const std::shared_ptr<const Token>& tok) {
  if (tok == nullptr || tok->origin == nullptr) return tok;
  auto kept = std::make_shared<Token>(*tok);
  kept->event = tok->origin->event;
  kept->parent = own(*tok->parent_owner);
  kept->origin = nullptr;
  kept->parent_owner = nullptr;
  return kept;
}

void PetriNet::materialize(Transition& t) {
  std::vector<std::shared_ptr<const Token>> kept;
  for (const std::shared_ptr<const Token>& tok : t.place) {
    expand(t, tok, INT64_MIN,
           [&](const std::shared_ptr<const Token>& pair) { kept.push_back(own(pair)); });
  }
  held_ += kept.size();
  held_ -= t.place.size();
  t.place = std::move(kept);
}

void PetriNet::fireLoop(Transition& t, const EventPtr& event) {
  const Timestamp ts = event->ts();
  auto expire = [&](std::vector<std::shared_ptr<const Token>>& place, Timestamp w) {
    if (w != kNoWindow)
      held_ -= std::erase_if(place, [&](const auto& tok) { return ts - tok->first_ts > w; });
  };
  auto extend = [&](std::vector<std::shared_ptr<const Token>>& place, size_t n, uint8_t took) {
    for (size_t i = 0; i < n; ++i) {
      const Token* tok = place[i].get();
      if (tok->last_ts >= ts) continue;
      if (t.window != kNoWindow && ts - tok->first_ts > t.window) continue;
      if (t.strategy != pattern::Strategy::kSkipTillAnyMatch && !takes(t, *tok, took, *event)) {
        continue;
      }
      if (!guardsHold(t, tok, nullptr, event.get())) continue;
      produce(t, place[i], nullptr, event);
    }
  };
  // The runs so far, before this event starts new ones (feedback: Kleene
  // patterns never consume).
  expire(t.place, t.window);
  const size_t runs = t.place.size();
  if (t.input == nullptr) {
    if (guardsHold(t, nullptr, nullptr, event.get())) produce(t, nullptr, nullptr, event);
  } else {
    expire(t.input->place, t.input->window);
    extend(t.input->place, t.input->place.size(), Transition::kNextTook);
  }
  extend(t.place, runs, Transition::kLoopTook);
}

void PetriNet::fireLazyLoop(Transition& t, const EventPtr& event) {
  const Timestamp ts = event->ts();
  KleenePlace& runs = t.runs;
  if (t.window != kNoWindow) held_ -= runs.dropBefore(ts - t.window);
  if (t.input != nullptr) {
    std::vector<std::shared_ptr<const Token>>& in = t.input->place;
    if (t.input->window != kNoWindow) {
      const Timestamp w = t.input->window;
      held_ -= std::erase_if(in, [&](const auto& tok) { return ts - tok->first_ts > w; });
    }
    // A run starts after a token of the input place (sorted by last_ts): an
    // event none precedes is in no run.
    if (in.empty() || in.front()->last_ts >= ts) return;
  }
  // Every run holding it would be dropped as unlikely.
  if (t.unlikely(event->probability())) return;
  const int slot = t.slots[static_cast<size_t>(t.depth)];
  const Event* pairing[2] = {nullptr, event.get()};
  if (!t.admit.empty() || !t.pair.empty()) bind_.assign(t.owner->layout.size(), {});
  if (!t.admit.empty()) {
    if (slot >= 0) bind_[slot].events = std::span<const Event* const>(pairing + 1, 1);
    for (const pattern::Conjunct* g : t.admit) {
      if (!g->test(bind_)) return;
    }
  }
  const uint64_t earlier = !runs.entries.empty() && runs.entries.back().token.last_ts == ts
                               ? runs.entries.back().earlier
                               : runs.end();
  KleenePlace::Entry& entry = runs.entries.emplace_back();
  entry.token.event = event;
  entry.token.first_ts = ts;
  entry.token.last_ts = ts;
  entry.token.first_seq = seq_;
  entry.token.prob = event->probability();
  entry.token.element = t.depth;
  entry.earlier = earlier;
  ++held_;
  if (t.all_links) return;
  // The iteration predicates relating b[i] to b[i-1], once per pair.
  bind_[slot].events = std::span<const Event* const>(pairing, 2);
  for (uint64_t n = runs.first; n < earlier; ++n) {
    pairing[0] = runs.at(n).token.event.get();
    if (std::all_of(t.pair.begin(), t.pair.end(),
                    [&](const pattern::Conjunct* g) { return g->test(bind_); })) {
      entry.links.push_back(n);
    }
  }
}

// One enumeration of the runs of a lazy Kleene place (enumerateRuns()).
struct PetriNet::RunWalk {
  Transition& u;          // the element after the Kleene one
  const Transition& t;    // the Kleene element's loop
  const EventPtr& event;  // u's event
  Timestamp from;         // the window's start: a match's first event is at or after it
  uint64_t lo;            // the first entry that has a parent before it
  size_t capacity;        // the longest run: the entries from lo on before the event
  int own_slot;           // the Kleene element's slot in u's binding
};

void PetriNet::enumerateRuns(Transition& u, const EventPtr& event) {
  const Transition& t = *u.input;
  const KleenePlace& runs = t.runs;
  const Timestamp ts = event->ts();
  const Timestamp from = u.window == kNoWindow ? INT64_MIN : ts - u.window;
  // The runs' events lie after the end of the earliest parent that starts
  // in the window (the input place is sorted by last_ts), or at or after
  // the window's start when the Kleene element comes first.
  Timestamp after = from == INT64_MIN ? INT64_MIN : from - 1;
  if (t.input != nullptr) {
    const auto& in = t.input->place;
    auto first =
        std::find_if(in.begin(), in.end(), [&](const auto& tok) { return tok->first_ts >= from; });
    if (first == in.end()) return;
    after = (*first)->last_ts;
  }
  const uint64_t lo = runs.firstAfter(after);
  const uint64_t hi = runs.firstAfter(ts - 1);
  if (lo >= hi) return;
  const size_t capacity = static_cast<size_t>(hi - lo);
  if (run_tokens_.size() < capacity) run_tokens_.resize(capacity);
  if (run_events_.size() < capacity) run_events_.resize(capacity);
  if (run_probs_.size() < capacity) run_probs_.resize(capacity);
  // u's guards naming no element before the Kleene one are checked on each
  // run before it is paired with the parents.
  uint64_t parent_mask = 0;
  for (size_t d = 0; d < static_cast<size_t>(t.depth); ++d) {
    if (u.slots[d] >= 0) parent_mask |= uint64_t{1} << u.slots[d];
  }
  early_.clear();
  for (const pattern::Conjunct* g : u.guards) {
    if ((g->slot_mask & parent_mask) == 0) early_.push_back(g);
  }
  const int event_slot = u.slots[static_cast<size_t>(u.depth)];
  early_bind_.assign(u.owner->layout.size(), pattern::SlotBinding{});
  if (event_slot >= 0) early_bind_[event_slot].event = event.get();
  RunWalk w{u, t, event, from, lo, capacity, u.slots[static_cast<size_t>(t.depth)]};
  for (uint64_t n = lo; n < hi; ++n) visitRuns(w, n, 0);
}

void PetriNet::visitRuns(RunWalk& w, uint64_t n, size_t depth) {
  const KleenePlace::Entry& entry = w.t.runs.at(n);
  const Token& origin = entry.token;
  const double prob = (depth == 0 ? 1.0 : run_probs_[depth - 1]) * origin.prob;
  if (w.t.unlikely(prob)) return;
  run_probs_[depth] = prob;
  Token& tok = run_tokens_[depth];
  tok.event = EventPtr(EventPtr(), origin.event.get());
  tok.origin = &origin;
  tok.element = w.t.depth;
  tok.last_ts = origin.last_ts;
  run_events_[w.capacity - 1 - depth] = origin.event.get();
  const std::shared_ptr<const Token> top(std::shared_ptr<const Token>(), &run_tokens_[0]);
  // The run starting at this entry, with each parent, before the longer
  // runs through the entries it follows: the order of the loop's tokens.
  bool early = true;
  if (!early_.empty()) {
    if (w.own_slot >= 0) {
      early_bind_[w.own_slot].events =
          std::span<const Event* const>(&run_events_[w.capacity - 1 - depth], depth + 1);
    }
    early = std::all_of(early_.begin(), early_.end(),
                        [&](const pattern::Conjunct* g) { return holds(*g, -1, early_bind_); });
  }
  auto close = [&](const std::shared_ptr<const Token>* parent) {
    Token& first = run_tokens_[0];
    tok.parent = parent == nullptr
                     ? nullptr
                     : std::shared_ptr<const Token>(std::shared_ptr<const Token>(), parent->get());
    first.first_ts = parent == nullptr ? origin.first_ts : (*parent)->first_ts;
    first.first_seq = parent == nullptr ? origin.first_seq : (*parent)->first_seq;
    first.prob = (parent == nullptr ? 1.0 : (*parent)->prob) * prob;
    if (!w.t.across.empty() && !acrossHold(w.t, depth)) return;
    extend(w.u, top, w.event);
  };
  if (early) {
    if (w.t.input == nullptr) {
      close(nullptr);
    } else {
      for (const std::shared_ptr<const Token>& parent : w.t.input->place) {
        if (parent->last_ts >= origin.last_ts) break;
        if (parent->first_ts >= w.from) close(&parent);
      }
    }
  }
  if (depth + 1 == w.capacity) return;  // no entry before this one from lo on
  tok.parent =
      std::shared_ptr<const Token>(std::shared_ptr<const Token>(), &run_tokens_[depth + 1]);
  if (w.t.all_links) {
    for (uint64_t p = w.lo; p < entry.earlier; ++p) visitRuns(w, p, depth + 1);
    return;
  }
  for (auto it = std::lower_bound(entry.links.begin(), entry.links.end(), w.lo);
       it != entry.links.end(); ++it) {
    visitRuns(w, *it, depth + 1);
  }
}

bool PetriNet::acrossHold(const Transition& t, size_t depth) {
  // As when the loop extended the run with each of its events: the run so
  // far is b[], its newest event b[i].
  bind(t, &run_tokens_[0], nullptr, nullptr);
  const std::vector<const Event*>& run = runs_[static_cast<size_t>(t.depth)];
  pattern::SlotBinding& b = bind_[t.slots[static_cast<size_t>(t.depth)]];
  for (size_t k = 0; k <= depth; ++k) {
    b.events = std::span<const Event* const>(run.data(), k + 1);
    for (const pattern::Conjunct* g : t.across) {
      if (!g->test(bind_)) return false;
    }
  }
  return true;
}

void PetriNet::materializeRuns(Transition& t) {
  // The loop's firings replayed over the stored events (fireLoop()): each
  // event starts runs from the input place, then extends the runs so far.
  std::vector<std::shared_ptr<const Token>> place;
  auto add = [&](const std::shared_ptr<const Token>& parent, const Token& e) {
    if (parent != nullptr) {
      if (parent->last_ts >= e.last_ts) return;
      if (t.window != kNoWindow && e.last_ts - parent->first_ts > t.window) return;
    }
    const double prob = (parent != nullptr ? parent->prob : 1.0) * e.prob;
    if (t.unlikely(prob) || !guardsHold(t, parent.get(), nullptr, e.event.get())) return;
    auto kept = std::make_shared<Token>();
    kept->event = e.event;
    kept->parent = parent;
    kept->first_ts = parent != nullptr ? parent->first_ts : e.first_ts;
    kept->last_ts = e.last_ts;
    kept->first_seq = parent != nullptr ? parent->first_seq : e.first_seq;
    kept->prob = prob;
    kept->element = t.depth;
    place.push_back(std::move(kept));
  };
  for (const KleenePlace::Entry& entry : t.runs.entries) {
    const size_t before = place.size();
    if (t.input == nullptr) {
      add(nullptr, entry.token);
    } else {
      for (const std::shared_ptr<const Token>& parent : t.input->place) add(parent, entry.token);
    }
    for (size_t i = 0; i < before; ++i) add(place[i], entry.token);
  }
  held_ -= t.runs.entries.size();
  held_ += place.size();
  t.runs.entries.clear();
  t.place = std::move(place);
}

void PetriNet::fireJoin(Transition& j, const std::shared_ptr<const Token>& right) {
  // No expiry here: the left place may be the one an enclosing fire() scans.
  std::vector<std::shared_ptr<const Token>>& in = j.input->place;
  for (size_t i = 0, n = in.size(); i < n; ++i) {
    const Token* left = in[i].get();
    if (left->last_ts >= right->first_ts) continue;
    if (j.window != kNoWindow && right->last_ts - left->first_ts > j.window) continue;
    if (guardsHold(j, left, right.get(), nullptr)) produce(j, in[i], right, nullptr);
  }
}

void PetriNet::fireConjunction(Transition& j, const Transition& from,
                               const std::shared_ptr<const Token>& tok) {
  auto pair = [&](const std::shared_ptr<const Token>& left,
                  const std::shared_ptr<const Token>& right) {
    if (j.window != kNoWindow &&
        std::max(left->last_ts, right->last_ts) - std::min(left->first_ts, right->first_ts) >
            j.window) {
      return;
    }
    if (guardsHold(j, left.get(), right.get(), nullptr)) produce(j, left, right, nullptr);
  };
  // The new token is not in its place yet: each pair is made once, by the
  // later of its two tokens (the same token on both sides when both
  // operands are the same chain, as the algebra's union of two leaves).
  // By index and no expiry, as in fireJoin().
  if (j.input == &from) {
    const auto& place = j.right->place;
    for (size_t i = 0, n = place.size(); i < n; ++i) pair(tok, place[i]);
  }
  if (j.right == &from) {
    const auto& place = j.input->place;
    for (size_t i = 0, n = place.size(); i < n; ++i) pair(place[i], tok);
  }
  if (j.input == &from && j.right == &from) pair(tok, tok);
}

void PetriNet::bind(const Transition& t, const Token* left, const Token* right,
                    const Event* event) {
  if (t.by_element) {
    // No joins here (Kleene patterns take part in none): one parent chain.
    tokens_.clear();
    for (const Token* tok = left; tok != nullptr; tok = tok->parent.get()) tokens_.push_back(tok);
    bind_.assign(t.owner->layout.size(), pattern::SlotBinding{});
    runs_.resize(t.slots.size());
    for (auto& r : runs_) r.clear();
    auto add = [&](int element, const Event* e) {
      const int slot = t.slots[element];
      if (slot < 0) return;
      if (t.kleene_at[element]) {
        runs_[element].push_back(e);
      } else {
        bind_[slot].event = e;
      }
    };
    for (size_t i = tokens_.size(); i-- > 0;) add(tokens_[i]->element, tokens_[i]->event.get());
    if (event != nullptr) add(t.depth, event);
    for (size_t d = 0; d < t.slots.size(); ++d) {
      if (t.kleene_at[d] && t.slots[d] >= 0) bind_[t.slots[d]].events = runs_[d];
    }
    return;
  }
  bound_.clear();
  collect(left, bound_);
  collect(right, bound_);
  bind_.assign(t.owner->layout.size(), pattern::SlotBinding{});
  for (size_t d = 0; d < bound_.size(); ++d) {
    if (t.slots[d] >= 0) bind_[t.slots[d]].event = bound_[d]->get();
  }
  if (event != nullptr && t.slots[t.depth] >= 0) bind_[t.slots[t.depth]].event = event;
}

bool PetriNet::takes(const Transition& t, const Token& tok, uint8_t took, const Event& event) {
  // strict_contiguity: made by the event before this one (onEvent() drops
  // a token once the event after its own has been seen).
  if (t.strategy == pattern::Strategy::kStrictContiguity)
    return (tok.took & Transition::kSeen) != 0;
  // skip_till_next_match: the first event that fills the element is the
  // run's, whether or not the rest of the checks (the window, the other
  // guards, a negation, the probability) then let it through.
  if ((tok.took & took) != 0 || !guardsHold(t, &tok, nullptr, &event, true)) return false;
  tok.took |= took;
  return true;
}

bool PetriNet::spent(const Transition& t, const Token& tok) const {
  if (t.strategy == pattern::Strategy::kStrictContiguity) {
    // Kept through the event that made it, dropped after the next.
    const bool seen = (tok.took & Transition::kSeen) != 0;
    tok.took |= Transition::kSeen;
    return seen;
  }
  const size_t next_readers = t.consumers - (t.loop ? 1 : 0);
  const uint8_t readers =
      (next_readers > 0 ? Transition::kNextTook : 0) | (t.loop ? Transition::kLoopTook : 0);
  return (tok.took & readers) == readers;
}

bool PetriNet::guardsHold(const Transition& t, const Token* left, const Token* right,
                          const Event* event, bool steering_only) {
  if (t.guards.empty()) return true;
  bind(t, left, right, event);
  const int extending = t.loop ? t.slots[t.depth] : -1;
  for (size_t k = 0; k < t.guards.size(); ++k) {
    if (steering_only && !t.steers[k]) continue;
    if (!holds(*t.guards[k], extending, bind_)) return false;
  }
  return true;
}

bool PetriNet::holds(const pattern::Conjunct& g, int extending,
                     std::vector<pattern::SlotBinding>& binding) {
  if (g.iteration_slot && static_cast<int>(*g.iteration_slot) != extending) {
    // b[i] of an earlier Kleene element: it holds for every event of b.
    pattern::SlotBinding& b = binding[*g.iteration_slot];
    bool all = true;
    for (size_t i = 0; all && i < b.events.size(); ++i) {
      b.current = i;
      all = g.test(binding);
    }
    b.current = pattern::SlotBinding::kNewest;
    return all;
  }
  return g.test(binding);
}

bool PetriNet::negated(Transition& t, const Token* left, const Event& event) {
  const Timestamp x = left->last_ts;
  const Timestamp y = event.ts();
  bool bound = false;
  for (Transition::Inhibitor& i : t.inhibitors) {
    auto c = std::upper_bound(i.place.begin(), i.place.end(), x,
                              [](Timestamp ts, const EventPtr& e) { return ts < e->ts(); });
    for (; c != i.place.end() && (*c)->ts() < y; ++c) {
      if (i.spec->conditions.empty()) return true;
      if (!bound) {
        bind(t, left, nullptr, &event);
        bound = true;
      }
      bind_[i.spec->slot].event = c->get();
      bool all = true;
      for (const pattern::Conjunct* cond : i.spec->conditions) {
        if (!cond->test(bind_)) {
          all = false;
          break;
        }
      }
      bind_[i.spec->slot].event = nullptr;
      if (all) return true;
    }
  }
  return false;
}

void PetriNet::produce(Transition& t, const std::shared_ptr<const Token>& parent,
                       std::shared_ptr<const Token> right, const EventPtr& event) {
  // The token is built only when it is kept: one that is reported and
  // dropped costs no construction and no reference count.
  Stamps tok;
  if (right != nullptr) {
    // A conjunction's operands may come in any order.
    tok.first_ts = std::min(parent->first_ts, right->first_ts);
    tok.first_seq = std::min(parent->first_seq, right->first_seq);
    tok.last_ts = std::max(parent->last_ts, right->last_ts);
    tok.prob = parent->prob * right->prob;
  } else {
    tok.first_ts = parent ? parent->first_ts : event->ts();
    tok.first_seq = parent ? parent->first_seq : seq_;
    tok.last_ts = event->ts();
    tok.prob = (parent ? parent->prob : 1.0) * event->probability();
  }
  report(t, tok, parent.get(), event.get(), [&] {
    chain_.clear();
    collect(parent.get(), chain_);
    if (right != nullptr) {
      collect(right.get(), chain_);
    } else {
      chain_.push_back(&event);
    }
    if (t.by_element) {
      // A Kleene element binds several events: ends by element.
      ends_.assign(t.slots.size(), 0);
      ++ends_[static_cast<size_t>(t.depth)];
      for (const Token* k = parent.get(); k != nullptr; k = k->parent.get()) ++ends_[k->element];
      for (size_t d = 1; d < ends_.size(); ++d) ends_[d] += ends_[d - 1];
    }
  });
  if ((t.consumers == 0 && t.joins.empty()) || t.unlikely(tok.prob)) return;
  auto kept = std::make_shared<Token>();
  kept->first_ts = tok.first_ts;
  kept->last_ts = tok.last_ts;
  kept->first_seq = tok.first_seq;
  kept->prob = tok.prob;
  if (right == nullptr) {
    kept->event = event;
    kept->element = t.depth;
    kept->lazy = t.lazy;
  }
  kept->parent = own(parent);  // an expanded pair is kept as a token of its own
  kept->right = std::move(right);
  std::shared_ptr<const Token> shared = std::move(kept);
  for (Transition* j : t.joins) {
    if (j->conjunction) {
      fireConjunction(*j, t, shared);
    } else {
      fireJoin(*j, shared);
    }
  }
  if (t.consumers > 0) {
    t.place.push_back(std::move(shared));
    ++held_;
  }
}

size_t PetriNet::tokenCount() const {
  size_t n = 0;
  for (const auto& t : transitions_) n += t->held();
  return n;
}

}  // namespace cepbus::plugins::petri
