#pragma once

// CepService: the CEP service engine. It hosts the queries of one service
// unit: the queries that can share a detector consume their input addresses
// through one broker endpoint and feed one detector (created by the plugin
// of their engine, DetectorFactory::createMany for several) through a SEDA
// stage of its own; each match is published as its own query's composite
// event — the type and attributes of that query's RETURN clause — on that
// query's output address, where any subscriber, another query included,
// consumes it (hierarchical queries).
//
// Descriptor: <service-unit type="cep"> with one or more <query name engine
// input output> (options and text inside) and an optional param `capacity`
// (the queue capacity of each detector's stage, default 4096) and
// `batch_size` (the most events a detector's worker hands it at once,
// default 64; 1 feeds them one by one). A query naming engine "nfa" uses
// plugin "nfa"; the Bus loads the descriptor's plugins before it creates
// services, so the plugin is usually loaded already.
//
// Shared detectors. The queries given in one call (the unit's queries at
// deployment, one addQueries() call at run time) are planned together by
// the detection host (bus/host/detection/planner.h, which says the rule):
// they share a detector when they see the same events the same way — the
// same input addresses, the same options apart from output_qos and
// late_output (engine options and max_delay go to the one detector; flush_when_idle and run_inline
// drive its stage), the same engine — and the queries saying engine="auto"
// are decided as a set, split only where the preferred engine refuses some
// of them. The option share_detector=false keeps a query on a detector of
// its own (a costly query then has a thread to itself). The grouping and
// auto's choice are logged ("queries q1..q40 (40): engine petri (auto: 40
// patterns, merged Petri net from 2 patterns), one detector on in (endpoint
// ...)"), and so is an engine that runs each query of a set but cannot share
// a detector between them.
//
// Queries added by a later call (addQuery() of a query at run time) never
// join an existing detector: a detector's state (partial matches) belongs
// to the stream it has seen, and rebuilding it would lose its queries'
// partial matches. Removing a query that shares its detector mutes it
// behind the events already queued (which count for it, as the drained
// stage of a query of its own): the detector is flushed (its pending
// matches are published; what the slack holds back stays held), the
// query's later matches are dropped and its pattern keeps running until its
// last sharer is removed, which stops the detector as for a query of its
// own.
//
// Editing a query at run time (replaceQuery(), the admin API's PUT) keeps
// its detector's endpoint and stage and swaps the detection behind the
// events already queued, its state carried over when the edit allows it,
// else with the replaced version beside it until its WITHIN has passed
// (cep_detection.h says how; docs/checkpoints.md what each edit recovers).
//
//   publisher --broker--> endpoint --offer--> stage (1 worker: a detector
//     is single-threaded) --> detection --match of query i--> query i's
//       composite event --broker.publish--> query i's output address
//                                       \--late event--> each query's late
//       address (option late_output, default "<query>.late"), as it came
//
// The pieces: cep_query.h (a query: its options, output and registry
// entry), cep_detection.h (a detection fed by its endpoint and stage, and
// its output backlog), this file (the unit's queries and their life cycle).
//
// A detector of one query consumes through the endpoint
// "<assembly>.<unit>/<query>"; a shared one through
// "<assembly>.<unit>/shared-<n>:<first query>..<last query>".
//
// Batches: the worker hands the detector every event it took from the queue
// at once (Detector::onEvents, under one lock), at most batch_size of them,
// and never waits to fill a batch: under light load a batch is one event,
// under a burst it is what queued up while the detector was busy. A flush
// request queued between events splits the batch there. The detector
// reports only the first error of a call, so a batch with refused events
// counts one error; an engine that throws leaves the rest of its batch
// unconsumed (logged with the batch's ts range and counted as one error).
//
// Sparse input: a detector that batches (the nfa engine's batched
// construction) would hold a match until its next batch boundary, which on a
// quiet stream may never come. So whenever a detector's queue runs empty
// after a batch, the service flushes it: under load it batches, when
// the input pauses it reports at once. A pause is not the end of the
// stream: the events the `slack` option holds back stay held (a slower
// producer's event may still precede them). The query option
// `flush_when_idle=false` turns that off (matches then wait for the batch
// boundary, a flush() or stop()).
//
// Composite events go out best effort: a subscriber whose buffer is full
// refuses them and they are lost (counted, logged). The query option
// `output_qos=reliable` asks for reliable delivery instead: on a route that
// allows it (a <journal>), the reliable flow keeps each composite until its
// subscriber takes it, retrying while the buffer is full. A composite the
// bus refuses for now all the same (the flow holds back as much as its
// stage holds, a stage is full, the route is paused) is held by the query,
// with every later one behind it (services/cep/output_backlog.h), and its
// worker takes no more events until the bus took them: the query's queue
// fills and admission pushes back on whatever feeds it. A stop waits
// kStopDrain (5 s) for them, then gives them up (counted, logged).
//
// Event time. A query's event time on the bus is the slowest of its live
// sources (each publishing link; cep_detection.h says how): a source silent
// for longer than the query option `idle_timeout` (milliseconds, default
// 2000) holds nothing back, and with a declared time unit (<query
// time-unit>) event time follows the wall clock while every source is idle,
// so that a trailing negation's match or a window's result comes out with
// no more traffic. The service's ticker (kTickPeriod) asks each detection to
// move its time.
//
// The query option `run_inline=when_idle` lets the thread that delivers an
// event run the detector itself while its stage is idle (the
// stage's run-inline mode, stages/stage.h): on a light stream each event
// saves two thread hand-offs (to the worker and back to whoever sends the
// composite on), under load events queue for the worker as usual. The
// delivering thread (an AMQP connection's, a route stage's) then pays for
// the detection, so it is for queries whose detection is cheap; the default
// `never` keeps every detection on the detector's own thread.
//
// The service's registry entry "<assembly>.<unit>" lists its queries
// (metadata `queries`). Per detector, the registry holds the endpoint's
// entry (what the flows handed it). Per query, an entry
// "<assembly>.<unit>/<query>:detector" has metadata engine (the one that
// runs it), engine_choice (auto's reason, only under engine="auto"), input,
// output, text, endpoint (its detector's) and shared_by (how many queries its
// detector was built for, only when more than one); its counters are:
// delivered = events its detector consumed, failed = events it refused or
// threw on, rejected = events the stage refused under overload. The numbers
// are in the stats store (cep_stats.h): a scope "query" {name} per query,
// named by that entry (matches, publish failures, and the detector's
// partial matches and held output), and a scope "cep_detection" {name} per
// detector, named by its endpoint (consumed, errors, rejected, ran_inline,
// queued). Like QueryStats' consumed, errors, rejected, queued, ran_inline,
// output_held and partial_matches, all but matches and publish failures are
// the detector's, the same for every query sharing it.
//
// Errors at run time never stop a query: an event the detector refuses (out
// of order, malformed) or throws on is logged (logger "cepbus.cep", naming
// the query or queries) and counted; an event the full stage refuses is a
// fault of the delivery, which the flow reports to senders that asked for
// faults.
//
// Thread-safety: the life-cycle calls, addQueries(), addQuery() and
// removeQuery() may be called from any thread (they are serialized),
// concurrently with events in flight, but not from inside a delivery of a queueing flow (removing
// an endpoint waits for its queues). The accessors may be called from any thread. Ownership: owns
// its queries and detectors (with their stages, endpoints and registry entries); a detector keeps
// its plugin loaded.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/core/status.h"
#include "bus/host/descriptor/descriptor.h"
#include "bus/host/detection/planner.h"
#include "router/component_entry.h"
#include "services/cep/cep_config.h"
#include "services/cep/cep_query.h"
#include "services/query_host.h"
#include "services/service.h"
#include "stages/resource_controller.h"

