#pragma once

// engine="auto": which engine runs a query or a set of queries.
//
// A window query (FROM ... WINDOW) goes to the window engine, the only one
// that runs windows. For patterns, the rule (docs/engines.md, "Choosing an engine: auto"), as
// tests/bench/engine_sweep.py measures it: from kMergeFromPatterns patterns
// on, the petri engine's merged net, which shares the work of patterns with
// common parts, is fastest. For a single pattern it depends on where the
// pattern is selective: when a predicate over the first variable alone
// narrows which events can start a match (`a.x = 3`), one Petri net is
// fastest (its first transition drops the others before any partial match
// exists); otherwise one NFA is (its stacks hold every candidate and
// construction pays only for complete sequences). Those two are tried first
// in that order, then algebra (which alone runs its own operators and
// CONTEXT recent), then join (which alone joins uncertain streams). What an engine accepts is not
// listed here: each candidate is asked, in order, whether it runs the
// queries (its DetectorFactory::create refuses what it cannot run), and the
// first that accepts is chosen. So the rule stays right when an engine
// learns a construct, and auto never picks an engine that would refuse.
//
// Thread safety: chooseEngine() is reentrant; it calls `probe` on the
// caller's thread.

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/pattern/ast.h"
#include "bus/core/status.h"

namespace cepbus::plugin {

// The engine name that asks for the choice.
inline constexpr std::string_view kAutoEngine = "auto";

// From this many patterns on, auto prefers the merged Petri net to one NFA
// per pattern: the crossover of tests/bench/engine_sweep.py (see
// docs/engines.md for its table).
inline constexpr size_t kMergeFromPatterns = 2;

// What the rule reads off a set of queries.
struct PatternSetShape {
  size_t patterns = 0;
  // Every pattern's first variable is narrowed by a WHERE conjunct that
  // mentions it alone (`a.x = 3`, `a.price > 100`).
  bool filtered_start = false;
  // One of the queries is a window query (FROM ... WINDOW): only the window
  // engine runs those, so it is the one candidate.
  bool windowed = false;
};

// The shape of a set of one or more queries.
PatternSetShape shapeOf(std::span<const pattern::Query* const> queries);

// The engines auto asks for a set of queries of `shape`, best first.
std::vector<std::string_view> autoCandidates(const PatternSetShape& shape);

// The engine auto picked and why, for people: the log, /api/queries,
// `cepbus match`. E.g. {"petri", "auto: 40 patterns, merged net from 2"}.
struct EngineChoice {
  std::string engine;
  std::string reason;
};

// The engines auto runs side by side with its pick, `prior`, on the first
// events, to keep the cheaper (TrialDetector): nfa and petri, the two whose
// order the rule above guesses from the text; none for the others, which
// auto picks only because nothing before them runs the queries.
std::vector<std::string_view> trialChallengers(std::string_view prior);

// Asks whether `engine` runs the queries: OK when it accepts, else why not
// (its refusal, or why its plugin cannot be loaded). A probe may keep what
// it made for an accepting engine, so the caller builds the detector once.
using EngineProbe = std::function<Status(std::string_view engine)>;

// Probes autoCandidates(shape) in order and returns the first that
// accepts, with the reason: the rule that preferred it, and each refusal of
// a preferred engine it passed over. InvalidArgument naming every
// candidate's refusal when none accepts.
Result<EngineChoice> chooseEngine(const PatternSetShape& shape, const EngineProbe& probe);

}  // namespace cepbus::plugin
