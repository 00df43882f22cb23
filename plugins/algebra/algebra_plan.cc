#include "plugins/algebra/algebra_plan.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "bus/core/pattern/printer.h"
#include "bus/core/pattern/window_query.h"

namespace cepbus::plugins::algebra {
namespace {

using pattern::PatternKind;
using pattern::PatternNode;

bool readsNeighboursOnly(const pattern::Expr& e) {
  switch (e.kind) {
    case pattern::ExprKind::kAttr:
      return e.ref.index == pattern::IndexKind::kCurrent ||
             e.ref.index == pattern::IndexKind::kPrevious;
    case pattern::ExprKind::kAggregate:
      return false;
    default:
      return (e.lhs == nullptr || readsNeighboursOnly(*e.lhs)) &&
             (e.rhs == nullptr || readsNeighboursOnly(*e.rhs));
  }
}

// A Kleene node's step check (Node::step_checks): it reads the run through
// b[i] and b[i-1] only.
bool isStepCheck(const pattern::Conjunct& c) {
  return c.iteration_slot && c.slots.size() == 1 && readsNeighboursOnly(*c.source);
}

// Whether a SEQ of 'Type var' and 'Type+ var[]' elements is one whose
// skip_till_next_match steering (the conjuncts that name an element and no
// later one: for a Kleene element its b[i] ones) reads nothing but the
// element itself, so that whether an event fills an element does not depend
// on the events bound before: for a 'Type var' element, conjuncts over that
// variable alone (checked on its atom), for a Kleene element its step
// checks. Then a run takes element k's event y after x iff no event between
// them fills k, which the detector tests as it pairs x with y. Not with
// PROBABILITY, whose pruning would hide such an event.
bool steersLocally(const pattern::Query& query) {
  // A run the probability bound pruned is not there to say which event a
  // run takes next.
  if (query.min_probability) return false;
  const pattern::BindingLayout layout = pattern::BindingLayout::forQuery(query);
  auto conjuncts = pattern::compileConjuncts(query.where, layout);
  if (!conjuncts) return false;  // compilePlan reports it
  const auto& elements = query.pattern->children;
  std::vector<int> element_of(layout.size(), -1);
  for (size_t e = 0; e < elements.size(); ++e) {
    if (elements[e]->var.empty()) continue;
    if (auto slot = layout.slotOf(elements[e]->var)) element_of[*slot] = static_cast<int>(e);
  }
  for (const pattern::Conjunct& c : *conjuncts) {
    int last = -1;
    for (size_t slot : c.slots) last = std::max(last, element_of[slot]);
    if (last < 0) continue;
    const PatternNode& element = *elements[static_cast<size_t>(last)];
    const size_t slot = *layout.slotOf(element.var);
    if (element.kind == PatternKind::kKleene) {
      // Aggregates, b[1] and b[last] do not steer a run.
      if (!c.iteration_slot || *c.iteration_slot != slot) continue;
      if (!isStepCheck(c)) return false;
    } else if (c.slot_mask != uint64_t{1} << slot) {
      return false;
    }
  }
  return true;
}

// Thrown inside the compiler only; compilePlan turns it into a Status.
struct CompileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string where(const PatternNode& p) {
  return "line " + std::to_string(p.pos.line) + ", column " + std::to_string(p.pos.column) + ": ";
}

class Compiler {
 public:
  Compiler(const pattern::Query& query, Plan& plan) : query_(query), plan_(plan) {}

  void run() {
    const int root = build(*query_.pattern, /*negated=*/false);
    if (query_.within) {
      // The clause bounds the whole match: ts(last) − ts(first) ≤ n.
      Node n;
      n.op = Op::kTimeRestriction;
      n.left = root;
      n.window = *query_.within;
      n.slot_mask = plan_.nodes[root].slot_mask;
      n.text = "WITHIN " + std::to_string(n.window);
      plan_.nodes.push_back(std::move(n));
    }
    setHorizons();
    placeWhere();
    if (plan_.semantics == Semantics::kUnrestricted) {
      for (Node& n : plan_.nodes) {
        if (n.kleene) splitStepChecks(n);
      }
    }
  }

