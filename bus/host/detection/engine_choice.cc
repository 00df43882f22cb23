#include "bus/host/detection/engine_choice.h"

#include <algorithm>

namespace cepbus::plugin {
namespace {

std::string countOf(size_t n) { return std::to_string(n) + (n == 1 ? " pattern" : " patterns"); }

// Whether a WHERE conjunct mentions the query's first variable and nothing
// else: a filter that decides, event by event, whether a match may start.
bool filtersFirstVariable(const pattern::Query& q) {
  if (q.variables.empty() || q.variables.front().kind != pattern::VarKind::kSingle) return false;
  const std::vector<std::string> first{q.variables.front().name};
  const std::vector<pattern::ExprPtr> conjuncts = pattern::splitConjuncts(q.where);
  return std::any_of(conjuncts.begin(), conjuncts.end(),
                     [&](const pattern::ExprPtr& c) { return pattern::variablesOf(*c) == first; });
}

// The sentence of the rule that put the preferred engine first.
std::string ruleFor(const PatternSetShape& shape) {
  if (shape.windowed) return "auto: a window query (FROM ... WINDOW), the window engine";
  if (shape.patterns >= kMergeFromPatterns) {
    return "auto: " + countOf(shape.patterns) + ", merged Petri net from " +
           countOf(kMergeFromPatterns);
  }
  if (shape.filtered_start) {
    return "auto: " + countOf(shape.patterns) +
           " whose first variable a predicate of its own filters, one Petri net";
  }
  return "auto: " + countOf(shape.patterns) + " with no filter on its first variable, one NFA";
}

}  // namespace

PatternSetShape shapeOf(std::span<const pattern::Query* const> queries) {
  return PatternSetShape{queries.size(),
                         !queries.empty() && std::all_of(queries.begin(), queries.end(),
                                                         [](const pattern::Query* q) {
                                                           return filtersFirstVariable(*q);
                                                         }),
                         std::any_of(queries.begin(), queries.end(), [](const pattern::Query* q) {
                           return q->window.has_value();
                         })};
}

std::vector<std::string_view> autoCandidates(const PatternSetShape& shape) {
  if (shape.windowed) return {"window"};
  if (shape.patterns >= kMergeFromPatterns || shape.filtered_start) {
    return {"petri", "nfa", "algebra", "join"};
  }
  return {"nfa", "petri", "algebra", "join"};
}

std::vector<std::string_view> trialChallengers(std::string_view prior) {
  if (prior == "nfa") return {"petri"};
  if (prior == "petri") return {"nfa"};
  return {};
}

Result<EngineChoice> chooseEngine(const PatternSetShape& shape, const EngineProbe& probe) {
  std::string refusals;
  for (std::string_view engine : autoCandidates(shape)) {
    const Status accepted = probe(engine);
    if (accepted) {
      EngineChoice choice{std::string(engine), ruleFor(shape)};
      if (!refusals.empty()) choice.reason += refusals + "; " + choice.engine + " runs it";
      return choice;
    }
    refusals += "; " + std::string(engine) + " refuses: " + accepted.message();
  }
  return Status::invalidArgument("engine auto: no engine runs the " +
                                 std::string(shape.patterns == 1 ? "query" : "patterns") +
                                 refusals);
}

}  // namespace cepbus::plugin
