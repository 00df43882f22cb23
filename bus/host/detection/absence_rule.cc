#include "bus/host/detection/absence_rule.h"

#include <algorithm>
#include <string>
#include <utility>

#include "bus/host/detection/match_key.h"

namespace cepbus::detection {
namespace {

// a + b and a - b for b >= 0, saturating instead of overflowing.
Timestamp plus(Timestamp a, Timestamp b) {
  Timestamp sum;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}
Timestamp minus(Timestamp a, Timestamp b) {
  Timestamp difference;
  return __builtin_sub_overflow(a, b, &difference) ? INT64_MIN : difference;
}

std::string at(const pattern::SourcePos& pos) {
  return "line " + std::to_string(pos.line) + ", column " + std::to_string(pos.column) + ": ";
}

}  // namespace

Result<std::unique_ptr<AbsenceRule>> AbsenceRule::create(const pattern::Query& query,
                                                         plugin::MatchSink& next) {
  const pattern::PatternNode& seq = *query.pattern;
  const auto& items = seq.children;
  auto positive = [](const pattern::PatternPtr& n) {
    return n->kind != pattern::PatternKind::kNot;
  };
  const auto first = std::find_if(items.begin(), items.end(), positive);
  const auto last = std::find_if(items.rbegin(), items.rend(), positive).base();
  if (seq.kind != pattern::PatternKind::kSeq || first == items.end()) {
    return Status::invalidArgument(
        "NOT(...) at an edge of a pattern needs a SEQ with a positive "
        "element");
  }
  // An edge NOT, for the messages.
  const pattern::PatternNode& some = first != items.begin() ? *items.front() : *items.back();
  if (!query.within) {
    return Status::invalidArgument(at(some.pos) + "NOT(" + some.type +
                                   ") at the start or the end of a pattern needs WITHIN n, which "
                                   "bounds the absence");
  }
  if (query.context == pattern::Context::kRecent) {
    return Status::invalidArgument(
        at(some.pos) + "NOT(" + some.type +
        ") at the start or the end of a pattern does not run under CONTEXT recent: the host "
        "checks it on the matches the engine selects, and CONTEXT recent selects them without "
        "it (an instance negated at the edge would not be replaced by an earlier one); use "
        "CONTEXT unrestricted");
  }
  std::unique_ptr<AbsenceRule> rule(new AbsenceRule(next, *query.within));
  const pattern::BindingLayout layout = pattern::BindingLayout::forQuery(query);
  auto conjuncts = pattern::compileConjuncts(query.where, layout);
  if (!conjuncts) return conjuncts.status();
  rule->conjuncts_ = std::move(conjuncts).value();
  rule->element_slots_ = elementSlots(query, layout);
  for (const std::string& attr : query.partition_by)
    rule->partition_.push_back(Symbol::intern(attr));
  rule->slots_.resize(layout.size());
  for (auto it = items.begin(); it != items.end(); ++it) {
    if (it >= first && it < last) continue;
    Negation n;
    n.type = Symbol::intern((*it)->type);
    n.leading = it < first;
    if (!(*it)->var.empty()) n.slot = static_cast<int>(*layout.slotOf((*it)->var));
    rule->negations_.push_back(std::move(n));
  }
  for (Negation& n : rule->negations_) {
    if (n.slot < 0) continue;
    for (size_t i = 0; i < rule->conjuncts_.size(); ++i) {
      const pattern::Conjunct& c = rule->conjuncts_[i];
      if ((c.slot_mask >> n.slot & 1) == 0) continue;
      for (size_t slot : c.slots) {
        if (static_cast<int>(slot) != n.slot && layout.kindOf(slot) == pattern::VarKind::kNegated) {
          return Status::invalidArgument(at(c.source->pos) + "predicate '" + c.expr.text() +
                                         "': a predicate may name at most one negated variable");
        }
      }
      n.conjuncts.push_back(i);
    }
  }
  return rule;
}

void AbsenceRule::bind(const plugin::Match& match) {
  std::fill(slots_.begin(), slots_.end(), pattern::SlotBinding{});
  bindMatch(match, element_slots_, events_, slots_);
  key_.clear();
  for (const Symbol attr : partition_) key_.push_back(partitionValue(*match.event(0), attr));
}

bool AbsenceRule::negates(const Negation& n, const Event& c, const std::vector<Value>& key) {
  for (size_t i = 0; i < partition_.size(); ++i) {
    if (!(partitionValue(c, partition_[i]) == key[i])) return false;
  }
  if (n.slot < 0) return true;
  pattern::SlotBinding& slot = slots_[static_cast<size_t>(n.slot)];
  slot.event = &c;
  bool all = true;
  for (size_t i : n.conjuncts) {
    if (!conjuncts_[i].test(slots_)) {
      all = false;
      break;
    }
  }
  slot.event = nullptr;
  return all;
}

bool AbsenceRule::negatedBySeen(const Negation& n, Timestamp from, Timestamp to,
                                const std::vector<Value>& key) {
  for (const EventPtr& c : n.seen) {
    if (c->ts() > to) break;
    if (c->ts() >= from && negates(n, *c, key)) return true;
  }
  return false;
}

void AbsenceRule::onMatch(const plugin::Match& match) {
  if (match.size() == 0) return;
  const Timestamp first = matchStart(match);
  const Timestamp last = matchEnd(match);
  const Timestamp deadline = plus(first, window_);
  bind(match);
  bool trailing = false;
  for (const Negation& n : negations_) {
    const bool negated = n.leading ? negatedBySeen(n, minus(last, window_), first - 1, key_)
                                   : negatedBySeen(n, plus(last, 1), deadline, key_);
    if (negated) return;
    trailing |= !n.leading;
  }
  if (!trailing || deadline <= time_) {
    next_.onMatch(match);
    return;
  }
  held_.emplace(deadline, Held{MatchCopy(match), last, key_});
}

void AbsenceRule::onEvent(const EventPtr& event) {
  for (Negation& n : negations_) {
    if (event->type() != n.type) continue;
    n.seen.push_back(event);
    if (n.leading) continue;
    // A trailing C cancels each held match whose span it falls in.
    for (auto it = held_.lower_bound(event->ts()); it != held_.end();) {
      if (event->ts() <= it->second.last) {
        ++it;
        continue;
      }
      bind(it->second.match.view());
      it = negates(n, *event, it->second.key) ? held_.erase(it) : std::next(it);
    }
  }
}

void AbsenceRule::onTime(Timestamp t) {
  time_ = std::max(time_, t);
  while (!held_.empty() && held_.begin()->first <= time_) {
    next_.onMatch(held_.begin()->second.match.view());
    held_.erase(held_.begin());
  }
}

void AbsenceRule::forget(Timestamp reported_to) {
  // A match reported later ends after `reported_to`: a leading C it can
  // need is after reported_to - W, a trailing one after reported_to.
  for (Negation& n : negations_) {
    const Timestamp keep_after = n.leading ? minus(reported_to, window_) : reported_to;
    while (!n.seen.empty() && n.seen.front()->ts() <= keep_after) n.seen.pop_front();
  }
}

void AbsenceRule::restart() {
  for (Negation& n : negations_) n.seen.clear();
  held_.clear();
  time_ = INT64_MIN;
}

void AbsenceRule::save(plugin::SnapshotWriter& out) const {
  out.signedVarint(time_);
  out.varint(negations_.size());
  for (const Negation& n : negations_) {
    out.varint(n.seen.size());
    for (const EventPtr& c : n.seen) out.event(c);
  }
  // In the order onTime() lets them out; each one's span and partition
  // follow from its events.
  out.varint(held_.size());
  for (const auto& [deadline, held] : held_) held.match.save(out);
}

void AbsenceRule::load(plugin::SnapshotReader& in) {
  time_ = in.signedVarint();
  if (in.varint() != negations_.size()) in.fail("edge negation of another number of NOTs");
  for (Negation& n : negations_) {
    const uint64_t seen = in.count();
    for (uint64_t i = 0; i < seen && in.ok(); ++i) {
      EventPtr c = in.event();
      if (c == nullptr || c->type() != n.type ||
          (!n.seen.empty() && c->ts() < n.seen.back()->ts())) {
        in.fail("a negated event kept out of its NOT's type or out of time order");
        break;
      }
      n.seen.push_back(std::move(c));
    }
  }
  const uint64_t held = in.count(4);
  for (uint64_t i = 0; i < held && in.ok(); ++i) {
    MatchCopy match = MatchCopy::load(in);
    if (!in.ok()) break;
    const plugin::Match view = match.view();
    if (view.elementCount() != element_slots_.size()) {
      in.fail("a held match of another number of elements than the pattern's");
      break;
    }
    bind(view);
    const Timestamp last = match.end();
    held_.emplace(plus(matchStart(view), window_), Held{std::move(match), last, key_});
  }
}

size_t AbsenceRule::kept() const {
  size_t n = 0;
  for (const Negation& negation : negations_) n += negation.seen.size();
  return n;
}

}  // namespace cepbus::detection
