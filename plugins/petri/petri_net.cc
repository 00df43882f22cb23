#include "plugins/petri/petri_net.h"

#include <algorithm>
#include <map>
#include <set>

#include "bus/core/pattern/printer.h"

namespace cepbus::plugins::petri {
namespace {

using pattern::PatternKind;
using pattern::PatternNode;

std::string at(const pattern::SourcePos& pos) {
  return "line " + std::to_string(pos.line) + ", column " + std::to_string(pos.column) + ": ";
}

Status flatten(const PatternNode& node, std::vector<const PatternNode*>& out) {
  switch (node.kind) {
    case PatternKind::kEvent:
      out.push_back(&node);
      return Status::ok();
    case PatternKind::kSeq:
      for (const pattern::PatternPtr& c : node.children) {
        Status s = flatten(*c, out);
        if (!s) return s;
      }
      return Status::ok();
    case PatternKind::kKleene:
      return Status::invalidArgument(at(node.pos) +
                                     "the petri engine does not support the Kleene element '" +
                                     node.type + (node.star ? "* " : "+ ") + node.var +
                                     "[]'; it runs SEQ(...) of 'Type var' elements (use --engine "
                                     "nfa)");
    case PatternKind::kNot:
      return Status::invalidArgument(at(node.pos) +
                                     "the petri engine does not support the negation 'NOT(" +
                                     node.type + (node.var.empty() ? "" : " " + node.var) +
                                     ")'; it runs SEQ(...) of 'Type var' elements (use --engine "
                                     "nfa)");
    default:
      return Status::invalidArgument(at(node.pos) + "the petri engine does not support the " +
                                     pattern::operatorName(node.kind) +
                                     " operator; it runs SEQ(...) of 'Type var' elements");
  }
}

// `e` with every variable renamed after the position of its element, so that
// guards written with other variable names compare equal in a prefix join
// (slots follow positions too: BindingLayout::forQuery numbers the variables
// in pattern order).
// Positions count from `from`, the first element of the chain being compared.
pattern::ExprPtr byPosition(const pattern::Expr& e, const std::map<std::string, size_t>& position,
                            size_t from) {
  auto copy = std::make_shared<pattern::Expr>(e);
  if (e.kind == pattern::ExprKind::kAttr || e.kind == pattern::ExprKind::kAggregate) {
    copy->ref.var = "e" + std::to_string(position.at(e.ref.var) - from);
  }
  if (e.lhs) copy->lhs = byPosition(*e.lhs, position, from);
  if (e.rhs) copy->rhs = byPosition(*e.rhs, position, from);
  return copy;
}

// Element k's key in a chain that starts at element `from`: its type, whether
// it is named, and the guards that name no element before `from`.
std::string elementKey(const CompiledPattern& p, size_t k, size_t from) {
  const CompiledPattern::Element& e = p.elements[k];
  std::vector<std::string> texts;
  for (size_t g = 0; g < e.guards.size(); ++g) {
    if (e.guard_earliest[g] < from) continue;
    texts.push_back(pattern::toString(*byPosition(*e.guards[g]->source, p.position, from)));
  }
  std::sort(texts.begin(), texts.end());
  std::string key = std::string(e.type.name()) + (e.var.empty() ? " -" : " named") + " [";
  for (const std::string& t : texts) key += t + ";";
  return key + "]\n";
}

}  // namespace

Result<CompiledPatternPtr> compilePattern(const pattern::Query& query,
                                          const plugin::DetectorOptions& options) {
  Status s = options.checkKnown({}, "petri");
  if (!s) return s;
  if (query.strategy != pattern::Strategy::kSkipTillAnyMatch) {
    return Status::invalidArgument(std::string("the petri engine does not support STRATEGY ") +
                                   pattern::strategyName(query.strategy) +
                                   "; it implements skip_till_any_match (tokens are not consumed)");
  }
  if (query.context == pattern::Context::kRecent) {
    return Status::invalidArgument(
        "the petri engine does not support CONTEXT recent; it reports every match");
  }
  if (!query.partition_by.empty()) {
    return Status::invalidArgument(
        "the petri engine does not support PARTITION BY; write the equality of the attribute "
        "in WHERE instead");
  }
  std::vector<const PatternNode*> items;
  s = flatten(*query.pattern, items);
  if (!s) return s;

  auto p = std::make_shared<CompiledPattern>();
  if (query.within) p->window = *query.within;
  p->layout = pattern::BindingLayout::forQuery(query);
  auto compiled = pattern::compileConjuncts(query.where, p->layout);
  if (!compiled) return compiled.status();
  p->conjuncts = std::move(compiled).value();

  std::vector<int> slot_element(p->layout.size(), -1);
  for (const PatternNode* n : items) {
    CompiledPattern::Element e;
    e.type = Symbol::intern(n->type);
    e.var = n->var;
    if (!n->var.empty()) {
      e.slot = static_cast<int>(*p->layout.slotOf(n->var));
      slot_element[e.slot] = static_cast<int>(p->elements.size());
    }
    p->elements.push_back(std::move(e));
  }
  // A guard sits on the transition that binds the latest variable it names;
  // a conjunct without variables is a constant, checked on the first one.
  for (const pattern::Conjunct& c : p->conjuncts) {
    int latest = 0;
    int earliest = static_cast<int>(p->elements.size());
    for (size_t slot : c.slots) {
      latest = std::max(latest, slot_element[slot]);
      earliest = std::min(earliest, slot_element[slot]);
    }
    p->elements[latest].guards.push_back(&c);
    p->elements[latest].guard_earliest.push_back(static_cast<size_t>(std::min(earliest, latest)));
  }
  for (size_t k = 0; k < p->elements.size(); ++k) {
    if (!p->elements[k].var.empty()) p->position.emplace(p->elements[k].var, k);
  }
  if (query.returns) {
    auto r = pattern::compileReturn(*query.returns, p->layout);
    if (!r) return r.status();
    p->returns = std::make_shared<const pattern::CompiledReturn>(std::move(r).value());
  }
  return CompiledPatternPtr(std::move(p));
}

// A token: the events bound so far. An extension holds its newest event and
// the token before it (`parent`); a join (middle join) holds no event and
// the two tokens it concatenates, `parent` then `right`.
struct PetriNet::Token {
  EventPtr event;
  std::shared_ptr<const Token> parent;
  std::shared_ptr<const Token> right;
  Timestamp first_ts = 0;
  Timestamp last_ts = 0;
  uint64_t first_seq = 0;  // arrival number of the first bound event
};

namespace {

// Appends the token's events in pattern order (recursion depth <= elements).
template <typename Token>
void collect(const Token* tok, std::vector<const EventPtr*>& out) {
  if (tok == nullptr) return;
  collect(tok->parent.get(), out);
  if (tok->event) {
    out.push_back(&tok->event);
  } else {
    collect(tok->right.get(), out);
  }
}

}  // namespace

// A transition and its output place. An extension fires on events of `type`
// with the tokens of `input`'s place; a join fires when `right` produces a
// token, with the tokens of `input`'s place that end before it starts.
struct PetriNet::Transition {
  std::string key;              // the chain of element keys from the head
  Transition* input = nullptr;  // whose output place feeds it; null at the head
  Transition* right = nullptr;  // a join: the shared chain it joins with
  int depth = 0;                // the last element it binds
  Symbol type;
  CompiledPatternPtr owner;  // keeps `guards` alive
  std::vector<const pattern::Conjunct*> guards;
  std::vector<int> slots;        // the slot bound at each depth 0..depth, or -1
  Timestamp window = kNoWindow;  // the largest window of `users`
  std::vector<PatternEntry*> users;
  std::vector<PatternEntry*> outputs;               // patterns whose last transition this is
  std::vector<Transition*> joins;                   // joins fed by this transition's tokens
  size_t consumers = 0;                             // transitions reading the output place
  std::vector<std::shared_ptr<const Token>> place;  // kept only while consumers > 0
};

class PetriNet::Composer final : public plugin::MatchComposer {
 public:
  explicit Composer(CompiledPatternPtr p)
      : p_(std::move(p)), type_(p_->returns ? p_->returns->type : Symbol::intern("Match")) {}

