#include "plugins/petri/pattern_compiler.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "bus/core/pattern/printer.h"
#include "bus/core/pattern/window_query.h"

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
                                       "[]' (zero or more), nor does any other engine: write '" +
                                       node.type + "+ " + node.var +
                                       "[]', and the pattern without the element as a second "
                                       "query if it may be empty");
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

}  // namespace

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

Result<CompiledPatternPtr> compilePattern(const pattern::Query& query,
                                          const plugin::DetectorOptions& options) {
  if (Status w = pattern::requirePatternQuery(query, "petri"); !w) return w;
  static constexpr auto kKnown =
      plugin::withStateCapOptions(std::array<std::string_view, 1>{"policy"});
  Status s = options.checkKnown(kKnown, "petri");
  if (!s) return s;
  auto caps = plugin::StateCaps::parse(options);
  if (!caps) return caps.status();
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
    p->caps = *caps;
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
                                         "the petri engine checks a negation between two "
                                         "elements: it refuses NOT(" +
                                         n->type +
                                         ") at the start of a SEQ or of a conjunction's "
                                         "operand, with no positive element before it");
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
      return Status::invalidArgument(
          "the petri engine checks a negation between two elements: it refuses NOT(" +
          std::string(pending.front().type.name()) +
          ") at the end of a SEQ, with no positive element after it");
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
      bool steers = true;
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
        steers = false;
      }
      p->elements[latest].guard_steers.push_back(steers ? 1 : 0);
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
    if (alternatives->size() == 1 && policy == Policy::kFeedback && p->operand_starts.empty()) {
      p->strategy = query.strategy;
    }
    compiled.push_back(std::move(p));
  }
  if (compiled.size() == 1) return std::move(compiled.front());

  auto disjunction = std::make_shared<CompiledPattern>();
  disjunction->policy = policy;
  disjunction->caps = *caps;
  disjunction->window = compiled.front()->window;
  disjunction->min_probability = compiled.front()->min_probability;
  disjunction->layout = layout;
  disjunction->alternatives = std::move(compiled);
  return CompiledPatternPtr(std::move(disjunction));
}

}  // namespace cepbus::plugins::petri
