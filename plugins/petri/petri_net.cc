#include "plugins/petri/petri_net.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "bus/core/pattern/printer.h"

namespace cepbus::plugins::petri {
namespace {

using pattern::PatternKind;
using pattern::PatternNode;

std::string at(const pattern::SourcePos& pos) {
  return "line " + std::to_string(pos.line) + ", column " + std::to_string(pos.column) + ": ";
}

// One alternative of a pattern: a sequence of single elements, plus the
// selection predicates of the operands it went through.
struct Alternative {
  std::vector<const PatternNode*> elements;
  std::vector<pattern::ExprPtr> predicates;
  // A conjunction: the index in `elements` where each operand after the
  // first starts (ascending).
  std::vector<size_t> splits;
};

// Beyond this a disjunction inside sequences is refused (each alternative is
// a chain of the net).
constexpr size_t kMaxAlternatives = 64;

constexpr const char* kRuns =
    "; it runs SEQ, OR, AND (outside sequences), NOT(Type var) between elements, selection "
    "e[predicate] over 'Type var' elements and Kleene plus 'Type+ var[]' inside SEQ (use "
    "--engine nfa or algebra)";

// `left` followed by `right`; as operands of a conjunction (`split`), the
// point where `right` starts is remembered with its own split points.
Alternative concatenated(const Alternative& left, const Alternative& right, bool split) {
  Alternative a = left;
  if (split) {
    const size_t offset = a.elements.size();
    a.splits.push_back(offset);
    for (size_t s : right.splits) a.splits.push_back(offset + s);
  }
  a.elements.insert(a.elements.end(), right.elements.begin(), right.elements.end());
  a.predicates.insert(a.predicates.end(), right.predicates.begin(), right.predicates.end());
  return a;
}

Status checkAlternatives(size_t n, const PatternNode& node) {
  if (n <= kMaxAlternatives) return Status::ok();
  return Status::invalidArgument(at(node.pos) +
                                 "the petri engine expands disjunctions into at most " +
                                 std::to_string(kMaxAlternatives) + " alternatives");
}

// The basic nets the engine builds: an element is a one-input transition on
// its type's input place, a sequence connects them in series, a disjunction
// gives one chain per alternative into one output place (two colours), a
// selection adds its predicate to the guard of its operand's last transition,
// a conjunction runs each operand as a chain of its own and joins them, in
// any order, with two-input transitions.
Result<std::vector<Alternative>> expand(const PatternNode& node) {
  switch (node.kind) {
    case PatternKind::kEvent: {
      Alternative a;
      a.elements.push_back(&node);
      return std::vector<Alternative>{std::move(a)};
    }
    case PatternKind::kSeq: {
      std::vector<Alternative> out(1);
      for (const pattern::PatternPtr& c : node.children) {
        auto part = expand(*c);
        if (!part) return part.status();
        std::vector<Alternative> next;
        for (const Alternative& left : out) {
          for (const Alternative& right : *part) {
            if (!right.splits.empty() || !left.splits.empty()) {
              return Status::invalidArgument(
                  at(c->pos) +
                  "the petri engine runs a conjunction 'AND(...)' / '+' only outside sequences "
                  "(as the whole pattern, an operand of OR or of another AND)" +
                  kRuns);
            }
            next.push_back(concatenated(left, right, false));
          }
        }
        if (Status s = checkAlternatives(next.size(), node); !s) return s;
        out = std::move(next);
      }
      return out;
    }
    case PatternKind::kOr: {
      std::vector<Alternative> out;
      for (const pattern::PatternPtr& c : node.children) {
        auto part = expand(*c);
        if (!part) return part.status();
        out.insert(out.end(), part->begin(), part->end());
      }
      if (Status s = checkAlternatives(out.size(), node); !s) return s;
      return out;
    }
    case PatternKind::kAnd: {
      std::vector<Alternative> out;
      for (const pattern::PatternPtr& c : node.children) {
        auto part = expand(*c);
        if (!part) return part.status();
        if (out.empty()) {
          out = std::move(part).value();
          continue;
        }
        std::vector<Alternative> next;
        for (const Alternative& left : out) {
          for (const Alternative& right : *part) next.push_back(concatenated(left, right, true));
        }
        if (Status s = checkAlternatives(next.size(), node); !s) return s;
        out = std::move(next);
      }
      return out;
    }
    case PatternKind::kSelection: {
      auto part = expand(*node.children.front());
      if (!part) return part.status();
      for (Alternative& a : *part) a.predicates.push_back(node.predicate);
      return part;
    }
    case PatternKind::kKleene: {
      if (node.star) {
        return Status::invalidArgument(at(node.pos) +
                                       "the petri engine does not support the Kleene star "
                                       "element '" +
                                       node.type + "* " + node.var +
                                       "[]' (zero or more); write 'Type+ var[]'" + kRuns);
      }
      Alternative a;
      a.elements.push_back(&node);
      return std::vector<Alternative>{std::move(a)};
    }
    case PatternKind::kNot: {
      Alternative a;
      a.elements.push_back(&node);
      return std::vector<Alternative>{std::move(a)};
    }
    default:
      return Status::invalidArgument(at(node.pos) + "the petri engine does not support the " +
                                     pattern::operatorName(node.kind) + " operator" + kRuns);
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
    // A variable of another alternative of a disjunction is unbound here.
    auto it = position.find(e.ref.var);
    copy->ref.var =
        it == position.end() ? "unbound " + e.ref.var : "e" + std::to_string(it->second - from);
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
  std::string key =
      std::string(e.type.name()) + (e.kleene ? "+" : "") + (e.var.empty() ? " -" : " named") + " [";
  for (const std::string& t : texts) key += t + ";";
  key += "]";
  for (const CompiledPattern::Negation& n : e.negations) {
    std::vector<std::string> conditions;
    for (const pattern::Conjunct* c : n.conditions) {
      conditions.push_back(pattern::toString(*byPosition(*c->source, p.position, from)));
    }
    std::sort(conditions.begin(), conditions.end());
    key += " !" + std::string(n.type.name()) + (n.slot < 0 ? " -" : " named") + " [";
    for (const std::string& t : conditions) key += t + ";";
    key += "]";
  }
  return key + "\n";
}

}  // namespace

Result<CompiledPatternPtr> compilePattern(const pattern::Query& query,
                                          const plugin::DetectorOptions& options) {
  static constexpr std::string_view kKnown[] = {"policy"};
  Status s = options.checkKnown(kKnown, "petri");
  if (!s) return s;
  Policy policy = Policy::kFeedback;
  if (const std::string* v = options.find("policy")) {
    if (*v == "conflict") {
      policy = Policy::kConflict;
    } else if (*v == "concurrency") {
      policy = Policy::kConcurrency;
    } else if (*v != "feedback") {
      return Status::invalidArgument("option policy=" + *v +
                                     ": expected feedback, conflict or concurrency");
    }
  }
  if (query.context == pattern::Context::kRecent) {
    return Status::invalidArgument(
        "the petri engine does not support CONTEXT recent; it reports every match");
  }
  auto alternatives = expand(*query.pattern);
  if (!alternatives) return alternatives.status();
  const pattern::BindingLayout layout = pattern::BindingLayout::forQuery(query);

  std::vector<CompiledPatternPtr> compiled;
  for (const Alternative& alt : *alternatives) {
    auto p = std::make_shared<CompiledPattern>();
    p->policy = policy;
    if (query.within) p->window = *query.within;
    p->min_probability = query.min_probability.value_or(0);
    p->layout = layout;
    auto where = pattern::compileConjuncts(query.where, p->layout);
    if (!where) return where.status();
    p->conjuncts = std::move(where).value();
    for (const pattern::ExprPtr& predicate : alt.predicates) {
      auto selected = pattern::compileConjuncts(predicate, p->layout);
      if (!selected) return selected.status();
      for (pattern::Conjunct& c : *selected) p->conjuncts.push_back(std::move(c));
    }

    std::vector<int> slot_element(p->layout.size(), -1);
    std::vector<int> slot_negation(p->layout.size(), -1);  // the element whose negation binds it
    std::vector<CompiledPattern::Negation> pending;
    if (!alt.splits.empty() && policy != Policy::kFeedback) {
      return Status::invalidArgument(
          "the petri engine runs a conjunction 'AND(...)' / '+' under policy=feedback only");
    }
    const bool kleene = std::any_of(alt.elements.begin(), alt.elements.end(),
                                    [](const auto* n) { return n->kind == PatternKind::kKleene; });
    if (kleene && policy != Policy::kFeedback) {
      return Status::invalidArgument(
          "the petri engine runs a Kleene element 'Type+ var[]' under policy=feedback only");
    }
    if (kleene && !alt.splits.empty()) {
      return Status::invalidArgument(
          "the petri engine does not run a Kleene element 'Type+ var[]' inside a conjunction "
          "'AND(...)' / '+'");
    }
    auto split_at = [&](size_t node) {
      return std::find(alt.splits.begin(), alt.splits.end(), node) != alt.splits.end();
    };
    for (size_t node = 0; node < alt.elements.size(); ++node) {
      const PatternNode* n = alt.elements[node];
      if (split_at(node)) {
        if (!pending.empty()) {
          return Status::invalidArgument(
              "the petri engine needs a positive element after NOT(" +
              std::string(pending.front().type.name()) +
              ") inside the operand of a conjunction; it checks a negation between two elements");
        }
        p->operand_starts.push_back(p->elements.size());
      }
      const bool next_to_kleene = n->kind == PatternKind::kNot
                                      ? !p->elements.empty() && p->elements.back().kleene
                                      : n->kind == PatternKind::kKleene && !pending.empty();
      if (next_to_kleene) {
        return Status::invalidArgument(at(n->pos) +
                                       "the petri engine does not run NOT(...) next to a Kleene "
                                       "element 'Type+ var[]'; the nfa engine runs it");
      }
      if (n->kind == PatternKind::kNot) {
        if (p->elements.empty() || split_at(node)) {
          return Status::invalidArgument(at(n->pos) +
                                         "the petri engine needs a positive element "
                                         "before NOT(" +
                                         n->type +
                                         "); it checks a negation "
                                         "between two elements");
        }
        CompiledPattern::Negation neg;
        neg.type = Symbol::intern(n->type);
        if (!n->var.empty()) {
          neg.slot = static_cast<int>(*p->layout.slotOf(n->var));
          slot_negation[neg.slot] = static_cast<int>(p->elements.size());
        }
        pending.push_back(std::move(neg));
        p->has_negation = true;
        continue;
      }
      CompiledPattern::Element e;
      e.negations = std::move(pending);
      pending.clear();
      e.type = Symbol::intern(n->type);
      e.var = n->var;
      e.kleene = n->kind == PatternKind::kKleene;
      p->has_kleene = p->has_kleene || e.kleene;
      if (!n->var.empty()) {
        e.slot = static_cast<int>(*p->layout.slotOf(n->var));
        slot_element[e.slot] = static_cast<int>(p->elements.size());
      }
      p->elements.push_back(std::move(e));
    }
    if (!pending.empty()) {
      return Status::invalidArgument("the petri engine needs a positive element after NOT(" +
                                     std::string(pending.front().type.name()) +
                                     "); it checks a negation between two elements");
    }
    // A guard sits on the transition that binds the latest variable it
    // names; a conjunct without variables is a constant, checked on the
    // first one. A conjunct naming a negated variable is a condition of
    // that negation, checked when the element after the NOT arrives.
    for (size_t i = 0; i < p->conjuncts.size(); ++i) {
      const pattern::Conjunct& c = p->conjuncts[i];
      int negated_at = -1;
      int latest_positive = -1;
      int earliest_positive = static_cast<int>(p->elements.size());
      for (size_t slot : c.slots) {
        if (slot_element[slot] >= 0) {
          earliest_positive = std::min(earliest_positive, slot_element[slot]);
        }
        if (slot_negation[slot] >= 0) {
          if (negated_at >= 0) {
            return Status::invalidArgument("WHERE " + pattern::toString(*c.source) +
                                           ": a predicate may name at most one negated variable");
          }
          negated_at = slot_negation[slot];
        } else {
          latest_positive = std::max(latest_positive, slot_element[slot]);
        }
      }
      if (negated_at >= 0) {
        if (latest_positive > negated_at) {
          return Status::invalidArgument(
              "WHERE " + pattern::toString(*c.source) +
              ": the petri engine checks a negation when the element after it arrives, so its "
              "predicates may name only elements up to that one; the nfa engine runs it");
        }
        if (earliest_positive < static_cast<int>(p->operandStart(negated_at))) {
          return Status::invalidArgument(
              "WHERE " + pattern::toString(*c.source) +
              ": the petri engine checks a negation inside its operand of the conjunction, so "
              "its predicates may name only that operand's elements");
        }
        for (CompiledPattern::Negation& n : p->elements[negated_at].negations) {
          if (n.slot >= 0 && c.slot_mask >> n.slot & 1) n.conditions.push_back(&c);
        }
        continue;
      }
      int latest = 0;
      int earliest = static_cast<int>(p->elements.size());
      for (size_t slot : c.slots) {
        if (slot_element[slot] < 0) {
          // Only a WHERE conjunct can name a variable the alternative lacks.
          return Status::invalidArgument(
              "WHERE " + pattern::toString(*c.source) + " names " +
              std::string(p->layout.nameOf(slot)) +
              ", which only some alternatives of the disjunction bind; the petri engine needs "
              "every WHERE conjunct bound in every alternative (put it in a selection "
              "e[predicate] of the operand instead)");
        }
        latest = std::max(latest, slot_element[slot]);
        earliest = std::min(earliest, slot_element[slot]);
      }
      if (c.iteration_slot) {
        // b[i] of a Kleene element: checked as each event joins b when no
        // later element is named, else at that element for every event of b.
        const int of = slot_element[*c.iteration_slot];
        if (latest != of && p->elements[latest].kleene) {
          return Status::invalidArgument(
              "WHERE " + pattern::toString(*c.source) +
              ": the petri engine needs an iteration predicate b[i] to name no later Kleene "
              "element; the nfa engine runs it");
        }
      } else if (p->elements[latest].kleene) {
        // Needs the whole run (count(b[]), b[last], ...): checked when the
        // next element binds, or before the run is reported.
        if (latest + 1 == static_cast<int>(p->elements.size())) {
          p->elements[latest].completion.push_back(&c);
          continue;
        }
        ++latest;
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
      p->return_key = query.returns->type + "(";
      for (const pattern::ReturnItem& item : query.returns->items) {
        p->return_key += (item.name.empty() ? pattern::defaultReturnName(*item.expr) : item.name) +
                         "=" + pattern::toString(*byPosition(*item.expr, p->position, 0)) + ";";
      }
      p->return_key += ")";
    }
    compiled.push_back(std::move(p));
  }
  if (compiled.size() == 1) return std::move(compiled.front());

  auto disjunction = std::make_shared<CompiledPattern>();
  disjunction->policy = policy;
  disjunction->window = compiled.front()->window;
  disjunction->min_probability = compiled.front()->min_probability;
  disjunction->layout = layout;
  disjunction->alternatives = std::move(compiled);
  return CompiledPatternPtr(std::move(disjunction));
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
  double prob = 1;         // the product of the bound events' probabilities
  int element = 0;         // the element `event` binds (several events bind a Kleene one)
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
  // A conjunction's join: it pairs the tokens of `input`'s and `right`'s
  // places in any order (fired when either produces), not only a left token
  // that ends before the right one starts.
  bool conjunction = false;
  // A Kleene element's transition: it also reads its own place (a loop),
  // extending each run there with the event, and starts runs from `input`.
  bool loop = false;
  // A Kleene element at or before `depth`: tokens bind by element, not by
  // position (kleene_at[d]: element d is a Kleene one).
  bool by_element = false;
  std::vector<char> kleene_at;
  int depth = 0;  // the last element it binds
  Symbol type;
  CompiledPatternPtr owner;  // keeps `guards` alive
  std::vector<const pattern::Conjunct*> guards;
  std::vector<int> slots;        // the slot bound at each depth 0..depth, or -1
  Timestamp window = kNoWindow;  // the largest window of `users`
  double min_probability = 1;    // the smallest PROBABILITY bound of `users`
  std::vector<PatternEntry*> users;
  std::vector<PatternEntry*> outputs;  // patterns whose last transition this is
  // `outputs` grouped by CompiledPattern::return_key: one composite per group.
  std::vector<std::vector<PatternEntry*>> output_groups;
  std::vector<Transition*> joins;  // joins fed by this transition's tokens
  // -1: feedback, tokens and events are not consumed. Otherwise a firing
  // takes the input token from the place, and the event from every other
  // transition of the same group: 0 is every conflict pattern (their places
  // are shared, a token goes to one parent), >0 one concurrency pattern
  // (its places are copies: taking a token affects no other pattern).
  int group = -1;
  // Inhibitor places: for each negation of the element it binds, the events
  // of the negated type seen so far (pruned with the window).
  struct Inhibitor {
    const CompiledPattern::Negation* spec = nullptr;
    std::vector<EventPtr> place;
  };
  std::vector<Inhibitor> inhibitors;
  // A token this unlikely helps no user; only a feedback transition may drop
  // it (a consuming one would hand its event to another token instead).
  bool unlikely(double prob) const { return group < 0 && prob < min_probability; }
  size_t consumers = 0;                             // transitions reading the output place
  std::vector<std::shared_ptr<const Token>> place;  // kept only while consumers > 0
};

class PetriNet::Composer final : public plugin::MatchComposer {
 public:
  explicit Composer(CompiledPatternPtr p)
      : p_(std::move(p)), type_(p_->returns ? p_->returns->type : Symbol::intern("Match")) {}

  EventPtr compose(const plugin::Match& match) const override {
    std::vector<pattern::SlotBinding> bindings(p_->layout.size());
    std::vector<std::vector<const Event*>> runs(p_->elements.size());
    for (size_t k = 0; k < match.elementCount(); ++k) {
      const int slot = p_->elements[k].slot;
      if (slot < 0) continue;
      auto events = match.elementEvents(k);
      if (!p_->elements[k].kleene) {
        bindings[slot].event = events.front()->get();
        continue;
      }
      for (const EventPtr* e : events) runs[k].push_back(e->get());
      bindings[slot].events = runs[k];
    }
    EventBuilder builder(type_);
    for (size_t i = 0; i < match.size(); ++i) builder.constituent(match.event(i));
    const double probability = match.probability();
    builder.probability(probability);
    if (p_->returns) p_->returns->apply(bindings, probability, builder);
    return builder.build();
  }

 private:
  CompiledPatternPtr p_;
  Symbol type_;
};

namespace {

// Builds the composite once for every pattern of an output group (equal
// RETURN keys): the first pattern that asks composes, the others share it.
class SharedComposer final : public plugin::MatchComposer {
 public:
  explicit SharedComposer(const plugin::MatchComposer& inner) : inner_(inner) {}
  EventPtr compose(const plugin::Match& match) const override {
    if (composite_ == nullptr) composite_ = inner_.compose(match);
    return composite_;
  }

 private:
  const plugin::MatchComposer& inner_;
  mutable EventPtr composite_;
};

}  // namespace

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
  int group = -1;    // consumption group of its transitions (see Transition::group)
  size_t split = 0;  // the first element of the chain its join shares, 0 for none
  std::vector<std::string> tail_keys;  // its entries in tails_
  size_t alternative = 0;              // of a disjunction: one entry per alternative
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
  // A disjunction runs one chain per alternative, all reporting as `name`.
  std::vector<CompiledPatternPtr> chains = pattern->alternatives;
  if (chains.empty()) chains.push_back(std::move(pattern));
  int group = -1;
  switch (chains.front()->policy) {
    case Policy::kFeedback:
      break;
    case Policy::kConflict:
      group = 0;  // every conflict pattern shares the places (and the events)
      break;
    case Policy::kConcurrency:
      group = next_group_++;  // a copy of every place of its own
      break;
  }
  for (size_t i = 0; i < chains.size(); ++i) {
    auto entry = std::make_unique<PatternEntry>();
    entry->name = name;
    entry->alternative = i;
    entry->sink = &sink;
    entry->since_seq = seq_ + 1;
    entry->composer = std::make_unique<Composer>(chains[i]);
    for (size_t k = 0; k < chains[i]->elements.size(); ++k) {
      entry->ends.push_back(static_cast<uint32_t>(k + 1));
    }
    entry->group = group;
    entry->pattern = std::move(chains[i]);
    const size_t split = entry->group < 0 ? chooseSplit(*entry) : 0;
    insert(std::move(entry), split);
  }
  rebuildTypeIndex();
  held_ = tokenCount();  // a back join may have rewritten places
  return Status::ok();
}

namespace {

// The key of the chain of elements `from`..end of `p`, as a chain starting at
// the head would have it: equal keys, equal chains (a back join's shared tail).
std::string tailKey(const CompiledPattern& p, size_t from) {
  std::string key;
  for (size_t i = from; i < p.elements.size(); ++i) key += elementKey(p, i, from);
  return key;
}

}  // namespace

size_t PetriNet::chooseSplit(const PatternEntry& e) {
  const CompiledPattern& p = *e.pattern;
  // Inhibitors read the elements on both sides; a conjunction joins its own
  // operands; Kleene tokens bind by element.
  if (p.has_negation || p.has_kleene || !p.operand_starts.empty()) return 0;
  const size_t m = p.elements.size();
  // The prefix join shares elements 0..shared-1.
  std::string key;
  size_t shared = 0;
  for (; shared < m; ++shared) {
    std::string next = key + elementKey(p, shared, 0);
    if (by_key_.find(next) == by_key_.end()) break;
    key = std::move(next);
  }
  if (shared + 2 > m) return 0;  // at most one element of its own: nothing to share
  // A middle join at the first element of its own is insert()'s default.
  if (shared > 0 &&
      by_key_.count(elementKey(p, shared, shared) + elementKey(p, shared + 1, shared)) != 0) {
    return 0;
  }
  const size_t first = std::max<size_t>(shared, 1);
  // Back join onto a tail some pattern already runs as a chain of its own.
  for (size_t j = first; j + 2 <= m; ++j) {
    if (by_key_.count(tailKey(p, j)) != 0) return j;
  }
  // Back join by rewriting a running pattern that ends in the same tail, so
  // that it runs the tail as a chain of its own fed, with its leading place,
  // into a join. Only before events flow: the rewritten pattern's partial
  // matches would be lost.
  if (seq_ != 0) return 0;
  for (size_t j = first; j + 2 <= m; ++j) {
    auto it = tails_.find(tailKey(p, j));
    if (it == tails_.end()) continue;
    for (const auto& [q, from] : it->second) {
      if (q->split != 0) continue;  // it joins elsewhere already
      const PatternEntry* const rewritten = q;
      const size_t at = from;
      auto owned = detach(*rewritten);
      insert(std::move(owned), at);
      return j;
    }
  }
  return 0;
}

std::unique_ptr<PetriNet::PatternEntry> PetriNet::detach(const PatternEntry& entry) {
  auto it = std::find_if(patterns_.begin(), patterns_.end(),
                         [&](const auto& p) { return p.get() == &entry; });
  std::unique_ptr<PatternEntry> owned = std::move(*it);
  patterns_.erase(it);
  PatternEntry* const e = owned.get();
  for (auto t_it = e->chain.rbegin(); t_it != e->chain.rend(); ++t_it) {
    Transition* t = *t_it;
    std::erase(t->users, e);
    std::erase(t->outputs, e);
    rebuildOutputGroups(*t);
    if (t->users.empty()) {
      if (t->input != nullptr && --t->input->consumers == 0) t->input->place.clear();
      if (t->right != nullptr) std::erase(t->right->joins, t);
      if (t->conjunction) {
        std::erase(t->input->joins, t);
        if (--t->right->consumers == 0) t->right->place.clear();
      }
      by_key_.erase(t->key);
      std::erase_if(transitions_, [&](const auto& owned_t) { return owned_t.get() == t; });
    } else {
      t->window = 0;
      t->min_probability = 1;
      for (const PatternEntry* u : t->users) {
        t->window = std::max(t->window, u->pattern->window);
        t->min_probability = std::min(t->min_probability, u->pattern->min_probability);
      }
    }
  }
  e->chain.clear();
  for (const std::string& k : e->tail_keys) {
    auto t = tails_.find(k);
    std::erase_if(t->second, [&](const auto& item) { return item.first == e; });
    if (t->second.empty()) tails_.erase(t);
  }
  e->tail_keys.clear();
  e->split = 0;
  return owned;
}

void PetriNet::insert(std::unique_ptr<PatternEntry> entry, size_t split) {
  PatternEntry* const e = entry.get();
  const CompiledPatternPtr& pattern = e->pattern;
  const CompiledPattern& p = *pattern;
  const size_t m = p.elements.size();

  auto use = [&](Transition* t) {
    if (std::find(t->users.begin(), t->users.end(), e) != t->users.end()) return;
    t->users.push_back(e);
    t->window = std::max(t->window, p.window);
    t->min_probability = std::min(t->min_probability, p.min_probability);
    e->chain.push_back(t);
  };
  // The transition binding element `from + depth` after a chain that starts
  // at element `from` (0: the pattern's own chain).
  auto create = [&](const std::string& key, Transition* input, size_t depth, size_t from) {
    auto created = std::make_unique<Transition>();
    Transition* t = created.get();
    t->key = key;
    t->input = input;
    t->depth = static_cast<int>(depth);
    t->owner = pattern;
    for (size_t d = 0; d <= depth; ++d) t->slots.push_back(p.elements[from + d].slot);
    t->window = p.window;
    t->min_probability = p.min_probability;
    t->group = e->group;
    const CompiledPattern::Element& el = p.elements[from + depth];
    t->type = el.type;
    t->loop = el.kleene;
    if (t->loop) ++t->consumers;  // its own place
    for (size_t d = 0; d <= depth; ++d) {
      t->kleene_at.push_back(static_cast<char>(p.elements[from + d].kleene));
      t->by_element = t->by_element || p.elements[from + d].kleene;
    }
    for (size_t g = 0; g < el.guards.size(); ++g) {
      if (el.guard_earliest[g] >= from) t->guards.push_back(el.guards[g]);
    }
    for (const CompiledPattern::Negation& n : el.negations) {
      t->inhibitors.push_back(Transition::Inhibitor{&n, {}});
    }
    if (input != nullptr) ++input->consumers;
    by_key_.emplace(key, t);
    transitions_.push_back(std::move(created));
    return t;
  };

  if (!p.operand_starts.empty()) {
    // A conjunction: each operand a chain from the head (prefix joins), the
    // operands joined left to right by conjunction transitions whose guards
    // are the conjuncts naming two operands.
    std::vector<size_t> bounds = {0};
    bounds.insert(bounds.end(), p.operand_starts.begin(), p.operand_starts.end());
    bounds.push_back(m);
    Transition* acc = nullptr;
    std::string acc_key;
    for (size_t o = 0; o + 1 < bounds.size(); ++o) {
      const size_t from = bounds[o];
      const size_t to = bounds[o + 1];
      std::string probe;
      Transition* end = nullptr;
      for (size_t i = from; i < to; ++i) {
        probe += elementKey(p, i, from);
        auto it = by_key_.find(probe);
        Transition* t = it != by_key_.end() ? it->second : create(probe, end, i - from, from);
        use(t);
        end = t;
      }
      if (o == 0) {
        acc = end;
        acc_key = std::move(probe);
        continue;
      }
      std::vector<const pattern::Conjunct*> across;
      std::vector<std::string> texts;
      for (size_t i = from; i < to; ++i) {
        const CompiledPattern::Element& el = p.elements[i];
        for (size_t g = 0; g < el.guards.size(); ++g) {
          if (el.guard_earliest[g] >= from) continue;
          across.push_back(el.guards[g]);
          texts.push_back(pattern::toString(*byPosition(*el.guards[g]->source, p.position, 0)));
        }
      }
      std::sort(texts.begin(), texts.end());
      std::string key = "AND [";
      for (const std::string& text : texts) key.append(text).append(";");
      key.append("] {\n").append(acc_key).append("} {\n").append(probe).append("}\n");
      Transition* j;
      if (auto it = by_key_.find(key); it != by_key_.end()) {
        j = it->second;
      } else {
        j = create(key, acc, to - 1, 0);
        j->type = Symbol();
        j->inhibitors.clear();
        j->right = end;
        j->conjunction = true;
        j->guards = std::move(across);
        ++end->consumers;
        acc->joins.push_back(j);
        if (end != acc) end->joins.push_back(j);
      }
      use(j);
      acc = j;
      acc_key = std::move(key);
    }
    acc->outputs.push_back(e);
    rebuildOutputGroups(*acc);
    patterns_.push_back(std::move(entry));
    return;
  }

  // Keys of consuming patterns never equal a feedback pattern's: their tokens
  // are taken, so sharing a place changes what the others see.
  std::string key;
  if (e->group == 0) key = "conflict\n";
  if (e->group > 0) key = "concurrency " + std::to_string(e->group) + "\n";
  Transition* prev = nullptr;
  bool joined = false;
  for (size_t k = 0; k < m;) {
    const std::string next = key + elementKey(p, k, 0);
    auto found = by_key_.find(next);
    const bool may_join =
        e->group < 0 && !p.has_negation && !p.has_kleene && prev != nullptr && !joined;
    if (may_join && (split == k || (split == 0 && found == by_key_.end()))) {
      // The right side of a join: elements k..l as a chain from the head.
      // A middle join takes the longest such chain that runs already (two
      // elements at least); a back join (split == k) runs k..m-1, creating
      // what is missing.
      std::string sub;
      std::string probe;
      Transition* end = nullptr;
      size_t l = k;
      for (size_t i = k; i < m; ++i) {
        probe += elementKey(p, i, k);
        auto it = by_key_.find(probe);
        if (it == by_key_.end()) {
          if (split != k) break;
          create(probe, end, i - k, k);
          it = by_key_.find(probe);
        }
        end = it->second;
        if (i > k || split == k) {
          l = i;
          sub = probe;
        }
      }
      if (end != nullptr && (l > k || split == k)) {
        std::vector<Transition*> shared;
        for (Transition* t = end; t != nullptr; t = t->input) shared.push_back(t);
        for (auto it = shared.rbegin(); it != shared.rend(); ++it) use(*it);
        // The join's guard: the conjuncts of elements k..l that name an
        // element before k (the others are the shared chain's guards).
        std::vector<const pattern::Conjunct*> across;
        std::vector<std::string> texts;
        for (size_t i = k; i <= l; ++i) {
          const CompiledPattern::Element& el = p.elements[i];
          for (size_t g = 0; g < el.guards.size(); ++g) {
            if (el.guard_earliest[g] >= k) continue;
            across.push_back(el.guards[g]);
            texts.push_back(pattern::toString(*byPosition(*el.guards[g]->source, p.position, 0)));
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
          j = create(key, prev, l, 0);
          j->type = Symbol();
          j->inhibitors.clear();
          j->right = end;
          j->guards = std::move(across);
          end->joins.push_back(j);
        }
        use(j);
        prev = j;
        joined = true;
        e->split = k;
        k = l + 1;
        continue;
      }
    }
    Transition* t = found != by_key_.end() ? found->second : create(next, prev, k, 0);
    use(t);  // a found transition is a prefix join: its place is shared
    key = next;
    prev = t;
    ++k;
  }
  prev->outputs.push_back(e);
  rebuildOutputGroups(*prev);
  if (e->group < 0 && !p.has_negation && !p.has_kleene) {
    for (size_t j = 1; j + 2 <= m; ++j) {
      e->tail_keys.push_back(tailKey(p, j));
      tails_[e->tail_keys.back()].emplace_back(e, j);
    }
  }
  patterns_.push_back(std::move(entry));
}

Status PetriNet::removePattern(std::string_view name) {
  auto it = std::find_if(patterns_.begin(), patterns_.end(),
                         [&](const auto& p) { return p->name == name; });
  if (it == patterns_.end()) {
    return Status::notFound("no pattern '" + std::string(name) + "' in the net");
  }
  for (size_t i = patterns_.size(); i-- > 0;) {
    if (patterns_[i]->name == name) detach(*patterns_[i]);
  }
  rebuildTypeIndex();
  held_ = tokenCount();  // detach() cleared places and dropped transitions
  return Status::ok();
}

void PetriNet::rebuildOutputGroups(Transition& t) {
  t.output_groups.clear();
  for (PatternEntry* p : t.outputs) {
    auto same = std::find_if(t.output_groups.begin(), t.output_groups.end(), [&](const auto& g) {
      return g.front()->pattern->return_key == p->pattern->return_key;
    });
    if (same == t.output_groups.end()) {
      t.output_groups.push_back({p});
    } else {
      same->push_back(p);
    }
  }
}

void PetriNet::rebuildTypeIndex() {
  by_type_.clear();
  inhibitors_.clear();
  for (const auto& t : transitions_) {
    for (size_t i = 0; i < t->inhibitors.size(); ++i) {
      inhibitors_[t->inhibitors[i].spec->type].emplace_back(t.get(), i);
    }
  }
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
  // Places whose consumers see no events still let their tokens expire.
  if (seq_ % 1024 == 0) {
    for (const auto& t : transitions_) {
      if (t->window == kNoWindow) continue;
      held_ -= std::erase_if(t->place,
                             [&](const auto& tok) { return now_ - tok->first_ts > t->window; });
    }
  }
  peak_held_ = std::max(peak_held_, held_);
  return Status::ok();
}

void PetriNet::fire(Transition& t, const EventPtr& event) {
  const Timestamp ts = event->ts();
  if (t.group >= 0) {
    // A consuming transition: the event is gone once its group used it.
    if (static_cast<size_t>(t.group) >= taken_.size()) taken_.resize(t.group + 1, 0);
    if (taken_[t.group] == seq_) return;
  }
  if (t.loop) {
    fireLoop(t, event);
    return;
  }
  if (t.input == nullptr) {
    if (guardsHold(t, nullptr, nullptr, event.get())) {
      if (t.group >= 0) taken_[t.group] = seq_;
      produce(t, nullptr, nullptr, event);
    }
    return;
  }
  std::vector<std::shared_ptr<const Token>>& in = t.input->place;
  if (t.input->window != kNoWindow) {
    const Timestamp w = t.input->window;
    held_ -= std::erase_if(in, [&](const auto& tok) { return ts - tok->first_ts > w; });
  }
  // By index: a join fired from produce() may append to another place.
  for (size_t i = 0, n = in.size(); i < n; ++i) {
    const Token* tok = in[i].get();
    if (tok->last_ts >= ts) continue;
    if (t.window != kNoWindow && ts - tok->first_ts > t.window) continue;
    if (t.unlikely(tok->prob * event->probability())) continue;
    if (!guardsHold(t, tok, nullptr, event.get())) continue;
    if (!t.inhibitors.empty() && negated(t, tok, *event)) continue;
    if (t.group < 0) {
      produce(t, in[i], nullptr, event);
      continue;
    }
    // The oldest token that fits takes the event; both are consumed.
    std::shared_ptr<const Token> taken = std::move(in[i]);
    in.erase(in.begin() + static_cast<std::ptrdiff_t>(i));
    --held_;
    taken_[t.group] = seq_;
    produce(t, std::move(taken), nullptr, event);
    return;
  }
}

void PetriNet::fireLoop(Transition& t, const EventPtr& event) {
  const Timestamp ts = event->ts();
  auto expire = [&](std::vector<std::shared_ptr<const Token>>& place, Timestamp w) {
    if (w != kNoWindow)
      held_ -= std::erase_if(place, [&](const auto& tok) { return ts - tok->first_ts > w; });
  };
  auto extend = [&](std::vector<std::shared_ptr<const Token>>& place, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const Token* tok = place[i].get();
      if (tok->last_ts >= ts) continue;
      if (t.window != kNoWindow && ts - tok->first_ts > t.window) continue;
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
    extend(t.input->place, t.input->place.size());
  }
  extend(t.place, runs);
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

bool PetriNet::guardsHold(const Transition& t, const Token* left, const Token* right,
                          const Event* event) {
  if (t.guards.empty()) return true;
  bind(t, left, right, event);
  const int extending = t.loop ? t.slots[t.depth] : -1;
  for (const pattern::Conjunct* g : t.guards) {
    if (g->iteration_slot && static_cast<int>(*g->iteration_slot) != extending) {
      // b[i] of an earlier Kleene element: it holds for every event of b.
      pattern::SlotBinding& b = bind_[*g->iteration_slot];
      bool all = true;
      for (size_t i = 0; all && i < b.events.size(); ++i) {
        b.current = i;
        all = g->test(bind_);
      }
      b.current = pattern::SlotBinding::kNewest;
      if (!all) return false;
      continue;
    }
    if (!g->test(bind_)) return false;
  }
  return true;
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

void PetriNet::produce(Transition& t, std::shared_ptr<const Token> parent,
                       std::shared_ptr<const Token> right, const EventPtr& event) {
  Token tok;
  if (right != nullptr) {
    // A conjunction's operands may come in any order.
    tok.first_ts = std::min(parent->first_ts, right->first_ts);
    tok.first_seq = std::min(parent->first_seq, right->first_seq);
    tok.last_ts = std::max(parent->last_ts, right->last_ts);
    tok.prob = parent->prob * right->prob;
  } else {
    tok.event = event;
    tok.element = t.depth;
    tok.first_ts = parent ? parent->first_ts : event->ts();
    tok.first_seq = parent ? parent->first_seq : seq_;
    tok.last_ts = event->ts();
    tok.prob = (parent ? parent->prob : 1.0) * event->probability();
  }
  tok.parent = std::move(parent);
  tok.right = std::move(right);
  bool collected = false;
  for (const std::vector<PatternEntry*>& group : t.output_groups) {
    SharedComposer composer(*group.front()->composer);
    for (const PatternEntry* p : group) {
      if (tok.first_seq < p->since_seq) continue;
      const Timestamp w = p->pattern->window;
      if (w != kNoWindow && tok.last_ts - tok.first_ts > w) continue;
      if (tok.prob < p->pattern->min_probability) continue;
      const std::vector<const pattern::Conjunct*>& completion =
          p->pattern->elements.back().completion;
      if (!completion.empty()) {
        bind(t, tok.parent.get(), nullptr, tok.event.get());
        if (!std::all_of(completion.begin(), completion.end(),
                         [&](const pattern::Conjunct* c) { return c->test(bind_); })) {
          continue;
        }
      }
      if (!collected) {
        // Once per token: every output of `t` binds the same events.
        chain_.clear();
        collect(&tok, chain_);
        collected = true;
        if (t.by_element) {
          // A Kleene element binds several events: ends by element.
          ends_.assign(t.slots.size(), 0);
          for (const Token* k = &tok; k != nullptr; k = k->parent.get()) ++ends_[k->element];
          for (size_t d = 1; d < ends_.size(); ++d) ends_[d] += ends_[d - 1];
        }
      }
      p->sink->onMatch(plugin::Match(chain_, t.by_element ? ends_ : p->ends, &composer));
    }
  }
  if ((t.consumers == 0 && t.joins.empty()) || t.unlikely(tok.prob)) return;
  auto shared = std::make_shared<const Token>(std::move(tok));
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

NetSize PetriNet::size() const {
  return NetSize{by_type_.size() + transitions_.size(), transitions_.size()};
}

NetSize PetriNet::unmergedSize() const {
  NetSize n;
  for (const auto& p : patterns_) {
    std::set<Symbol> types;
    for (const CompiledPattern::Element& e : p->pattern->elements) types.insert(e.type);
    // A conjunction adds one join transition (and its place) per operand after the first.
    n.places += types.size() + p->pattern->elements.size() + p->pattern->operand_starts.size();
    n.transitions += p->pattern->elements.size() + p->pattern->operand_starts.size();
  }
  return n;
}

namespace {

// A DOT string literal's contents: quotes and backslashes escaped, line
// breaks as DOT's centred "\n".
std::string dotEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string windowText(Timestamp w) { return w == kNoWindow ? "none" : std::to_string(w); }

}  // namespace

Result<std::string> PetriNet::exportModel(std::string_view format) const {
  if (format == "dot") return toDot();
  if (format == "json") return toJson();
  return Status::invalidArgument("the petri engine exports its net as 'dot' or 'json', not '" +
                                 std::string(format) + "'");
}

std::string PetriNet::toDot() const {
  std::map<const Transition*, size_t> id;
  for (const auto& t : transitions_) id.emplace(t.get(), id.size());
  std::string out =
      "digraph petri {\n  rankdir=LR;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  std::vector<Symbol> types;
  for (const auto& [type, list] : by_type_) types.push_back(type);
  std::sort(types.begin(), types.end(), [](Symbol a, Symbol b) { return a.name() < b.name(); });
  for (Symbol type : types) {
    out += "  \"in:" + dotEscape(type.name()) + "\" [shape=circle, style=filled, " +
           "fillcolor=lightblue, label=\"" + dotEscape(type.name()) + "\"];\n";
  }
  for (const auto& owned : transitions_) {
    const Transition& t = *owned;
    const std::string n = std::to_string(id.at(&t));
    std::string label = t.conjunction        ? "T" + n + ": AND (any order)"
                        : t.right != nullptr ? "T" + n + ": join"
                        : t.loop ? "T" + n + ": " + std::string(t.type.name()) + "+ (loop)"
                                 : "T" + n + ": " + std::string(t.type.name());
    for (const pattern::Conjunct* g : t.guards) label += "\n" + pattern::toString(*g->source);
    if (t.window != kNoWindow) label += "\nwithin " + windowText(t.window);
    std::string users;
    for (const PatternEntry* u : t.users) users += (users.empty() ? "" : ", ") + u->name;
    label += "\n[" + users + "]";
    out += "  t" + n + " [shape=box, label=\"" + dotEscape(label) + "\"];\n";
    out += "  p" + n + " [shape=circle, label=\"P" + n + "\\n" + std::to_string(t.place.size()) +
           " tok\"];\n";
    if (t.input != nullptr) out += "  p" + std::to_string(id.at(t.input)) + " -> t" + n + ";\n";
    if (t.conjunction) {
      out += "  p" + std::to_string(id.at(t.right)) + " -> t" + n + ";\n";
    } else if (t.right != nullptr) {
      out += "  p" + std::to_string(id.at(t.right)) + " -> t" + n + " [style=dashed];\n";
    } else {
      out += "  \"in:" + dotEscape(t.type.name()) + "\" -> t" + n + ";\n";
    }
    out += "  t" + n + " -> p" + n + ";\n";
    if (t.loop) out += "  p" + n + " -> t" + n + " [label=\"run\"];\n";
    for (const PatternEntry* p : t.outputs) {
      out += "  \"out:" + dotEscape(p->name) + "\" [shape=doubleoctagon, label=\"" +
             dotEscape(p->name) + "\"];\n  p" + n + " -> \"out:" + dotEscape(p->name) + "\";\n";
    }
  }
  return out + "}\n";
}

std::string PetriNet::toJson() const {
  std::map<const Transition*, size_t> id;
  for (const auto& t : transitions_) id.emplace(t.get(), id.size());
  nlohmann::json places = nlohmann::json::array();
  std::vector<Symbol> types;
  for (const auto& [type, list] : by_type_) types.push_back(type);
  std::sort(types.begin(), types.end(), [](Symbol a, Symbol b) { return a.name() < b.name(); });
  for (Symbol type : types) {
    places.push_back({{"id", "in:" + std::string(type.name())},
                      {"kind", "input"},
                      {"event_type", std::string(type.name())}});
  }
  nlohmann::json transitions = nlohmann::json::array();
  for (const auto& owned : transitions_) {
    const Transition& t = *owned;
    const std::string n = std::to_string(id.at(&t));
    nlohmann::json outputs = nlohmann::json::array();
    for (const PatternEntry* p : t.outputs) outputs.push_back(p->name);
    places.push_back({{"id", "p" + n},
                      {"kind", "output"},
                      {"transition", "t" + n},
                      {"tokens", t.place.size()},
                      {"emits", outputs}});
    nlohmann::json inputs = nlohmann::json::array();
    if (t.input != nullptr) inputs.push_back("p" + std::to_string(id.at(t.input)));
    if (t.loop) inputs.push_back("p" + n);
    if (t.right != nullptr) {
      inputs.push_back("p" + std::to_string(id.at(t.right)));
    } else {
      inputs.push_back("in:" + std::string(t.type.name()));
    }
    nlohmann::json guards = nlohmann::json::array();
    for (const pattern::Conjunct* g : t.guards) guards.push_back(pattern::toString(*g->source));
    nlohmann::json users = nlohmann::json::array();
    for (const PatternEntry* u : t.users) users.push_back(u->name);
    nlohmann::json tj = {{"id", "t" + n},
                         {"kind", t.conjunction        ? "conjunction"
                                  : t.right != nullptr ? "join"
                                  : t.loop             ? "iterate"
                                                       : "extend"},
                         {"depth", t.depth},
                         {"inputs", inputs},
                         {"output", "p" + n},
                         {"guards", guards},
                         {"patterns", users}};
    if (t.right == nullptr) tj["event_type"] = std::string(t.type.name());
    if (t.window != kNoWindow) tj["window"] = t.window;
    transitions.push_back(std::move(tj));
  }
  nlohmann::json patterns = nlohmann::json::array();
  for (const auto& p : patterns_) {
    nlohmann::json chain = nlohmann::json::array();
    for (const Transition* t : p->chain) chain.push_back("t" + std::to_string(id.at(t)));
    static const char* kPolicies[] = {"feedback", "conflict", "concurrency"};
    nlohmann::json pj = {{"name", p->name},
                         {"alternative", p->alternative},
                         {"policy", kPolicies[static_cast<int>(p->pattern->policy)]},
                         {"transitions", chain}};
    if (p->pattern->window != kNoWindow) pj["window"] = p->pattern->window;
    patterns.push_back(std::move(pj));
  }
  const NetSize merged = size();
  const NetSize alone = unmergedSize();
  nlohmann::json out = {
      {"engine", "petri"},
      {"places", places},
      {"transitions", transitions},
      {"patterns", patterns},
      {"size", {{"places", merged.places}, {"transitions", merged.transitions}}},
      {"unmerged_size", {{"places", alone.places}, {"transitions", alone.transitions}}}};
  return out.dump(2) + "\n";
}

size_t PetriNet::patternCount() const {
  return static_cast<size_t>(std::count_if(patterns_.begin(), patterns_.end(),
                                           [](const auto& p) { return p->alternative == 0; }));
}

size_t PetriNet::tokenCount() const {
  size_t n = 0;
  for (const auto& t : transitions_) n += t->place.size();
  return n;
}

}  // namespace cepbus::plugins::petri