 private:
  int add(Node n) {
    plan_.nodes.push_back(std::move(n));
    return static_cast<int>(plan_.nodes.size()) - 1;
  }

  int binary(Op op, int l, int r, const PatternNode& p) {
    Node n;
    n.op = op;
    n.left = l;
    n.right = r;
    n.slot_mask = plan_.nodes[l].slot_mask | plan_.nodes[r].slot_mask;
    n.text = pattern::toString(p);
    return add(std::move(n));
  }

  int atom(const PatternNode& p, bool negated) {
    Leaf leaf;
    leaf.type = Symbol::intern(p.type);
    if (!p.var.empty()) leaf.slot = static_cast<int>(*plan_.layout.slotOf(p.var));
    if (!negated) leaf.element = static_cast<int>(plan_.element_count++);
    plan_.leaves.push_back(leaf);
    Node n;
    n.op = Op::kAtom;
    n.type = leaf.type;
    n.leaf = static_cast<int>(plan_.leaves.size()) - 1;
    if (leaf.slot >= 0) n.slot_mask = uint64_t{1} << leaf.slot;
    n.text = p.type;
    return add(std::move(n));
  }

  // Left to right, operands before their operator: the post-order of P1's
  // decomposition. n-ary SEQ/AND/OR fold to the left.
  int build(const PatternNode& p, bool negated) {
    switch (p.kind) {
      case PatternKind::kEvent:
        return atom(p, negated);
      case PatternKind::kKleene: {
        if (p.star) {
          throw CompileError(where(p) +
                             "the algebra engine does not support the zero-or-more "
                             "Kleene element '" +
                             pattern::toString(p) +
                             "' (an instance has at least one event in P1), nor does any other "
                             "engine: write '" +
                             p.type + "+ " + p.var +
                             "[]', and the pattern without the element as a second query if it "
                             "may be empty");
        }
        const int a = atom(p, negated);
        Node n;
        n.op = Op::kIteration;
        n.kleene = true;
        n.left = a;
        // A Kleene variable names the iteration's instances, not one event:
        // predicates on it (b[i], aggregates) belong to the iteration node.
        n.slot_mask = plan_.nodes[a].slot_mask;
        plan_.nodes[a].slot_mask = 0;
        n.text = pattern::toString(p);
        return add(std::move(n));
      }
      case PatternKind::kNot:
        throw CompileError(where(p) +
                           "the algebra engine runs NOT(...) only as an element of SEQ(...)");
      case PatternKind::kSeq:
        return sequence(p, negated);
      case PatternKind::kAnd:
      case PatternKind::kOr: {
        const Op op = p.kind == PatternKind::kAnd ? Op::kAnd : Op::kOr;
        int acc = build(*p.children[0], negated);
        for (size_t i = 1; i < p.children.size(); ++i) {
          const int r = build(*p.children[i], negated);
          acc = binary(op, acc, r, p);
        }
        return acc;
      }
      case PatternKind::kConcat:
      case PatternKind::kConcurrent: {
        const int l = build(*p.children[0], negated);
        const int r = build(*p.children[1], negated);
        return binary(p.kind == PatternKind::kConcat ? Op::kConcat : Op::kConcurrent, l, r, p);
      }
      case PatternKind::kNegation: {
        const int l = build(*p.children[0], negated);
        // The negated operand contributes no events to a match.
        const int r = build(*p.children[1], /*negated=*/true);
        return binary(Op::kNegation, l, r, p);
      }
      case PatternKind::kIteration:
      case PatternKind::kTimeRestriction: {
        const int c = build(*p.children[0], negated);
        Node n;
        n.op = p.kind == PatternKind::kIteration ? Op::kIteration : Op::kTimeRestriction;
        n.left = c;
        n.window = p.window;
        n.slot_mask = plan_.nodes[c].slot_mask;
        n.text = pattern::toString(p);
        return add(std::move(n));
      }
      case PatternKind::kSelection:
      case PatternKind::kAggregation: {
        const int c = build(*p.children[0], negated);
        auto checks = pattern::compileConjuncts(p.predicate, plan_.layout);
        if (!checks) throw CompileError(checks.status().message());
        Node& operand = plan_.nodes[c];
        // A predicate over an iteration is tested on the iteration's own
        // instances (the unions), which is what selection(iteration(M), f)
        // means; keeping it on that node lets the detector search the runs.
        if (operand.op == Op::kIteration) {
          for (auto& k : *checks) operand.checks.push_back(std::move(k));
          operand.text = pattern::toString(p);
          return c;
        }
        if (p.kind == PatternKind::kAggregation) {
          throw CompileError(where(p) +
                             "the operand of AGG(...) must be an iteration ('Type+ "
                             "v[]'), found '" +
                             pattern::toString(*p.children[0]) + "'");
        }
        Node n;
        n.op = Op::kSelection;
        n.left = c;
        n.checks = std::move(checks).value();
        n.slot_mask = operand.slot_mask;
        n.text = pattern::toString(p);
        return add(std::move(n));
      }
    }
    throw CompileError(where(p) + "unknown pattern operator");
  }

