#include "bus/host/detection/match_key.h"

#include <utility>

namespace cepbus::detection {
namespace {

void addElementSlots(const pattern::PatternNode& p, const pattern::BindingLayout& layout,
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
      for (const pattern::PatternPtr& c : p.children) addElementSlots(*c, layout, out);
  }
}

}  // namespace

std::vector<int> elementSlots(const pattern::Query& query, const pattern::BindingLayout& layout) {
  std::vector<int> out;
  addElementSlots(*query.pattern, layout, out);
  return out;
}

void bindMatch(const plugin::Match& match, const std::vector<int>& element_slots,
               std::vector<const Event*>& events, std::vector<pattern::SlotBinding>& slots) {
  events.clear();
  for (size_t i = 0; i < match.size(); ++i) events.push_back(match.event(i).get());
  size_t offset = 0;
  for (size_t j = 0; j < match.elementCount() && j < element_slots.size(); ++j) {
    const size_t n = match.elementEvents(j).size();
    const int slot = element_slots[j];
    if (slot >= 0 && n > 0) {
      pattern::SlotBinding& b = slots[static_cast<size_t>(slot)];
      b.events = std::span<const Event* const>(events.data() + offset, n);
      b.event = events[offset + n - 1];
    }
    offset += n;
  }
}

const Value& partitionValue(const Event& event, Symbol attr) {
  static const Symbol kKey = Symbol::intern("key");
  static const Value kNull;
  const Value* v = event.find(attr);
  if (v == nullptr && attr == kKey && !event.key().isNull()) v = &event.key();
  return v != nullptr ? *v : kNull;
}

Result<MatchKeyer> MatchKeyer::ofExpr(const pattern::Query& query, const pattern::Expr& per) {
  const pattern::BindingLayout layout = pattern::BindingLayout::forQuery(query);
  Result<pattern::CompiledExpr> compiled = pattern::compileExpr(per, layout);
  if (!compiled) return compiled.status();
  MatchKeyer keyer;
  keyer.per_ = std::move(compiled).value();
  keyer.slots_ = layout.size();
  keyer.element_slot_ = elementSlots(query, layout);
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
  std::vector<pattern::SlotBinding>& slots = slots_bound_;
  slots.assign(slots_, pattern::SlotBinding{});
  bindMatch(match, element_slot_, events_, slots);
  key.push_back(per_->evaluate(slots, match.probability()).toValue());
}

void saveKey(const std::vector<Value>& key, plugin::SnapshotWriter& out) {
  out.varint(key.size());
  for (const Value& v : key) out.value(v);
}

std::vector<Value> loadKey(plugin::SnapshotReader& in) {
  std::vector<Value> key;
  const uint64_t n = in.count();
  for (uint64_t i = 0; i < n && in.ok(); ++i) key.push_back(in.value());
  return key;
}

}  // namespace cepbus::detection
