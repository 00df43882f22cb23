#pragma once

// QueryHost: the queries a service runs, as the admin API sees them — list
// them with their live numbers, add one, remove one, export a detector's
// model. The CEP service engine is one (services/cep/cep_service.h); the
// admin API reaches it through Service::queryHost(), knowing nothing of how
// the queries are hosted.
//
// Thread-safety: every call may be made from any thread, concurrently with
// events in flight.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/plugin/detector.h"
#include "bus/core/plugin/engine_counters.h"
#include "bus/core/status.h"
#include "bus/host/descriptor/descriptor.h"

namespace cepbus::services {

// The live numbers of one query.
// A checkpointed query's checkpoints (the query option checkpoint_interval,
// services/cep/query_checkpoints.h); its detector's, the same for every
// query sharing it.
struct CheckpointStats {
  uint64_t written = 0;             // checkpoints stored
  uint64_t failed = 0;              // checkpoints the journal did not store
  uint64_t last_bytes = 0;          // the last one's state
  double last_ms = 0;               // the last one, from snapshot to commit
  uint64_t restored_bytes = 0;      // the state restored at start; 0: none
  double restore_ms = 0;            // reading and restoring it
  uint64_t restore_refused = 0;     // a stored one refused at start (the query started empty)
  uint64_t duplicates_dropped = 0;  // composites already published, not published again
  size_t held = 0;                  // composites waiting for their checkpoint
};

// A query replaced at run time by an edit of it (QueryHost::replaceQuery()).
struct QueryEdit {
  int64_t at_ms = 0;  // when the edit took effect: wall clock, ms since the Unix epoch
  // The edited query took over the replaced one's partial matches and
  // windows; when false it started empty, and `why_not` says why.
  bool carried_over = false;
  std::string why_not;
  // Not carried over: the replaced query runs on beside the edited one, for
  // the matches open at the edit, until event time passes this ts; nullopt
  // when it stopped at the edit (nothing open, or no WITHIN or window to
  // bound it).
  std::optional<int64_t> side_by_side_until;
  std::string from;  // the replaced query's text
};

struct QueryStats {
  uint64_t consumed = 0;          // events the detector consumed (refused ones included)
  uint64_t matches = 0;           // matches it reported
  uint64_t errors = 0;            // events it refused or threw on, failed flushes
  uint64_t rejected = 0;          // events its stage refused (overload)
  uint64_t publish_failures = 0;  // composite events the bus did not take (lost)
  // Composite events of output_qos=reliable queries the bus refused for now,
  // held until it takes them; the detector's.
  size_t output_held = 0;
  size_t queued = 0;        // events waiting in its stage or being detected
  uint64_t ran_inline = 0;  // events detected on the delivering thread (run_inline)
  // Events of the query's types that lacked an attribute its predicates
  // read (bus/host/detection/query_name_watch.h).
  uint64_t missing_attribute = 0;
  // Events that came more than the query's maximum delay behind the newest
  // one (bus/host/time/reorder.h): not matched, counted here (of consumed).
  uint64_t late = 0;
  // Matches its output control (EMIT FIRST|LAST EVERY, AFTER MATCH SKIP
  // PAST LAST EVENT) held back: found, not published (of matches' peers).
  uint64_t suppressed = 0;
  // The newest timestamp its detector was offered minus the maximum delay;
  // nullopt before the first event.
  std::optional<Timestamp> watermark;
  // The sources of its events (publishing links) its detector knows, and of
  // them those silent for longer than its idle timeout (not holding the
  // event time back); as of its detector's last batch or tick.
  size_t sources = 0;
  size_t idle_sources = 0;
  // What its detector holds (plugin::DetectorState) after its last call;
  // nullopt when the engine does not count.
  std::optional<plugin::DetectorState> partial_matches;
  // The engine's own counters (bus/core/plugin/engine_counters.h), such as
  // the window engine's groups and refused events; empty when it has none.
  plugin::EngineCounters engine_counters;
  // Only for a checkpointed query.
  std::optional<CheckpointStats> checkpoints;
  // Only for a query that replaced another at run time (its last edit); the
  // numbers above go on across edits.
  std::optional<QueryEdit> edited;
};

class QueryHost {
 public:
  virtual ~QueryHost() = default;

  // Compiles and starts one query. InvalidArgument naming the descriptor
  // location when it cannot run; AlreadyExists when a query of that name
  // exists; Unavailable once the host stopped.
  virtual Status addQuery(const descriptor::QuerySpec& spec) = 0;
  // Stops one query, publishing its pending matches first. NotFound for an
  // unknown name.
  virtual Status removeQuery(std::string_view query) = 0;
  // Replaces the running query of `spec`'s name by `spec`, losing no event
  // and detecting none twice, its state carried over when the edit allows
  // it. InvalidArgument as for addQuery(); NotFound for an unknown name;
  // Rejected when the query cannot be replaced at run time (why, in the
  // message); Unavailable once the host stopped.
  virtual Result<QueryEdit> replaceQuery(const descriptor::QuerySpec& spec) = 0;

  // The query names, in the order they were added.
  virtual std::vector<std::string> queries() const = 0;
  // The queries as they run now (edits included), in the same order.
  virtual std::vector<descriptor::QuerySpec> querySpecs() const = 0;
  // The queries of `unit` of `assembly` as this host would run them: with
  // what the unit and the assembly add to each (the folder its relative
  // paths resolve in, the unit's defaults), so that they compare with
  // querySpecs().
  virtual std::vector<descriptor::QuerySpec> unitQueries(
      const descriptor::ServiceAssembly& assembly, const descriptor::ServiceUnit& unit) const = 0;
  // nullopt for an unknown query (removed meanwhile).
  virtual std::optional<QueryStats> stats(std::string_view query) const = 0;
  // The endpoint the query consumes its input through.
  virtual std::string endpointName(std::string_view query) const = 0;
  // The model of the query's detector in `format` ("dot" or "json"; see
  // plugin::Detector::exportModel). NotFound for an unknown query;
  // InvalidArgument when the engine exports no model or not in `format`.
  virtual Result<std::string> exportModel(std::string_view query,
                                          std::string_view format) const = 0;
};

}  // namespace cepbus::services
