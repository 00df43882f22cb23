#include "services/cluster/query_runs.h"

namespace cepbus::services::cluster {

// One query's detector and the sink that reports its matches.
struct QueryRuns::Run final : plugin::MatchSink {
  Run(QueryRuns& runs, const CompiledQuery& query) : runs(runs), query(query) {}
  void onMatch(const plugin::Match& match) override { runs.listener_.onMatch(query, match); }
  Result<std::unique_ptr<plugin::GuardedDetector>> makeDetector() {
    return query.plugin->createDetector(query.engine, query.query, query.options, *this);
  }

  QueryRuns& runs;
  const CompiledQuery& query;
  std::unique_ptr<plugin::GuardedDetector> detector;
};

QueryRuns::QueryRuns(Timestamp slack, Listener& listener)
    : slack_(slack), listener_(listener), order_(std::in_place, slack) {}

QueryRuns::~QueryRuns() = default;

Result<std::unique_ptr<QueryRuns>> QueryRuns::create(std::span<const CompiledQuery> queries,
                                                     Timestamp slack, Listener& listener) {
  std::unique_ptr<QueryRuns> runs(new QueryRuns(slack, listener));
  for (const CompiledQuery& query : queries) {
    auto run = std::make_unique<Run>(*runs, query);
    auto detector = run->makeDetector();
    if (!detector) return detector.status();
    run->detector = std::move(*detector);
    runs->runs_.push_back(std::move(run));
  }
  return runs;
}

Status QueryRuns::push(EventPtr event) { return order_->push(std::move(event)); }

void QueryRuns::release() {
  while (EventPtr e = order_->popReady()) feed(e);
  flush();
}

void QueryRuns::drain() {
  while (EventPtr e = order_->popAny()) feed(e);
  flush();
}

void QueryRuns::restart() {
  for (auto& run : runs_) {
    // The queries were tried when compiled; should the engine refuse now,
    // the run keeps its detector rather than stop.
    if (auto detector = run->makeDetector()) run->detector = std::move(*detector);
  }
  order_.emplace(slack_);
}

void QueryRuns::feed(const EventPtr& event) {
  for (auto& run : runs_) {
    if (Status s = run->detector->onEvent(event); !s) listener_.onDetectorError(run->query, s);
  }
  listener_.onReleased(event->ts());
}

void QueryRuns::flush() {
  for (auto& run : runs_) {
    if (Status s = run->detector->flush(); !s) listener_.onDetectorError(run->query, s);
  }
}

}  // namespace cepbus::services::cluster
