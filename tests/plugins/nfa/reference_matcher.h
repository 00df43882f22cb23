#pragma once

// A brute-force matcher written straight from the semantics every engine shares
// (docs/pattern-language.md, "Semantics"), independent of the NFA: it
// enumerates candidate bindings (skip_till_any_match, strict_contiguity) or
// simulates runs forward from every start event (skip_till_next_match), then
// checks order, types, predicates, window and negation on each (NOT between
// two elements, or at either end of the pattern over the WITHIN span).
// Exponential; for small streams.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/pattern/ast.h"
#include "bus/core/pattern/expr_compiler.h"

namespace cepbus::plugins::nfa::testing {

using Binding = std::vector<std::vector<int>>;  // per positive element: positions in the partition

class ReferenceMatcher {
 public:
  explicit ReferenceMatcher(const pattern::Query& q) : q_(q) {
    layout_ = pattern::BindingLayout::forQuery(q);
    conjuncts_ = std::move(pattern::compileConjuncts(q.where, layout_)).value();
    flatten(*q.pattern);
    window_ = q.within ? *q.within : INT64_MAX;
    for (const auto& a : q.partition_by) partition_.push_back(Symbol::intern(a));
  }

  // Every match as the ids of its events in pattern order.
  std::vector<std::vector<EventId>> run(const std::vector<EventPtr>& events) {
    std::vector<std::vector<EventId>> out;
    std::vector<std::vector<const Event*>> parts;
    std::vector<std::vector<Value>> keys;
    for (const EventPtr& e : events) {
      std::vector<Value> key;
      for (Symbol a : partition_) {
        const Value* v = e->find(a);
        if (v == nullptr && a.name() == "key" && !e->key().isNull()) v = &e->key();
        key.push_back(v ? *v : Value());
      }
      size_t i = 0;
      while (i < keys.size() && keys[i] != key) ++i;
      if (i == keys.size()) {
        keys.push_back(key);
        parts.emplace_back();
      }
      parts[i].push_back(e.get());
    }
    for (const auto& p : parts) {
      p_ = &p;
      Binding b(elements_.size());
      if (q_.strategy == pattern::Strategy::kSkipTillNextMatch) {
        for (int s = 0; s < static_cast<int>(p.size()); ++s) runFrom(s, out);
      } else {
        enumerate(0, b, out);
      }
    }
    return out;
  }

 private:
  struct Element {
    Symbol type;
    int slot;
    bool kleene;
  };
  struct Negation {
    Symbol type;
    int slot;
    int right;
  };

  void flatten(const pattern::PatternNode& n) {
    using K = pattern::PatternKind;
    if (n.kind == K::kSeq) {
      for (const auto& c : n.children) flatten(*c);
      return;
    }
    const int slot = n.var.empty() ? -1 : static_cast<int>(*layout_.slotOf(n.var));
    if (n.kind == K::kNot) {
      negations_.push_back({Symbol::intern(n.type), slot, static_cast<int>(elements_.size())});
    } else {
      elements_.push_back({Symbol::intern(n.type), slot, n.kind == K::kKleene});
    }
  }

  const Event& ev(int pos) const { return *(*p_)[pos]; }
  int elementOfSlot(size_t slot) const {
    for (size_t k = 0; k < elements_.size(); ++k) {
      if (elements_[k].slot == static_cast<int>(slot)) return static_cast<int>(k);
    }
    return -1;
  }
  bool isNegatedSlot(size_t slot) const {
    for (const Negation& n : negations_) {
      if (n.slot == static_cast<int>(slot)) return true;
    }
    return false;
  }

  // Bindings for the elements in `b` (the Event* storage lives in `store`).
  std::vector<pattern::SlotBinding> bindings(const Binding& b,
                                             std::vector<std::vector<const Event*>>& store) const {
    std::vector<pattern::SlotBinding> s(layout_.size());
    store.assign(elements_.size(), {});
    for (size_t k = 0; k < elements_.size(); ++k) {
      for (int pos : b[k]) store[k].push_back(&ev(pos));
      if (elements_[k].slot < 0 || b[k].empty()) continue;
      if (elements_[k].kleene) {
        s[elements_[k].slot].events = store[k];
      } else {
        s[elements_[k].slot].event = store[k][0];
      }
    }
    return s;
  }