  // SEQ folds to the left; NOT(C c) between elements x and y becomes a
  // negation of C over the gap between them on the fold that ends with y,
  // ((... ; x) ; y) − C, so that every negation sees the gap it names
  // (docs/engines.md, "algebra"). The parser keeps NOT(...) between two
  // positive elements.
  int sequence(const PatternNode& p, bool negated) {
    int acc = -1;
    int gap_leaf = -1;  // the leaf of the element before the pending negations
    std::vector<const PatternNode*> pending;
    for (const pattern::PatternPtr& child : p.children) {
      if (child->kind == PatternKind::kNot) {
        if (gap_leaf < 0) {
          throw CompileError(where(*child) +
                             "the algebra engine negates only the gap after an element "
                             "'Type var' or 'Type+ var[]': it refuses NOT(...) at the start "
                             "of a SEQ");
        }
        pending.push_back(child.get());
        continue;
      }
      if (!pending.empty() && child->kind != PatternKind::kEvent) {
        throw CompileError(where(*child) +
                           "the algebra engine runs NOT(...) inside SEQ only before an element "
                           "'Type var' (not before a Kleene element or an operator: the gap would "
                           "end at that element's first event, before the end at which the "
                           "negation checks it, and the negation keeps only the latest negated "
                           "event); the nfa engine runs it");
      }
      const int r = build(*child, negated);
      acc = acc < 0 ? r : binary(Op::kSeq, acc, r, p);
      for (const PatternNode* n : pending) {
        const int c = atom(*n, /*negated=*/true);
        const int neg = binary(Op::kNegation, acc, c, p);
        plan_.nodes[neg].gap_leaf = gap_leaf;
        plan_.nodes[neg].text = pattern::toString(p) + " without " + pattern::toString(*n);
        acc = neg;
      }
      pending.clear();
      gap_leaf = child->kind == PatternKind::kEvent || child->kind == PatternKind::kKleene
                     ? plan_.nodes[lastAtom(r)].leaf
                     : -1;
    }
    if (!pending.empty()) {
      throw CompileError(where(*pending.front()) +
                         "the algebra engine negates only the gap before an element: it "
                         "refuses NOT(...) at the end of a SEQ");
    }
    return acc;
  }

  // The atom under an element's node (an iteration's operand).
  int lastAtom(int node) const {
    while (plan_.nodes[node].op != Op::kAtom) node = plan_.nodes[node].left;
    return node;
  }

