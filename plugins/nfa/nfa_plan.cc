#include "plugins/nfa/nfa_plan.h"

#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <string_view>

#include "bus/core/pattern/printer.h"
#include "bus/core/pattern/ties.h"
#include "bus/core/pattern/window_query.h"
#include "bus/core/plugin/snapshot.h"

namespace cepbus::plugins::nfa {
namespace {

using pattern::Conjunct;
using pattern::PatternKind;
using pattern::PatternNode;

std::string at(const pattern::SourcePos& pos) {
  return "line " + std::to_string(pos.line) + ", column " + std::to_string(pos.column) + ": ";
}

Status unsupported(const PatternNode& node, const std::string& why) {
  return Status::invalidArgument(at(node.pos) + "the nfa engine does not support " + why);
}

struct Item {
  const PatternNode* node;
};

// Flattens nested sequences; anything but SEQ of event, Kleene and NOT
// elements is an operator of the event algebra the NFA does not implement.
Status flatten(const PatternNode& node, std::vector<const PatternNode*>& out) {
  switch (node.kind) {
    case PatternKind::kEvent:
    case PatternKind::kNot:
      out.push_back(&node);
      return Status::ok();
    case PatternKind::kKleene:
      if (node.star) {
        return unsupported(node, "the Kleene star '" + node.type + "* " + node.var +
                                     "[]' (zero or more), nor does any other engine: write '" +
                                     node.type + "+ " + node.var +
                                     "[]', and the pattern without the element as a second "
                                     "query if it may be empty");
      }
      out.push_back(&node);
      return Status::ok();
    case PatternKind::kSeq:
      for (const pattern::PatternPtr& c : node.children) {
        Status s = flatten(*c, out);
        if (!s) return s;
      }
      return Status::ok();
    default:
      return unsupported(node, std::string("the ") + pattern::operatorName(node.kind) +
                                   " operator (an event-algebra operator; use --engine algebra); "
                                   "it runs SEQ(...) of 'Type var', 'Type+ var[]' and "
                                   "'NOT(Type var)' elements");
  }
}

Result<Timestamp> positiveOption(const plugin::DetectorOptions& options, std::string_view key) {
  const std::string* text = options.find(key);
  try {
    size_t used = 0;
    const long long v = std::stoll(*text, &used);
    if (used == text->size() && v > 0) return static_cast<Timestamp>(v);
  } catch (const std::exception&) {
  }
  return Status::invalidArgument("option " + std::string(key) + "=" + *text +
                                 ": expected a positive integer");
}

Status applyOptions(const plugin::DetectorOptions& options, Plan& plan) {
  static constexpr auto kKnown =
      plugin::withStateCapOptions(std::array<std::string_view, 2>{"construction", "batch_period"});
  Status s = options.checkKnown(kKnown, "nfa");
  if (!s) return s;
  if (const std::string* c = options.find("construction")) {
    if (*c == "per_event" || *c == "per-event") {
      plan.construction = Construction::kPerEvent;
    } else if (*c == "batched") {
      plan.construction = Construction::kBatched;
    } else {
      return Status::invalidArgument("option construction=" + *c +
                                     ": expected per_event or batched");
    }
  }
  // P2 constructs every W time steps, W being the window size in steps:
  // WITHIN n spans n + 1 steps.
  plan.batch_period = plan.window == kNoWindow ? 1024 : plan.window + 1;
  if (options.find("batch_period") != nullptr) {
    auto p = positiveOption(options, "batch_period");
    if (!p) return p.status();
    plan.batch_period = *p;
  }
  auto caps = plugin::StateCaps::parse(options);
  if (!caps) return caps.status();
  plan.max_partition_entries = caps->partition;
  plan.max_entries = caps->total;
  plan.state_policy = caps->policy;
  return Status::ok();
}

// Plan::state_shape. Under another strategy than skip_till_any_match, which
// events a stack keeps may depend on any condition: all of them count.
uint64_t stateShapeOf(const Plan& plan) {
  std::string text = pattern::strategyName(plan.strategy);
  text += plan.construction == Construction::kBatched ? " batched" : " per_event";
  const bool every_condition = plan.strategy != pattern::Strategy::kSkipTillAnyMatch;
  auto conditions = [&text](std::span<const pattern::Conjunct* const> filters) {
    for (const pattern::Conjunct* c : filters) text += " [" + pattern::toString(*c->source) + "]";
  };
  for (Symbol attr : plan.partition_by) text += " by:" + std::string(attr.name());
  for (const ElementPlan& e : plan.elements) {
    text +=
        " e:" + std::string(e.type.name()) + (e.kleene ? "+" : "") + "/" + std::to_string(e.slot);
    conditions(e.push_filters);
  }
  for (const NegationPlan& n : plan.negations) {
    text += " not:" + std::string(n.type.name()) + "/" + std::to_string(n.slot) + "@" +
            std::to_string(n.right) + "." + std::to_string(static_cast<int>(n.place));
    conditions(n.filters);
  }
  if (every_condition) {
    for (const pattern::Conjunct& c : plan.conjuncts)
      text += " {" + pattern::toString(*c.source) + "}";
  }
  // Never 0, which would say the state cannot be carried over.
  return plugin::snapshotFingerprint(text) | 1;
}

}  // namespace

Result<PlanPtr> compilePlan(const pattern::Query& query, const plugin::DetectorOptions& options) {
  if (Status w = pattern::requirePatternQuery(query, "nfa"); !w) return w;
  auto plan = std::make_shared<Plan>();
  plan->strategy = query.strategy;
  if (query.within) plan->window = *query.within;
  plan->min_probability = query.min_probability.value_or(0);
  if (query.context == pattern::Context::kRecent) {
    return Status::invalidArgument(
        "the nfa engine does not support CONTEXT recent (an event-algebra context that keeps one "
        "match per end time); it reports every match, as CONTEXT unrestricted");
  }
  Status s = applyOptions(options, *plan);
  if (!s) return s;

  std::vector<const PatternNode*> items;
  s = flatten(*query.pattern, items);
  if (!s) return s;

  plan->layout = pattern::BindingLayout::forQuery(query);
  const size_t nslots = plan->layout.size();
  plan->slot_element.assign(nslots, -1);
  plan->slot_negation.assign(nslots, -1);
  auto slotOf = [&](const PatternNode& n) -> int {
    if (n.var.empty()) return -1;
    return static_cast<int>(*plan->layout.slotOf(n.var));
  };
  for (const PatternNode* n : items) {
    if (n->kind == PatternKind::kNot) {
      NegationPlan neg;
      neg.type = Symbol::intern(n->type);
      neg.slot = slotOf(*n);
      neg.right = static_cast<int>(plan->elements.size());
      if (neg.slot >= 0) plan->slot_negation[neg.slot] = static_cast<int>(plan->negations.size());
      plan->negations.push_back(std::move(neg));
    } else {
      if (plan->elements.size() == kMaxElements) {
        return unsupported(
            *n, "more than " + std::to_string(kMaxElements) + " positive elements in one pattern");
      }
      ElementPlan e;
      e.type = Symbol::intern(n->type);
      e.slot = slotOf(*n);
      e.kleene = n->kind == PatternKind::kKleene;
      if (e.slot >= 0) plan->slot_element[e.slot] = static_cast<int>(plan->elements.size());
      plan->has_kleene |= e.kleene;
      plan->elements.push_back(std::move(e));
    }
  }
  const int m = static_cast<int>(plan->elements.size());
  const int last_slot = plan->elements.back().slot;
  for (NegationPlan& neg : plan->negations) {
    if (neg.right == 0) neg.place = NegationPlace::kLeading;
    if (neg.right == m) neg.place = NegationPlace::kTrailing;
    if (neg.place != NegationPlace::kBetween && plan->window == kNoWindow) {
      return Status::invalidArgument(
          "the nfa engine runs NOT(" + std::string(neg.type.name()) +
          ") at the start or the end of a pattern only with WITHIN n, which bounds the absence");
    }
  }

  auto compiled = pattern::compileConjuncts(query.where, plan->layout);
  if (!compiled) return compiled.status();
  plan->conjuncts = std::move(compiled).value();

  for (const Conjunct& c : plan->conjuncts) {
    const std::string where = at(c.source->pos) + "predicate '" + c.expr.text() + "': ";
    int negated = -1;
    int min_e = m, max_e = -1;
    for (size_t slot : c.slots) {
      if (plan->slot_negation[slot] >= 0) {
        if (negated >= 0) {
          return Status::invalidArgument(where +
                                         "a predicate may name at most one negated variable");
        }
        negated = plan->slot_negation[slot];
      } else {
        min_e = std::min(min_e, plan->slot_element[slot]);
        max_e = std::max(max_e, plan->slot_element[slot]);
      }
    }
    const bool mentions_last = last_slot >= 0 && (c.slot_mask >> last_slot & 1) != 0;
    const int iter_element = c.iteration_slot ? plan->slot_element[*c.iteration_slot] : -1;
    if (negated >= 0) {
      NegationPlan& neg = plan->negations[negated];
      if (c.iteration_slot) {
        return Status::invalidArgument(
            where + "a predicate over a negated variable cannot use " +
            plan->layout.nameOf(*c.iteration_slot) +
            "[i]; use [1], [last] or an aggregate of the Kleene variable");
      }
      if (c.slots.size() == 1) {
        neg.filters.push_back(&c);
      } else {
        neg.conditions.push_back(Check{&c, -1, mentions_last});
        neg.mentions_last |= mentions_last;
      }
      continue;
    }
    if (max_e < 0) {  // no variable at all: checked once per candidate
      plan->elements[m - 1].complete_checks.push_back(Check{&c, -1, false});
      continue;
    }
    ElementPlan& lo = plan->elements[min_e];
    const bool single_slot = c.slots.size() == 1;
    if (single_slot && (!lo.kleene || (iter_element == min_e && !c.uses_previous))) {
      lo.push_filters.push_back(&c);
      continue;
    }
    if (iter_element >= 0 && iter_element == min_e) {
      plan->elements[iter_element].prepend_checks.push_back(Check{&c, iter_element, mentions_last});
    } else {
      lo.complete_checks.push_back(Check{&c, iter_element, mentions_last});
    }
    // skip_till_next_match: the conjunct decides whether an event qualifies
    // for its latest element when it names that element as it is added.
    ElementPlan& hi = plan->elements[max_e];
    if (!hi.kleene || iter_element == max_e) hi.qualify.push_back(Check{&c, iter_element, false});
  }

  for (int k = 0; k < m; ++k) {
    ElementPlan& e = plan->elements[k];
    e.exact_next = e.qualify.empty();
    if (e.exact_next) continue;
    int verify_at = k;
    for (const Check& q : e.qualify) {
      for (size_t slot : q.conjunct->slots) {
        verify_at = std::min(verify_at, plan->slot_element[slot]);
      }
    }
    if (verify_at == k) {
      // Only iteration predicates on this Kleene element itself: b[i-1]
      // qualifies b[i] alone, so each step is verified as it is prepended.
      e.verify_on_prepend = true;
    } else {
      e.verify_at = verify_at;
      plan->elements[verify_at].verify_at_completion.push_back(k);
    }
  }

  for (size_t n = 0; n < plan->negations.size(); ++n) {
    NegationPlan& neg = plan->negations[n];
    if (neg.place == NegationPlace::kTrailing) {
      plan->trailing_negations.push_back(static_cast<int>(n));
      continue;
    }
    // A leading negation's interval reaches back from the last event: it is
    // checked once the first element completes the binding.
    int ready = neg.place == NegationPlace::kLeading ? 0 : neg.right - 1;
    neg.mentions_last |= neg.place == NegationPlace::kLeading;
    for (const Check& c : neg.conditions) {
      for (size_t slot : c.conjunct->slots) {
        if (plan->slot_element[slot] >= 0) ready = std::min(ready, plan->slot_element[slot]);
      }
    }
    neg.mentions_last |= neg.right == m - 1;
    plan->elements[ready].complete_negations.push_back(static_cast<int>(n));
    if (neg.mentions_last) plan->member_negations.push_back(static_cast<int>(n));
  }
  for (const ElementPlan& e : plan->elements) {
    for (const auto* list : {&e.prepend_checks, &e.complete_checks}) {
      for (const Check& c : *list) {
        if (c.mentions_last) plan->member_checks.push_back(c);
      }
    }
  }

  for (int k = m - 1; k >= 0; --k) {
    const Symbol type = plan->elements[k].type;
    auto it = std::find_if(plan->routes.begin(), plan->routes.end(),
                           [&](const TypeRoute& r) { return r.type == type; });
    if (it == plan->routes.end()) {
      plan->routes.push_back(TypeRoute{type, {}, {}});
      it = plan->routes.end() - 1;
    }
    it->elements.push_back(k);
  }
  for (size_t n = 0; n < plan->negations.size(); ++n) {
    const Symbol type = plan->negations[n].type;
    auto it = std::find_if(plan->routes.begin(), plan->routes.end(),
                           [&](const TypeRoute& r) { return r.type == type; });
    if (it == plan->routes.end()) {
      plan->routes.push_back(TypeRoute{type, {}, {}});
      it = plan->routes.end() - 1;
    }
    it->negations.push_back(static_cast<int>(n));
  }
  for (const std::string& attr : query.partition_by) {
    plan->partition_by.push_back(Symbol::intern(attr));
  }
  // A query whose WHERE ties every variable on one attribute matches only
  // events that agree on it: partitioning the stacks by it finds the same
  // matches while each construction walks one partition's events, not the
  // window's (SASE's partitioned stacks). The conjuncts stay, so an event
  // without the attribute (a partition of its own) still matches nothing.
  // Only under skip_till_any_match, which looks at no neighbouring event.
  if (plan->partition_by.empty() && query.strategy == pattern::Strategy::kSkipTillAnyMatch &&
      query.variables.size() > 1) {
    for (const std::string& attr : pattern::comparedAttributes(query)) {
      if (!pattern::firstUntiedVariable(query, attr)) {
        plan->partition_by.push_back(Symbol::intern(attr));
        break;
      }
    }
  }
  if (!plan->has_kleene) {
    for (int k = 1; k <= m; ++k) plan->fixed_element_ends.push_back(static_cast<uint32_t>(k));
  }
  if (query.returns) {
    auto r = pattern::compileReturn(*query.returns, plan->layout);
    if (!r) return r.status();
    plan->returns = std::make_shared<const pattern::CompiledReturn>(std::move(r).value());
  }
  plan->state_shape = stateShapeOf(*plan);
  return PlanPtr(std::move(plan));
}

Composer::Composer(PlanPtr plan)
    : plan_(std::move(plan)),
      type_(plan_->returns ? plan_->returns->type : Symbol::intern("Match")) {}

EventPtr Composer::compose(const plugin::Match& match) const {
  std::vector<pattern::SlotBinding> bindings(plan_->layout.size());
  std::vector<const Event*> events;
  events.reserve(match.size());
  for (size_t i = 0; i < match.size(); ++i) events.push_back(match.event(i).get());
  EventBuilder builder(type_);
  size_t begin = 0;
  for (size_t k = 0; k < match.elementCount(); ++k) {
    const size_t count = match.elementEvents(k).size();
    const ElementPlan& e = plan_->elements[k];
    if (e.slot >= 0) {
      pattern::SlotBinding& b = bindings[e.slot];
      if (e.kleene) {
        b.events = std::span<const Event* const>(events.data() + begin, count);
      } else {
        b.event = events[begin];
      }
    }
    begin += count;
  }
  for (size_t i = 0; i < match.size(); ++i) builder.constituent(match.event(i));
  const double probability = match.probability();
  builder.probability(probability);
  if (plan_->returns) plan_->returns->apply(bindings, probability, builder);
  return builder.build();
}

}  // namespace cepbus::plugins::nfa