  static bool testAll(const pattern::Conjunct& c, std::vector<pattern::SlotBinding>& s) {
    if (!c.iteration_slot) return c.test(s);
    auto& kb = s[*c.iteration_slot];
    for (size_t j = 0; j < kb.events.size(); ++j) {
      kb.current = j;
      if (!c.test(s)) {
        kb.current = pattern::SlotBinding::kNewest;
        return false;
      }
    }
    kb.current = pattern::SlotBinding::kNewest;
    return true;
  }

  bool mentionsNegated(const pattern::Conjunct& c) const {
    for (size_t slot : c.slots) {
      if (isNegatedSlot(slot)) return true;
    }
    return false;
  }

  // Order, window, every predicate, negation (and contiguity) of a complete binding.
  bool valid(const Binding& b) const {
    std::vector<int> flat;
    for (const auto& e : b) flat.insert(flat.end(), e.begin(), e.end());
    for (size_t i = 1; i < flat.size(); ++i) {
      if (ev(flat[i]).ts() <= ev(flat[i - 1]).ts() || flat[i] <= flat[i - 1]) return false;
      if (q_.strategy == pattern::Strategy::kStrictContiguity && flat[i] != flat[i - 1] + 1) {
        return false;
      }
    }
    if (ev(flat.back()).ts() - ev(flat.front()).ts() > window_) return false;
    for (size_t k = 0; k < elements_.size(); ++k) {
      for (int pos : b[k]) {
        if (ev(pos).type() != elements_[k].type) return false;
      }
    }
    std::vector<std::vector<const Event*>> store;
    auto s = bindings(b, store);
    for (const auto& c : conjuncts_) {
      if (mentionsNegated(c)) continue;
      if (!testAll(c, s)) return false;
    }
    const Timestamp first_ts = ev(flat.front()).ts();
    const Timestamp last_ts = ev(flat.back()).ts();
    for (const Negation& n : negations_) {
      // A negated C lies in (x, y): between its neighbours, in
      // [last - W, first) when leading, in (last, first + W] when trailing.
      Timestamp x, y;
      if (n.right == 0) {
        x = last_ts - window_ - 1;
        y = first_ts;
      } else if (n.right == static_cast<int>(elements_.size())) {
        x = last_ts;
        y = first_ts + window_ + 1;
      } else {
        x = ev(b[n.right - 1].back()).ts();
        y = ev(b[n.right].front()).ts();
      }
      for (int pos = 0; pos < static_cast<int>(p_->size()); ++pos) {
        const Event& c = ev(pos);
        if (c.type() != n.type || c.ts() <= x || c.ts() >= y) continue;
        bool all = true;
        if (n.slot >= 0) {
          s[n.slot].event = &c;
          for (const auto& cj : conjuncts_) {
            if ((cj.slot_mask >> n.slot & 1) && !cj.test(s)) all = false;
          }
          s[n.slot].event = nullptr;
        }
        if (all) return false;
      }
    }
    return true;
  }

  void report(const Binding& b, std::vector<std::vector<EventId>>& out) const {
    std::vector<EventId> ids;
    for (const auto& e : b) {
      for (int pos : e) ids.push_back(ev(pos).id());
    }
    out.push_back(std::move(ids));
  }

  int lastPos(const Binding& b, size_t k) const {
    for (size_t j = k; j-- > 0;) {
      if (!b[j].empty()) return b[j].back();
    }
    return -1;
  }

  // skip_till_any_match / strict_contiguity: every binding, then filter.
  void enumerate(size_t k, Binding& b, std::vector<std::vector<EventId>>& out) {
    if (k == elements_.size()) {
      if (valid(b)) report(b, out);
      return;
    }
    const int after = lastPos(b, k);
    const Timestamp first_ts = k == 0 ? INT64_MIN : ev(b[0].front()).ts();
    for (int pos = after + 1; pos < static_cast<int>(p_->size()); ++pos) {
      if (k > 0 && window_ != INT64_MAX && ev(pos).ts() - first_ts > window_) break;
      if (ev(pos).type() != elements_[k].type) continue;
      b[k].push_back(pos);
      if (elements_[k].kleene) {
        extendKleene(k, b, out);
      } else {
        enumerate(k + 1, b, out);
      }
      b[k].pop_back();
    }
  }

