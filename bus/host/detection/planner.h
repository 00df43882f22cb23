#pragma once

// The detection host's planner: from the queries a host wants to run, each
// with its engine and options, to detection groups — which queries share one
// detector, the engine that runs it and why, and the recipe that makes it
// (detector_recipe.h). The CEP service plans a unit's queries (and each set
// added at run time), the cluster node its queries, `cepbus match` its
// --query or --patterns and `cepbus join` its join; each then runs a
// Detection (detection.h) per group.
//
// Options. A query's options are split here. The host's own — max_delay=D
// or its synonym slack=D, the time handling's (reorder.h) — are read and
// taken out; the names a service
// declares (PlanOptions::service_options: the CEP service's output_qos,
// flush_when_idle, ...) are left to it, unread; the rest go to the engine,
// whose factory refuses what it does not take.
//
// Sharing (PlanOptions::one_detector off). Queries share a detector when
// they see the same events the same way: both may share (QueryRequest::share),
// the same inputs (as a multiset, in any order), the same options apart from
// the service options it declares per query, and the same engine. Queries
// naming an engine share with the queries naming it; the queries saying
// engine "auto" are decided as a set (plugin::chooseEngine over their count
// and shape, so 40 of them go to the merged Petri net where one alone may go
// to the nfa engine), split only where the preferred engine refuses some of
// them: those it runs are decided again as a set, the others as a set of
// their own. So a query goes to a later engine (algebra, which reads a query
// without CONTEXT as recent) only when the earlier ones refuse it, never
// because another query of the set needs that engine. An auto set's engine
// then shares with the queries naming that engine. When an engine cannot
// build the shared detector although it runs each query alone, each gets its
// own (a warning says so).
//
// One detector (PlanOptions::one_detector on): every query in one group
// (`cepbus match --patterns`), with the first query's engine and options, no
// split; when that cannot be, the error is the engine's message, put at the
// query it names.
//
// Engine auto's trial (PlanOptions::trial): a group of auto queries only
// whose engine is nfa or petri, where the other runs the queries too, goes on
// trial against it (trial_detector.h). The probe of such an engine makes the
// trial's detector, so that each engine is built once: the group keeps what
// the planner made (DetectionGroup::made) for its first Detection.
//
// Errors. A query that cannot run is named at its `where`: in one InvalidArgument
// listing every such query, one per line in the order of the requests.
//
// Thread safety: plan() is reentrant (it loads plugins through the loader,
// which is thread-safe).

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/pattern/ast.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"
#include "bus/host/detection/detector_recipe.h"
#include "bus/host/detection/trial_detector.h"
#include "bus/host/loader/plugin_loader.h"

namespace cepbus::detection {

// One query a host wants to run.
struct QueryRequest {
  // Distinct within one plan (a detector of several labels its matches by
  // name); may be empty for a single query.
  std::string name;
  pattern::Query query;             // parsed by the host, which knows where its text came from
  std::string engine;               // an engine name, or plugin::kAutoEngine
  plugin::DetectorOptions options;  // as written (host, service and engine options)
  std::vector<std::string> inputs;  // what it consumes: for sharing only
  // Where the query was written, opening each error about it ("file:12:
  // <query name=\"q\">", "--query", "patterns.txt:3 (pattern 'q')"); empty
  // for none.
  std::string where;
  bool share = true;  // may share a detector with the others
};

// An option name a service takes itself; the planner keeps it from the
// engine without reading it.
struct ServiceOption {
  std::string_view name;
  // Whether queries whose values differ may still share a detector (an
  // option about each query's own output); otherwise they must agree.
  bool per_query = false;
};

struct PlanOptions {
  bool one_detector = false;
  // Each query's matches are labelled with its name in the engine too: a
  // detector of one query is made as one of several (createMany()), as
  // `cepbus match --patterns` wants for its output and its --export.
  bool named_patterns = false;
  bool trial = true;  // engine auto's trial between nfa and petri
  std::vector<ServiceOption> service_options;
  plugin::TrialLimits trial_limits;
};

// Queries that run in one detector.
struct DetectionGroup {
  std::string engine;  // the engine that runs it (engine auto's pick)
  // Why engine auto picked it (with the trial's description when it goes on
  // trial), for the members that asked for auto; empty when none did.
  std::string reason;
  std::vector<size_t> members;  // indices of their requests, ascending
  DetectorRecipe recipe;
  // The detector the planner made while choosing, for the first Detection
  // of the group (Detection::create() takes it).
  std::optional<MadeDetector> made;
};

struct Plan {
  std::vector<DetectionGroup> groups;
  // What a host should log: engines that run each query of a set but could
  // not share a detector between them.
  std::vector<std::string> warnings;
};

// Plans `requests` (at least one) with plugins from `loader`.
Result<Plan> plan(std::span<const QueryRequest> requests, const PlanOptions& options,
                  plugin::PluginLoader& loader);

// "a", "a, b, c" or "a..z (40)": queries named in a log line.
std::string namesOf(const std::vector<std::string>& names);

}  // namespace cepbus::detection
