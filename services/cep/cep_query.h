#pragma once

// CepQuery: one query of the CEP service as the bus sees it — what its
// <query> says (read and checked by readQuery()), its composite events
// published on its output address, its registry entry
// "<assembly>.<unit>/<query>:detector" and its stats scope "query"
// (cep_stats.h), with its matches and publish failures. What it
// consumes and how belongs to its CepDetection (cep_detection.h), which
// other queries of the unit may share: the query is member `member` of it.
//
// Its QueryNameWatch sees every event its detection is handed, before the
// engine does: once the first kSampleEvents are in, it logs (once) the names
// the query uses that they never had, and it counts the events lacking an
// attribute its predicates read.
//
// Thread-safety: assign(), enter() and leave() are control calls (the
// service's); publish(), watch() and noteEdit() run on its detection's thread; lost(),
// stats() and matches() may be called from any thread. Ownership: held by the service
// while listed, by its detection, and weakly by its registry probe; owns its
// stats scope while entered, whose functions read it and its detection.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/base/stats/store.h"
#include "bus/core/plugin/detector.h"
#include "bus/core/status.h"
#include "bus/host/descriptor/descriptor.h"
#include "bus/host/detection/planner.h"
#include "bus/host/detection/query_name_watch.h"
#include "bus/host/time/source_clock.h"
#include "flows/abstract_flow.h"
#include "flows/exchange.h"
#include "router/component_entry.h"
#include "services/query_host.h"
#include "services/service.h"

namespace Poco {
class Logger;
}

namespace cepbus::services::cep {

class CepDetection;

// The option (and the cep unit's param) asking for checkpoints
// (query_checkpoints.h).
inline constexpr std::string_view kCheckpointIntervalOption = "checkpoint_interval";

// The options of a <query> the service takes itself (cep_service.h): what
// the planner keeps from the engine, and whether queries that differ in
// them may still share a detector.
std::vector<detection::ServiceOption> serviceOptions();

// What the service reads from a <query> for itself.
struct QuerySettings {
  bool flush_when_idle = true;
  bool run_inline = false;
  flows::Qos output_qos = flows::Qos::kBestEffort;
  // How often its detector's state is checkpointed (option
  // checkpoint_interval, milliseconds; 0: never), query_checkpoints.h.
  std::chrono::milliseconds checkpoint_interval{0};
  // Where its late events go (option late_output, default "<query>.late").
  std::string late_output;
  // How long a source of its events may be silent before it stops holding
  // the event time back (option idle_timeout, milliseconds).
  std::chrono::milliseconds idle_timeout = plugin::kDefaultIdleTimeout;
  // The unit of its input's ts (time-unit): with one, event time follows
  // the wall clock while every source is idle.
  pattern::TimeUnit ts_unit = pattern::TimeUnit::kNone;
};

// "<query name=\"q\">", how errors and log lines name a query.
std::string queryLabel(const descriptor::QuerySpec& spec);

// The planner's request for `spec` and the service's own settings, or
// InvalidArgument naming the descriptor line of what is wrong: no input, a
// bad address, an engine that is no name, a query text that does not parse
// (at its line in the file), a bad value of a service option.
Result<detection::QueryRequest> readQuery(const descriptor::QuerySpec& spec,
                                          QuerySettings& settings);

class CepQuery final {
 public:
  // `query` is `spec`'s text, parsed (readQuery()).
  CepQuery(const descriptor::QuerySpec& spec, const pattern::Query& query,
           const std::string& service, const QuerySettings& settings, ServiceContext& context);

  // The query as it was given (a redeploy compares it with its new text).
  const descriptor::QuerySpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  const std::string& output() const { return spec_.output; }
  const std::string& lateOutput() const { return late_output_; }
  const std::string& text() const { return spec_.text; }
  const std::vector<std::string>& inputs() const { return spec_.inputs; }
  // How far in event time after its newest event its state may still make
  // a match: its WITHIN, or its tumbling or sliding window's length;
  // nullopt when nothing bounds it (no WITHIN, a session window).
  std::optional<int64_t> horizon() const { return horizon_; }
  Symbol sender() const { return sender_; }
  CepDetection& detection() const { return *detection_; }
  size_t member() const { return member_; }
  // Set once its detection is made, before the query is listed. `engine_choice`
  // is engine auto's reason, empty when the descriptor named the engine.
  void assign(CepDetection* detection, size_t member, std::string engine,
              std::string engine_choice);

  // Adds the registry entry and the stats scope, whose detector numbers come
  // from `detection`.
  Status enter(const std::shared_ptr<CepQuery>& self,
               const std::shared_ptr<CepDetection>& detection);
  // Leaves the registry and the stats store. Idempotent.
  void leave();
  // One of its matches, on the detection's thread: its composite event goes
  // out on the output address (after the checkpoint that covers it, when
  // its detection is checkpointed).
  void publish(const plugin::Match& match);
  // Sends one of its composite events on: published, or held by its
  // detection while the bus refuses it for now (output_qos=reliable).
  // `redelivery`: it may have gone out before a crash (Exchange::redelivery).
  void send(EventPtr composite, bool redelivery);

  // A late event of its detection (more than the maximum delay behind), on
  // the detection's thread: it goes out, as it came, on the late address,
  // best effort; one the bus does not take counts as a publish failure.
  void publishLate(const EventPtr& event);
  // The bus will not take one of its composite events: counted and logged.
  void lost(const flows::SendOutcome& out);
  // Events its detection is about to run, on the detection's thread: see
  // the class comment.
  void watch(std::span<const EventPtr> events);

  // It replaced another query at run time (CepDetection::replace()), on
  // its detection's thread: stats() says so from then on.
  void noteEdit(QueryEdit edit) EXCLUDES(edit_mu_);

  QueryStats stats() const EXCLUDES(edit_mu_);
  uint64_t matches() const;
  // Takes over the counts of the query this one replaces at an edit, so that
  // its numbers go on (the detection's go on in CepDetection). On the
  // detection's thread, before this query publishes.
  void continueCountsOf(const CepQuery& replaced);

 private:
  // The engine that runs it into the registry entry, once engine auto's
  // trial decided (any thread).
  void publishEngine();
  // Registers its numbers in scope_.
  void reportStats();
  // lost() of `what` (for the log) to `address`.
  void lost(const flows::SendOutcome& out, const char* what, const std::string& address);

  const descriptor::QuerySpec spec_;
  const std::string service_;
  const std::string entry_name_;
  const Symbol output_symbol_;
  const std::string late_output_;
  const Symbol late_symbol_;
  const Symbol sender_;
  const flows::Qos output_qos_;
  const std::optional<int64_t> horizon_;
  ServiceContext& context_;
  Poco::Logger& log_;
  detection::QueryNameWatch names_;
  // What the versions this one replaced counted as missing attributes.
  std::atomic<uint64_t> missing_before_{0};
  CepDetection* detection_ = nullptr;  // owned by the service, alive while this query is listed
  size_t member_ = 0;
  std::string engine_;         // the one that runs it, as planned
  std::string engine_choice_;  // why auto chose engine_; empty when the descriptor named it
  // Set by enter() before any event can arrive, kept after leave() for
  // deliveries still in flight.
  std::shared_ptr<router::ComponentEntry> entry_;
  bool entered_ = false;  // control plane only

  std::atomic<uint64_t> publish_failures_{0};
  mutable Mutex edit_mu_;
  std::optional<QueryEdit> edit_ GUARDED_BY(edit_mu_);
  // While entered (control plane); last, so that its functions, which read
  // this query, are gone before the rest of it.
  stats::ScopePtr scope_;
};

}  // namespace cepbus::services::cep