  void extendKleene(size_t k, Binding& b, std::vector<std::vector<EventId>>& out) {
    enumerate(k + 1, b, out);
    const Timestamp first_ts = ev(b[0].front()).ts();
    for (int pos = b[k].back() + 1; pos < static_cast<int>(p_->size()); ++pos) {
      if (window_ != INT64_MAX && ev(pos).ts() - first_ts > window_) break;
      if (ev(pos).type() != elements_[k].type) continue;
      b[k].push_back(pos);
      extendKleene(k, b, out);
      b[k].pop_back();
    }
  }

  // The predicates "bound so far" when `pos` is tried as the next event of
  // element k (appended to b[k]): those naming k, all of whose variables are
  // in elements <= k; for a Kleene k, its iteration predicates.
  bool qualifies(size_t k, Binding& b, int pos) const {
    if (ev(pos).type() != elements_[k].type) return false;
    b[k].push_back(pos);
    std::vector<std::vector<const Event*>> store;
    auto s = bindings(b, store);
    bool ok = true;
    for (const auto& c : conjuncts_) {
      if (!ok) break;
      if (mentionsNegated(c)) continue;
      int max_e = -1;
      bool names_k = false;
      for (size_t slot : c.slots) {
        const int e = elementOfSlot(slot);
        max_e = std::max(max_e, e);
        names_k |= e == static_cast<int>(k);
      }
      if (!names_k || max_e != static_cast<int>(k)) continue;
      if (elements_[k].kleene) {
        if (!c.iteration_slot || *c.iteration_slot != static_cast<size_t>(elements_[k].slot)) {
          continue;  // over the whole Kleene binding: not bound until it is complete
        }
        ok = c.test(s);  // b[i] is the element being added
      } else {
        ok = testAll(c, s);
      }
    }
    b[k].pop_back();
    return ok;
  }

  // The first event after `after` (later ts) that qualifies for element k.
  std::optional<int> next(size_t k, Binding& b, int after) const {
    const Timestamp after_ts = after < 0 ? INT64_MIN : ev(after).ts();
    for (int pos = after + 1; pos < static_cast<int>(p_->size()); ++pos) {
      if (ev(pos).ts() <= after_ts) continue;
      if (qualifies(k, b, pos)) return pos;
    }
    return std::nullopt;
  }

  bool inWindow(const Binding& b, int pos) const {
    const int first = b[0].empty() ? pos : b[0].front();
    return window_ == INT64_MAX || ev(pos).ts() - ev(first).ts() <= window_;
  }

  // skip_till_next_match: the run started by the event at `start`.
  void runFrom(int start, std::vector<std::vector<EventId>>& out) {
    Binding b(elements_.size());
    if (!qualifies(0, b, start)) return;
    b[0].push_back(start);
    if (elements_[0].kleene) {
      greedy(0, b, out);
    } else {
      step(1, b, out);
    }
  }

  void step(size_t k, Binding& b, std::vector<std::vector<EventId>>& out) {
    if (k == elements_.size()) {
      if (valid(b)) report(b, out);
      return;
    }
    auto pos = next(k, b, lastPos(b, k));
    if (!pos || !inWindow(b, *pos)) return;  // the run dies
    b[k].push_back(*pos);
    if (elements_[k].kleene) {
      greedy(k, b, out);
    } else {
      step(k + 1, b, out);
    }
    b[k].pop_back();
  }

  // A Kleene element takes the next qualifying events greedily; every
  // prefix goes on to the following element.
  void greedy(size_t k, Binding& b, std::vector<std::vector<EventId>>& out) {
    step(k + 1, b, out);
    auto pos = next(k, b, b[k].back());
    if (!pos || !inWindow(b, *pos)) return;
    b[k].push_back(*pos);
    greedy(k, b, out);
    b[k].pop_back();
  }

  const pattern::Query& q_;
  pattern::BindingLayout layout_;
  std::vector<pattern::Conjunct> conjuncts_;
  std::vector<Element> elements_;
  std::vector<Negation> negations_;
  std::vector<Symbol> partition_;
  Timestamp window_;
  const std::vector<const Event*>* p_ = nullptr;
};

}  // namespace cepbus::plugins::nfa::testing
