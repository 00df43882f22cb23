#include "bus/core/plugin/engine_choice.h"

namespace cepbus::plugin {
namespace {

std::string countOf(size_t n) { return std::to_string(n) + (n == 1 ? " pattern" : " patterns"); }

// The sentence of the rule that put the preferred engine first.
std::string ruleFor(size_t patterns) {
  if (patterns < kMergeFromPatterns) {
    return "auto: " + countOf(patterns) + ", one NFA per pattern below " +
           countOf(kMergeFromPatterns);
  }
  return "auto: " + countOf(patterns) + ", merged Petri net from " + countOf(kMergeFromPatterns);
}

}  // namespace

std::vector<std::string_view> autoCandidates(size_t patterns) {
  if (patterns < kMergeFromPatterns) return {"nfa", "petri", "algebra", "join"};
  return {"petri", "nfa", "algebra", "join"};
}

Result<EngineChoice> chooseEngine(size_t patterns, const EngineProbe& probe) {
  std::string refusals;
  for (std::string_view engine : autoCandidates(patterns)) {
    const Status accepted = probe(engine);
    if (accepted) {
      EngineChoice choice{std::string(engine), ruleFor(patterns)};
      if (!refusals.empty()) choice.reason += refusals + "; " + choice.engine + " runs it";
      return choice;
    }
    refusals += "; " + std::string(engine) + " refuses: " + accepted.message();
  }
  return Status::invalidArgument("engine auto: no engine runs the " +
                                 std::string(patterns == 1 ? "query" : "patterns") + refusals);
}

}  // namespace cepbus::plugin
