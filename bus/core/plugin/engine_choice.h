#pragma once

// engine="auto": which engine runs a query or a set of queries.
//
// The rule (docs/engines.md, "Choosing an engine: auto"): for a few patterns
// one NFA detector per pattern (nfa) is fastest; from kMergeFromPatterns
// patterns on, the petri engine's merged net, which shares the work of
// patterns with common parts, is. Those two are tried first in that order,
// then algebra (which alone runs its own operators and CONTEXT recent), then
// join (which alone joins uncertain streams). What an engine accepts is not
// listed here: each candidate is asked, in order, whether it runs the
// queries (its DetectorFactory::create refuses what it cannot run), and the
// first that accepts is chosen. So the rule stays right when an engine
// learns a construct, and auto never picks an engine that would refuse.
//
// Thread safety: chooseEngine() is reentrant; it calls `probe` on the
// caller's thread.

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/status.h"

namespace cepbus::plugin {

// The engine name that asks for the choice.
inline constexpr std::string_view kAutoEngine = "auto";

// From this many patterns on, auto prefers the merged Petri net to one NFA
// per pattern: the crossover of tests/bench/engine_sweep.py (see
// docs/engines.md for its table).
inline constexpr size_t kMergeFromPatterns = 2;

// The engines auto asks for a set of `patterns` queries, best first.
std::vector<std::string_view> autoCandidates(size_t patterns);

// The engine auto picked and why, for people: the log, /api/queries,
// `cepbus match`. E.g. {"petri", "auto: 40 patterns, merged net from 2"}.
struct EngineChoice {
  std::string engine;
  std::string reason;
};

// Asks whether `engine` runs the queries: OK when it accepts, else why not
// (its refusal, or why its plugin cannot be loaded). A probe may keep what
// it made for an accepting engine, so the caller builds the detector once.
using EngineProbe = std::function<Status(std::string_view engine)>;

// Probes autoCandidates(patterns) in order and returns the first that
// accepts, with the reason: the rule that preferred it, and each refusal of
// a preferred engine it passed over. InvalidArgument naming every
// candidate's refusal when none accepts.
Result<EngineChoice> chooseEngine(size_t patterns, const EngineProbe& probe);

}  // namespace cepbus::plugin