namespace cepbus::services::cep {

class CepDetection;
class CepQuery;

class CepService final : public Service, public QueryHost {
 public:
  // How often the ticker asks each detection to move its event time: the
  // most a match decided by time alone comes out after it is due.
  static constexpr std::chrono::milliseconds kTickPeriod{100};

  CepService(CepServiceConfig config, ServiceContext& context);
  ~CepService() override;

  const std::string& name() const override { return config_.name; }
  // Starts every detector made so far: its stage, endpoint and subscriptions.
  Status start() override EXCLUDES(mu_);
  // Stops every detector, producers before consumers (one whose output
  // another one consumes goes first): unsubscribes it, lets its stage run
  // every queued event, then flushes it, so that every pending
  // match is published before the broker stops. The service cannot be
  // started again. Idempotent.
  void stop() override EXCLUDES(mu_);
  // Every service has started: checkpointed queries may publish what their
  // checkpoints release from now on (their durable subscribers are there).
  void activate() override EXCLUDES(mu_);
  // Asks every detector, on its own thread and after the events already
  // queued for it, to report its pending matches (producers first).
  void flush() override EXCLUDES(mu_);
  // True when no detector has an event (or a flush) queued or in detection.
  bool finished() const override EXCLUDES(mu_);
  QueryHost* queryHost() override { return this; }