  void setHorizons() {
    for (size_t i = plan_.nodes.size(); i-- > 0;) {
      Node& n = plan_.nodes[i];
      if (n.op == Op::kTimeRestriction) n.horizon = std::min(n.horizon, n.window);
      for (int c : {n.left, n.right}) {
        if (c >= 0) plan_.nodes[c].horizon = std::min(plan_.nodes[c].horizon, n.horizon);
      }
    }
  }

  // Each conjunct goes to the first node in post-order binding all its
  // slots: the lowest common ancestor of its variables.
  void placeWhere() {
    auto conjuncts = pattern::compileConjuncts(query_.where, plan_.layout);
    if (!conjuncts) throw CompileError(conjuncts.status().message());
    uint64_t negated_mask = 0;
    for (const Leaf& l : plan_.leaves) {
      if (l.element < 0 && l.slot >= 0) negated_mask |= uint64_t{1} << l.slot;
    }
    for (auto& c : *conjuncts) {
      if ((c.slot_mask & negated_mask) != 0 && (c.slot_mask & ~negated_mask) != 0) {
        const int neg = negationChecking(c.slot_mask, negated_mask);
        if (neg < 0) {
          throw CompileError("WHERE conjunct '" + pattern::toString(*c.source) +
                             "' relates a negated operand to what its negation cannot see: an "
                             "element after the gap it negates, or another negated operand (the "
                             "algebra engine checks a negation when its gap closes); the nfa "
                             "engine runs it");
        }
        plan_.nodes[static_cast<size_t>(neg)].negation_checks.push_back(std::move(c));
        continue;
      }
      size_t at = plan_.root();
      for (size_t i = 0; i < plan_.nodes.size(); ++i) {
        if ((plan_.nodes[i].slot_mask & c.slot_mask) == c.slot_mask && c.slot_mask != 0) {
          at = i;
          break;
        }
      }
      plan_.nodes[at].checks.push_back(std::move(c));
    }
  }

  // The negation node that can check a conjunct over the slots `mask`: its
  // negated operand binds the conjunct's negated slots and its left operand
  // every other one. -1 when none can: the conjunct names an element bound
  // only after the negation's gap has closed.
  int negationChecking(uint64_t mask, uint64_t negated_mask) const {
    for (size_t i = 0; i < plan_.nodes.size(); ++i) {
      const Node& n = plan_.nodes[i];
      if (n.op != Op::kNegation) continue;
      const uint64_t left = plan_.nodes[static_cast<size_t>(n.left)].slot_mask & ~negated_mask;
      const uint64_t right = plan_.nodes[static_cast<size_t>(n.right)].slot_mask;
      if ((mask & negated_mask & ~right) == 0 && (mask & ~negated_mask & ~left) == 0) {
        return static_cast<int>(i);
      }
    }
    return -1;
  }

  // Moves the conjuncts of Kleene node n that read its run only through
  // b[i] and b[i-1] into n.step_checks (Node::step_checks).
  static void splitStepChecks(Node& n) {
    std::vector<pattern::Conjunct> whole;
    for (pattern::Conjunct& c : n.checks) {
      if (isStepCheck(c)) {
        n.step_checks.push_back(std::move(c));
      } else {
        whole.push_back(std::move(c));
      }
    }
    n.checks = std::move(whole);
  }

