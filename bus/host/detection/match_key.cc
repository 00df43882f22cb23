#include "bus/host/detection/match_key.h"

#include <utility>

namespace cepbus::detection {
namespace {

// The positive elements of `p` in pattern order (a match's elements): each
// one's slot in `layout`, or -1 when it binds no variable.
void elementSlots(const pattern::PatternNode& p, const pattern::BindingLayout& layout,
                  std::vector<int>& out) {
  switch (p.kind) {
    case pattern::PatternKind::kEvent:
    case pattern::PatternKind::kKleene: {
      const std::optional<size_t> slot = p.var.empty() ? std::nullopt : layout.slotOf(p.var);
      out.push_back(slot ? static_cast<int>(*slot) : -1);
      return;
    }
    case pattern::PatternKind::kNot:
      return;
    default:
      for (const pattern::PatternPtr& c : p.children) elementSlots(*c, layout, out);
  }
}

}  // namespace

Result<MatchKeyer> MatchKeyer::ofExpr(const pattern::Query& query, const pattern::Expr& per) {
  const pattern::BindingLayout layout = pattern::BindingLayout::forQuery(query);
  Result<pattern::CompiledExpr> compiled = pattern::compileExpr(per, layout);
  if (!compiled) return compiled.status();
  MatchKeyer keyer;
  keyer.per_ = std::move(compiled).value();
  keyer.slots_ = layout.size();
  elementSlots(*query.pattern, layout, keyer.element_slot_);
  return keyer;
}

MatchKeyer MatchKeyer::ofPartition(const std::vector<std::string>& attrs) {
  MatchKeyer keyer;
  for (const std::string& a : attrs) keyer.attrs_.push_back(Symbol::intern(a));
  return keyer;
}

void MatchKeyer::keyOf(const plugin::Match& match, std::vector<Value>& key) {
  key.clear();
  if (match.size() == 0) return;
  for (const Symbol attr : attrs_) {
    const Value* v = match.event(0)->find(attr);
    key.push_back(v != nullptr ? *v : Value());
  }
  if (!per_) return;
  // Bound as the engines bind RETURN: a Kleene element's events in stream
  // order, a single element's one event.
  std::vector<const Event*>& events = events_;
  events.clear();
  for (size_t i = 0; i < match.size(); ++i) events.push_back(match.event(i).get());
  std::vector<pattern::SlotBinding>& slots = slots_bound_;
  slots.assign(slots_, pattern::SlotBinding{});
  size_t offset = 0;
  for (size_t j = 0; j < match.elementCount() && j < element_slot_.size(); ++j) {
    const size_t n = match.elementEvents(j).size();
    const int slot = element_slot_[j];
    if (slot >= 0 && n > 0) {
      pattern::SlotBinding& b = slots[static_cast<size_t>(slot)];
      b.events = std::span<const Event* const>(events.data() + offset, n);
      b.event = events[offset + n - 1];
    }
    offset += n;
  }
  key.push_back(per_->evaluate(slots, match.probability()).toValue());
}

}  // namespace cepbus::detection