  EventPtr compose(const plugin::Match& match) const override {
    std::vector<pattern::SlotBinding> bindings(p_->layout.size());
    for (size_t k = 0; k < match.size(); ++k) {
      const int slot = p_->elements[k].slot;
      if (slot >= 0) bindings[slot].event = match.event(k).get();
    }
    EventBuilder builder(type_);
    for (size_t i = 0; i < match.size(); ++i) builder.constituent(match.event(i));
    if (p_->returns) p_->returns->apply(bindings, builder);
    return builder.build();
  }

 private:
  CompiledPatternPtr p_;
  Symbol type_;
};

struct PetriNet::PatternEntry {
  std::string name;
  CompiledPatternPtr pattern;
  plugin::MatchSink* sink = nullptr;
  uint64_t since_seq = 0;
  // Every transition it uses, once each, so that whatever refers to a
  // transition (through input or right) comes after it.
  std::vector<Transition*> chain;
  std::vector<uint32_t> ends;  // 1..m: every element binds one event
  std::unique_ptr<Composer> composer;
};

PetriNet::PetriNet() = default;
PetriNet::~PetriNet() = default;

Status PetriNet::addPattern(std::string name, const pattern::Query& query,
                            plugin::MatchSink& sink) {
  auto compiled = compilePattern(query, plugin::DetectorOptions());
  if (!compiled) return compiled.status();
  return addPattern(std::move(name), std::move(compiled).value(), sink);
}

Status PetriNet::addPattern(std::string name, CompiledPatternPtr pattern, plugin::MatchSink& sink) {
  for (const auto& p : patterns_) {
    if (p->name == name) return Status::alreadyExists("pattern '" + name + "' already exists");
  }
  auto entry = std::make_unique<PatternEntry>();
  PatternEntry* const e = entry.get();
  e->name = std::move(name);
  e->sink = &sink;
  e->since_seq = seq_ + 1;
  e->composer = std::make_unique<Composer>(pattern);
  const size_t m = pattern->elements.size();
  for (size_t k = 0; k < m; ++k) e->ends.push_back(static_cast<uint32_t>(k + 1));

  auto use = [&](Transition* t) {
    if (std::find(t->users.begin(), t->users.end(), e) != t->users.end()) return;
    t->users.push_back(e);
    t->window = std::max(t->window, pattern->window);
    e->chain.push_back(t);
  };
  auto create = [&](const std::string& key, Transition* input, size_t depth) {
    auto created = std::make_unique<Transition>();
    Transition* t = created.get();
    t->key = key;
    t->input = input;
    t->depth = static_cast<int>(depth);
    t->owner = pattern;
    for (size_t d = 0; d <= depth; ++d) t->slots.push_back(pattern->elements[d].slot);
    t->window = pattern->window;
    if (input != nullptr) ++input->consumers;
    by_key_.emplace(key, t);
    transitions_.push_back(std::move(created));
    return t;
  };

  std::string key;
  Transition* prev = nullptr;
  bool joined = false;
  for (size_t k = 0; k < m;) {
    const std::string next = key + elementKey(*pattern, k, 0);
    auto found = by_key_.find(next);
    if (found == by_key_.end() && prev != nullptr && !joined) {
      // Middle join: elements k..l equal the head of a running pattern (two
      // elements at least); share that chain and join its tokens with ours.
      std::string sub;  // the keys of elements k..l, from k
      std::string probe;
      Transition* end = nullptr;
      size_t l = k;
      for (size_t i = k; i < m; ++i) {
        probe += elementKey(*pattern, i, k);
        auto it = by_key_.find(probe);
        if (it == by_key_.end()) break;
        if (i > k) {
          end = it->second;
          l = i;
          sub = probe;
        }
      }
      if (end != nullptr) {
        std::vector<Transition*> shared;
        for (Transition* t = end; t != nullptr; t = t->input) shared.push_back(t);
        for (auto it = shared.rbegin(); it != shared.rend(); ++it) use(*it);
        // The join's guard: the conjuncts of elements k..l that name an
        // element before k (the others are the shared chain's guards).
        std::vector<const pattern::Conjunct*> across;
        std::vector<std::string> texts;
        for (size_t i = k; i <= l; ++i) {
          const CompiledPattern::Element& el = pattern->elements[i];
          for (size_t g = 0; g < el.guards.size(); ++g) {
            if (el.guard_earliest[g] >= k) continue;
            across.push_back(el.guards[g]);
            texts.push_back(
                pattern::toString(*byPosition(*el.guards[g]->source, pattern->position, 0)));
          }
        }
        std::sort(texts.begin(), texts.end());
        // Braces close the shared chain, so that what follows the join can
        // never read as a longer shared chain.
        key += "JOIN [";
        for (const std::string& text : texts) key += text + ";";
        key += "] {\n" + sub + "}\n";
        Transition* j;
        if (auto it = by_key_.find(key); it != by_key_.end()) {
          j = it->second;
        } else {
          j = create(key, prev, l);
          j->right = end;
          j->guards = std::move(across);
          end->joins.push_back(j);
        }
        use(j);
        prev = j;
        joined = true;
        k = l + 1;
        continue;
      }
    }
    Transition* t;
    if (found != by_key_.end()) {
      t = found->second;  // prefix join: share the place and the transition
    } else {
      t = create(next, prev, k);
      t->type = pattern->elements[k].type;
      t->guards = pattern->elements[k].guards;
    }
    use(t);
    key = next;
    prev = t;
    ++k;
  }
  prev->outputs.push_back(e);
  e->pattern = std::move(pattern);
  patterns_.push_back(std::move(entry));
  rebuildTypeIndex();
  return Status::ok();
}

Status PetriNet::removePattern(std::string_view name) {
  auto it = std::find_if(patterns_.begin(), patterns_.end(),
                         [&](const auto& p) { return p->name == name; });
  if (it == patterns_.end()) {
    return Status::notFound("no pattern '" + std::string(name) + "' in the net");
  }
  PatternEntry* entry = it->get();
  for (auto t_it = entry->chain.rbegin(); t_it != entry->chain.rend(); ++t_it) {
    Transition* t = *t_it;
    std::erase(t->users, entry);
    std::erase(t->outputs, entry);
    if (t->users.empty()) {
      if (t->input != nullptr && --t->input->consumers == 0) t->input->place.clear();
      if (t->right != nullptr) std::erase(t->right->joins, t);
      by_key_.erase(t->key);
      std::erase_if(transitions_, [&](const auto& owned) { return owned.get() == t; });
    } else {
      t->window = 0;
      for (const PatternEntry* u : t->users) t->window = std::max(t->window, u->pattern->window);
    }
  }
  patterns_.erase(it);
  rebuildTypeIndex();
  return Status::ok();
}

void PetriNet::rebuildTypeIndex() {
  by_type_.clear();
  for (const auto& t : transitions_) {
    if (t->right == nullptr) by_type_[t->type].push_back(t.get());
  }
  // Deeper transitions first: a token the event itself adds to a place can
  // never extend with the same event (ts must increase), so scanning it
  // would be wasted.
  for (auto& [type, list] : by_type_) {
    std::sort(list.begin(), list.end(),
              [](const Transition* a, const Transition* b) { return a->depth > b->depth; });
  }
}

Status PetriNet::onEvent(const EventPtr& event) {
  if (event->ts() < now_) {
    return Status::invalidArgument("event at ts " + std::to_string(event->ts()) +
                                   " arrived after ts " + std::to_string(now_) +
                                   "; the petri net needs non-decreasing timestamps");
  }
  now_ = event->ts();
  ++seq_;
  auto it = by_type_.find(event->type());
  if (it != by_type_.end()) {
    for (Transition* t : it->second) fire(*t, event);
  }
  // Places whose consumers see no events still let their tokens expire.
  if (seq_ % 1024 == 0) {
    for (const auto& t : transitions_) {
      if (t->window == kNoWindow) continue;
      std::erase_if(t->place, [&](const auto& tok) { return now_ - tok->first_ts > t->window; });
    }
  }
  return Status::ok();
}

void PetriNet::fire(Transition& t, const EventPtr& event) {
  const Timestamp ts = event->ts();
  if (t.input == nullptr) {
    if (guardsHold(t, nullptr, nullptr, event.get())) produce(t, nullptr, nullptr, event);
    return;
  }
  std::vector<std::shared_ptr<const Token>>& in = t.input->place;
  if (t.input->window != kNoWindow) {
    const Timestamp w = t.input->window;
    std::erase_if(in, [&](const auto& tok) { return ts - tok->first_ts > w; });
  }
  // By index: a join fired from produce() may append to another place.
  for (size_t i = 0, n = in.size(); i < n; ++i) {
    const Token* tok = in[i].get();
    if (tok->last_ts >= ts) continue;
    if (t.window != kNoWindow && ts - tok->first_ts > t.window) continue;
    if (guardsHold(t, tok, nullptr, event.get())) produce(t, in[i], nullptr, event);
  }
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

bool PetriNet::guardsHold(const Transition& t, const Token* left, const Token* right,
                          const Event* event) {
  if (t.guards.empty()) return true;
  bound_.clear();
  collect(left, bound_);
  collect(right, bound_);
  bind_.assign(t.owner->layout.size(), pattern::SlotBinding{});
  for (size_t d = 0; d < bound_.size(); ++d) {
    if (t.slots[d] >= 0) bind_[t.slots[d]].event = bound_[d]->get();
  }
  if (event != nullptr && t.slots[t.depth] >= 0) bind_[t.slots[t.depth]].event = event;
  for (const pattern::Conjunct* g : t.guards) {
    if (!g->test(bind_)) return false;
  }
  return true;
}

void PetriNet::produce(Transition& t, std::shared_ptr<const Token> parent,
                       std::shared_ptr<const Token> right, const EventPtr& event) {
  Token tok;
  if (right != nullptr) {
    tok.first_ts = parent->first_ts;
    tok.first_seq = parent->first_seq;
    tok.last_ts = right->last_ts;
  } else {
    tok.event = event;
    tok.first_ts = parent ? parent->first_ts : event->ts();
    tok.first_seq = parent ? parent->first_seq : seq_;
    tok.last_ts = event->ts();
  }
  tok.parent = std::move(parent);
  tok.right = std::move(right);
  for (const PatternEntry* p : t.outputs) {
    if (tok.first_seq < p->since_seq) continue;
    const Timestamp w = p->pattern->window;
    if (w != kNoWindow && tok.last_ts - tok.first_ts > w) continue;
    emit(*p, tok);
  }
  if (t.consumers == 0 && t.joins.empty()) return;
  auto shared = std::make_shared<const Token>(std::move(tok));
  for (Transition* j : t.joins) fireJoin(*j, shared);
  if (t.consumers > 0) t.place.push_back(std::move(shared));
}

void PetriNet::emit(const PatternEntry& p, const Token& token) {
  chain_.clear();
  collect(&token, chain_);
  plugin::Match match(chain_, p.ends, p.composer.get());
  p.sink->onMatch(match);
}

NetSize PetriNet::size() const {
  return NetSize{by_type_.size() + transitions_.size(), transitions_.size()};
}

NetSize PetriNet::unmergedSize() const {
  NetSize n;
  for (const auto& p : patterns_) {
    std::set<Symbol> types;
    for (const CompiledPattern::Element& e : p->pattern->elements) types.insert(e.type);
    n.places += types.size() + p->pattern->elements.size();
    n.transitions += p->pattern->elements.size();
  }
  return n;
}

size_t PetriNet::tokenCount() const {
  size_t n = 0;
  for (const auto& t : transitions_) n += t->place.size();
  return n;
}

}  // namespace cepbus::plugins::petri