  // Compiles `specs` (parse, plugin, detectors, shared where they can be,
  // see above) and, while the service runs, starts them at once. All or
  // none: InvalidArgument naming the descriptor file:line of every query
  // that cannot run, one per line; AlreadyExists when a query of that name
  // exists; Unavailable after stop().
  Status addQueries(std::span<const descriptor::QuerySpec> specs) EXCLUDES(mu_);
  // addQueries() of one query: it gets a detector of its own.
  Status addQuery(const descriptor::QuerySpec& spec) override;
  // A query with a detector of its own: unsubscribes it, drains its stage,
  // flushes its detector (its pending matches are published) and drops it.
  // A query sharing its detector is muted (see above). NotFound for an
  // unknown name.
  Status removeQuery(std::string_view query) override EXCLUDES(mu_);
  // Replaces a query with a detector of its own by an edit of it, in place:
  // its detector's endpoint and stage stay, and the worker swaps the
  // detection after the events queued before the edit
  // (CepDetection::replace()), carrying its state over when the edit
  // allows it. Rejected (naming why) for a query sharing its detector, a
  // checkpointed one, and an edit of its input or of how its events are fed
  // (flush_when_idle, run_inline, idle_timeout, time-unit). NotFound for an
  // unknown name; InvalidArgument as addQuery().
  Result<QueryEdit> replaceQuery(const descriptor::QuerySpec& spec) override EXCLUDES(mu_);

  // The query names, in the order they were added.
  std::vector<std::string> queries() const override EXCLUDES(mu_);
  std::vector<descriptor::QuerySpec> querySpecs() const override EXCLUDES(mu_);
  std::vector<descriptor::QuerySpec> unitQueries(
      const descriptor::ServiceAssembly& assembly,
      const descriptor::ServiceUnit& unit) const override;
  std::optional<QueryStats> stats(std::string_view query) const override EXCLUDES(mu_);
  // Matches reported by `query` so far; 0 for an unknown query.
  uint64_t matches(std::string_view query) const;
  // The model of the query's detector in `format` ("dot" or "json"; see
  // plugin::Detector::exportModel), e.g. the Petri net of an engine "petri"
  // query, the merged net of every query sharing it. Waits while the
  // detector's worker is inside it, so it sees the detector between two
  // events. NotFound for an unknown query;
  // InvalidArgument when the engine exports no model or not in `format`.
  Result<std::string> exportModel(std::string_view query, std::string_view format) const override
      EXCLUDES(mu_);
  // The endpoint the query consumes through (its detector's), or
  // "<assembly>.<unit>/<query>" for an unknown query.
  std::string endpointName(std::string_view query) const override EXCLUDES(mu_);

 private:
  // What build() and replaceQuery() read from their specs: each one's
  // planner request and settings (by spec), and the plan.
  struct Planned {
    std::vector<detection::QueryRequest> requests;
    std::vector<QuerySettings> settings;
    detection::Plan plan;
  };
  // InvalidArgument naming the descriptor line of each spec that cannot run.
  Result<Planned> planQueries(std::span<const descriptor::QuerySpec> specs) const;
  // The detections of the queries of one addQueries() call: planned
  // (bus/host/detection/planner.h), each group on a detection of its own.
  // `queries` gets the queries in the order of `specs`.
  Status build(std::span<const descriptor::QuerySpec> specs,
               std::vector<std::shared_ptr<CepQuery>>& queries,
               std::vector<std::shared_ptr<CepDetection>>& detections) REQUIRES(mu_);
  // Producers first: a detection whose output another one consumes precedes it.
  std::vector<std::shared_ptr<CepDetection>> stopOrder() const REQUIRES(mu_);
  void stopLocked() REQUIRES(mu_);
  void publishQueryList() REQUIRES(mu_);
  std::shared_ptr<CepQuery> findQuery(std::string_view name) const REQUIRES(mu_);

  // The ticker's tick: asks every detection to move its event time.
  bool tick() EXCLUDES(mu_);

  const CepServiceConfig config_;
  ServiceContext& context_;
  // Started by start(), stopped by stop() before it takes mu_ (a tick takes it).
  stages::PeriodicTask ticker_;

  mutable Mutex mu_;  // serializes the control calls
  bool started_ GUARDED_BY(mu_) = false;
  bool stopped_ GUARDED_BY(mu_) = false;
  bool activated_ GUARDED_BY(mu_) = false;
  // The service's own entry while started.
  std::shared_ptr<router::ComponentEntry> entry_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<CepQuery>> queries_ GUARDED_BY(mu_);         // in the order added
  std::vector<std::shared_ptr<CepDetection>> detections_ GUARDED_BY(mu_);  // in the order made
  uint64_t shared_made_ GUARDED_BY(mu_) = 0;                               // names shared endpoints
};

class CepServiceFactory final : public ServiceFactory {
 public:
  std::string_view type() const override { return "cep"; }
  // Compiles every query of the unit (reporting every one that fails, one
  // per line) so that a bad query is found at deployment, not at start.
  Result<std::unique_ptr<Service>> create(const descriptor::ServiceAssembly& assembly,
                                          const descriptor::ServiceUnit& unit,
                                          ServiceContext& context) const override;
};

}  // namespace cepbus::services::cep
