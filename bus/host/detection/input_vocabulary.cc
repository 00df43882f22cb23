#include "bus/host/detection/input_vocabulary.h"

#include <algorithm>

#include "bus/base/spelling.h"
#include "bus/core/pattern/lexer.h"

namespace cepbus::detection {
namespace {

using pattern::Expr;
using pattern::ExprKind;
using pattern::PatternNode;
using pattern::Query;
using pattern::SourcePos;

// Collects uses in order, each (kind, type, name) once.
class UseList {
 public:
  void add(NameUse::Kind kind, std::string name, std::string type, SourcePos pos,
           bool predicate = false) {
    auto seen = std::find_if(uses_.begin(), uses_.end(), [&](const NameUse& u) {
      return u.kind == kind && u.name == name && u.type == type;
    });
    if (seen != uses_.end()) {
      seen->predicate |= predicate;
      return;
    }
    uses_.push_back(NameUse{kind, std::move(name), std::move(type), pos, predicate});
  }
  std::vector<NameUse> take() { return std::move(uses_); }

 private:
  std::vector<NameUse> uses_;
};

void addTypes(const PatternNode& node, UseList& uses) {
  if (!node.type.empty()) uses.add(NameUse::Kind::kEventType, node.type, "", node.pos);
  for (const pattern::PatternPtr& child : node.children) addTypes(*child, uses);
}

void addAttributes(const Query& query, const Expr* e, bool predicate, UseList& uses) {
  if (e == nullptr) return;
  if ((e->kind == ExprKind::kAttr || e->kind == ExprKind::kAggregate) && !e->ref.attr.empty() &&
      e->ref.builtin == pattern::Builtin::kNone) {
    if (const pattern::Variable* v = query.findVariable(e->ref.var)) {
      uses.add(NameUse::Kind::kAttribute, e->ref.attr, v->type, e->pos, predicate);
    }
  }
  addAttributes(query, e->lhs.get(), predicate, uses);
  addAttributes(query, e->rhs.get(), predicate, uses);
}

void addPatternPredicates(const Query& query, const PatternNode& node, UseList& uses) {
  addAttributes(query, node.predicate.get(), true, uses);
  for (const pattern::PatternPtr& child : node.children) addPatternPredicates(query, *child, uses);
}

// Where each PARTITION BY key is written: the tokens after PARTITION BY,
// one after each comma. The AST keeps the names only.
std::vector<SourcePos> partitionKeyPositions(std::string_view text, size_t keys) {
  std::vector<SourcePos> positions;
  auto tokens = pattern::tokenize(text);
  if (!tokens) return positions;
  const std::vector<pattern::Token>& t = *tokens;
  for (size_t i = 0; i + 2 < t.size(); ++i) {
    if (t[i].keyword != pattern::Keyword::kPartition || t[i + 1].keyword != pattern::Keyword::kBy) {
      continue;
    }
    for (size_t k = i + 2; k < t.size() && positions.size() < keys; k += 2) {
      positions.push_back(t[k].pos);
      if (k + 1 >= t.size() || t[k + 1].kind != pattern::TokenKind::kComma) break;
    }
    break;
  }
  return positions;
}

std::string at(SourcePos pos) {
  return "line " + std::to_string(pos.line) + ", column " + std::to_string(pos.column) + ": ";
}

std::string suggestion(std::string_view word, const std::vector<std::string_view>& candidates) {
  auto guess = closest(word, candidates);
  return guess ? "; did you mean '" + std::string(*guess) + "'?" : std::string();
}

}  // namespace

std::vector<NameUse> namesUsedBy(const Query& query, std::string_view text) {
  UseList uses;
  if (query.pattern) addTypes(*query.pattern, uses);
  if (query.pattern) addPatternPredicates(query, *query.pattern, uses);
  addAttributes(query, query.where.get(), true, uses);
  if (query.returns) {
    for (const pattern::ReturnItem& item : query.returns->items) {
      addAttributes(query, item.expr.get(), false, uses);
    }
  }
  const std::vector<SourcePos> positions = partitionKeyPositions(text, query.partition_by.size());
  for (size_t i = 0; i < query.partition_by.size(); ++i) {
    uses.add(NameUse::Kind::kPartitionKey, query.partition_by[i], "",
             i < positions.size() ? positions[i] : SourcePos{});
  }
  return uses.take();
}

void InputVocabulary::observe(const Event& event) {
  ++events_;
  auto [type, new_type] = attributes_.try_emplace(event.type());
  if (new_type) keep(event.type());
  for (const Attribute& a : event.attributes()) {
    if (type->second.insert(a.name).second) keep(a.name);
  }
}

void InputVocabulary::keep(Symbol name) {
  if (!name.held()) return;
  holds_.push_back(NameHold::of(name));
  held_by_name_.emplace(std::string(name.name()), name);
}

Symbol InputVocabulary::lookup(std::string_view name) const {
  // Symbol::find() skips held names (its caller could not keep them
  // alive); the held names seen here are kept alive by holds_.
  if (const Symbol s = Symbol::find(name); !s.empty()) return s;
  const auto held = held_by_name_.find(name);
  return held == held_by_name_.end() ? Symbol() : held->second;
}

void InputVocabulary::observe(std::span<const EventPtr> events) {
  for (const EventPtr& e : events) observe(*e);
}

void InputVocabulary::declare(std::string_view type, std::span<const std::string> attributes) {
  declared_ = true;
  std::unordered_set<Symbol>& names = attributes_[Symbol::intern(type)];
  for (const std::string& a : attributes) names.insert(Symbol::intern(a));
}

std::vector<std::string> InputVocabulary::unknownNames(std::span<const NameUse> uses,
                                                       std::string_view input) const {
  std::vector<std::string> warnings;
  for (const NameUse& use : uses) {
    std::string warning;
    switch (use.kind) {
      case NameUse::Kind::kEventType:
        warning = unknownType(use, input);
        break;
      case NameUse::Kind::kAttribute:
        warning = unknownAttribute(use, input);
        break;
      case NameUse::Kind::kPartitionKey:
        warning = unknownKey(use, uses, input);
        break;
    }
    if (!warning.empty()) warnings.push_back(std::move(warning));
  }
  return warnings;
}

std::string InputVocabulary::unknownType(const NameUse& use, std::string_view input) const {
  if (hadType(lookup(use.name))) return "";
  std::vector<std::string_view> types;
  for (const auto& [type, names] : attributes_) types.push_back(type.name());
  std::sort(types.begin(), types.end());  // the guess must not depend on hashing order
  return at(use.pos) + "event type '" + use.name + "' " + absent() + " in " + std::string(input) +
         suggestion(use.name, types);
}

std::string InputVocabulary::unknownAttribute(const NameUse& use, std::string_view input) const {
  auto found = attributes_.find(lookup(use.type));
  if (found == attributes_.end() || found->first.empty()) return "";
  const Symbol name = lookup(use.name);
  if (!name.empty() && found->second.contains(name)) return "";
  std::vector<std::string_view> names;
  for (Symbol s : found->second) names.push_back(s.name());
  std::sort(names.begin(), names.end());
  return at(use.pos) + "attribute '" + use.name + "' " + absent() + " on a " + use.type +
         " event in " + std::string(input) + suggestion(use.name, names);
}

std::string InputVocabulary::unknownKey(const NameUse& use, std::span<const NameUse> uses,
                                        std::string_view input) const {
  const Symbol key = lookup(use.name);
  std::vector<std::string_view> seen_types;
  std::vector<std::string_view> names;
  for (const NameUse& u : uses) {
    if (u.kind != NameUse::Kind::kEventType) continue;
    auto found = attributes_.find(lookup(u.name));
    if (found == attributes_.end() || found->first.empty()) continue;
    if (!key.empty() && found->second.contains(key)) return "";
    seen_types.push_back(u.name);
    for (Symbol s : found->second) names.push_back(s.name());
  }
  if (seen_types.empty()) return "";
  std::sort(names.begin(), names.end());
  std::string types;
  for (std::string_view t : seen_types) {
    if (!types.empty()) types += " or ";
    types += t;
  }
  return at(use.pos) + "PARTITION BY key '" + use.name + "' " + absent() + " on a " + types +
         " event in " + std::string(input) + suggestion(use.name, names);
}

}  // namespace cepbus::detection