  const pattern::Query& query_;
  Plan& plan_;
};

// Recent semantics keeps one instance per end at every level; a predicate
// over an iteration then has to search the operand's runs, which needs a
// bound on how far back a run may start.
void checkRecentBounds(const Plan& plan) {
  if (plan.semantics != Semantics::kRecent) return;
  for (const Node& n : plan.nodes) {
    if (n.op == Op::kIteration && !n.checks.empty() && n.horizon == kNoHorizon) {
      throw CompileError("CONTEXT recent: the predicate on iteration '" + n.text +
                         "' needs a time bound (a WITHIN clause or an enclosing WITHIN(e, n)) so "
                         "that the runs it searches stay bounded");
    }
  }
}

}  // namespace

Result<std::shared_ptr<const Plan>> compilePlan(const pattern::Query& query,
                                                const plugin::DetectorOptions& options) {
  if (Status w = pattern::requirePatternQuery(query, "algebra"); !w) return w;
  Status s = options.checkKnown(plugin::StateCaps::kOptionNames, "algebra");
  if (!s) return s;
  auto caps = plugin::StateCaps::parse(options);
  if (!caps) return caps.status();
  if (query.variables.size() > 64) {
    return Status::invalidArgument("the algebra engine supports at most 64 variables");
  }
  auto plan = std::make_shared<Plan>();
  plan->semantics = query.context == pattern::Context::kUnrestricted ? Semantics::kUnrestricted
                                                                     : Semantics::kRecent;
  plan->min_probability = query.min_probability.value_or(0);
  plan->strict = query.strategy == pattern::Strategy::kStrictContiguity && runsNatively(query);
  plan->next_match = query.strategy == pattern::Strategy::kSkipTillNextMatch && runsNatively(query);
  plan->layout = pattern::BindingLayout::forQuery(query);
  plan->caps = *caps;
  try {
    Compiler(query, *plan).run();
    checkRecentBounds(*plan);
  } catch (const CompileError& e) {
    return Status::invalidArgument(e.what());
  }
  for (size_t i = 0; i < plan->nodes.size(); ++i) {
    const Node& n = plan->nodes[i];
    if (n.op != Op::kAtom) continue;
    auto it = std::find_if(plan->routes.begin(), plan->routes.end(),
                           [&](const auto& r) { return r.first == n.type; });
    if (it == plan->routes.end()) {
      plan->routes.emplace_back(n.type, std::vector<int>{});
      it = plan->routes.end() - 1;
    }
    it->second.push_back(static_cast<int>(i));
  }
  if (query.returns) {
    auto r = pattern::compileReturn(*query.returns, plan->layout);
    if (!r) return r.status();
    plan->returns = std::make_shared<const pattern::CompiledReturn>(std::move(r).value());
  }
  return std::shared_ptr<const Plan>(std::move(plan));
}

std::vector<std::string> contextNotices(const pattern::Query& query) {
  if (query.context != pattern::Context::kUnspecified) return {};
  if (query.pattern->kind == pattern::PatternKind::kEvent) return {};
  return {
      "the algebra engine runs this query under CONTEXT recent (its default: at every operator, "
      "of the instances ending at one time only the latest-starting one is kept, before the "
      "WHERE conjuncts relating its variables are checked, so one that fails them is not "
      "replaced by an earlier one); a SEQ reports fewer matches than on the nfa and petri "
      "engines, possibly none; add CONTEXT unrestricted for every match"};
}

Status contextForStrategy(pattern::Query& query) {
  if (query.context == pattern::Context::kRecent) {
    return Status::invalidArgument(
        std::string("the algebra engine runs STRATEGY ") + pattern::strategyName(query.strategy) +
        " under CONTEXT unrestricted only: CONTEXT recent keeps one match per end time, not the "
        "ones the strategy selects; drop CONTEXT recent (the nfa engine runs every strategy, "
        "too)");
  }
  query.context = pattern::Context::kUnrestricted;
  return Status::ok();
}

bool runsNatively(const pattern::Query& query) {
  const bool strict = query.strategy == pattern::Strategy::kStrictContiguity;
  const bool next = query.strategy == pattern::Strategy::kSkipTillNextMatch;
  if (!strict && !next) return false;
  const PatternNode& p = *query.pattern;
  if (p.kind != PatternKind::kSeq) return false;
  const bool plain =
      std::all_of(p.children.begin(), p.children.end(), [](const pattern::PatternPtr& c) {
        return c->kind == PatternKind::kEvent || (c->kind == PatternKind::kKleene && !c->star);
      });
  return plain && (strict || steersLocally(query));
}

}  // namespace cepbus::plugins::algebra
