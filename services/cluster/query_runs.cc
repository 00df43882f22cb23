#include "services/cluster/query_runs.h"

namespace cepbus::services::cluster {

// One query's detection (its detector on the detection host, which the
// shared order feeds in time order already) and the sink that reports its
// matches.
struct QueryRuns::Run final : detection::DetectionSink {
  Run(QueryRuns& runs, const CompiledQuery& query) : runs(runs), query(query) {}
  void onMatch(size_t /*member*/, const plugin::Match& match) override {
    runs.listener_.onMatch(query, match);
  }
  Result<std::unique_ptr<detection::Detection>> makeDetection() {
    return detection::Detection::create(*query.recipe, *this);
  }

  QueryRuns& runs;
  const CompiledQuery& query;
  std::unique_ptr<detection::Detection> detection;
};

QueryRuns::QueryRuns(Timestamp max_delay, Listener& listener)
    : max_delay_(max_delay), listener_(listener), order_(std::in_place, max_delay) {}

QueryRuns::~QueryRuns() = default;

Result<std::unique_ptr<QueryRuns>> QueryRuns::create(std::span<const CompiledQuery> queries,
                                                     Timestamp max_delay, Listener& listener) {
  std::unique_ptr<QueryRuns> runs(new QueryRuns(max_delay, listener));
  for (const CompiledQuery& query : queries) {
    auto run = std::make_unique<Run>(*runs, query);
    auto detection = run->makeDetection();
    if (!detection) return detection.status();
    run->detection = std::move(*detection);
    runs->runs_.push_back(std::move(run));
  }
  return runs;
}

Status QueryRuns::push(EventPtr event) { return order_->push(std::move(event)); }

void QueryRuns::release() {
  while (EventPtr e = order_->popReady()) feed(e);
  flush(/*end_of_stream=*/false);
}

void QueryRuns::drain() {
  while (EventPtr e = order_->popAny()) feed(e);
  flush(/*end_of_stream=*/true);
}

void QueryRuns::restart() {
  for (auto& run : runs_) {
    // The queries were tried when compiled; should the engine refuse now,
    // the run keeps its detection rather than stop.
    if (auto detection = run->makeDetection()) run->detection = std::move(*detection);
  }
  order_.emplace(max_delay_);
}

std::optional<Timestamp> QueryRuns::watermark() const {
  if (order_->newest() == INT64_MIN) return std::nullopt;
  return order_->watermark();
}

void QueryRuns::feed(const EventPtr& event) {
  for (auto& run : runs_) {
    if (Status s = run->detection->onEvent(event); !s) listener_.onDetectorError(run->query, s);
  }
  listener_.onReleased(event->ts());
}

void QueryRuns::flush(bool end_of_stream) {
  for (auto& run : runs_) {
    Status s = end_of_stream ? run->detection->flush() : run->detection->flushReleased();
    if (!s) listener_.onDetectorError(run->query, s);
  }
}

}  // namespace cepbus::services::cluster
