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

PartitionTime partitionTime(const ClusterSpec& spec) {
  return PartitionTime{spec.max_delay, std::chrono::milliseconds(spec.source_idle_timeout_ms),
                       spec.ts_unit};
}

QueryRuns::QueryRuns(const PartitionTime& time, Listener& listener)
    : time_(time),
      listener_(listener),
      order_(std::in_place, time.max_delay),
      clock_(std::in_place, time.idle_timeout),
      wall_clock_(std::in_place, time.unit) {}

QueryRuns::~QueryRuns() = default;

Result<std::unique_ptr<QueryRuns>> QueryRuns::create(std::span<const CompiledQuery> queries,
                                                     const PartitionTime& time,
                                                     Listener& listener) {
  std::unique_ptr<QueryRuns> runs(new QueryRuns(time, listener));
  for (const CompiledQuery& query : queries) {
    auto run = std::make_unique<Run>(*runs, query);
    auto detection = run->makeDetection();
    if (!detection) return detection.status();
    run->detection = std::move(*detection);
    runs->runs_.push_back(std::move(run));
  }
  return runs;
}

Status QueryRuns::push(EventPtr event, Time now) {
  // The partition is the one source: a late event shows it is live too.
  clock_->heard(0, event->ts(), now);
  return order_->push(std::move(event));
}

void QueryRuns::release() {
  while (EventPtr e = order_->popReady()) feed(e);
  passTime();
  flush(/*end_of_stream=*/false);
}

void QueryRuns::tick(Time now, WallTime wall) {
  if (!wall_clock_->follows()) return;
  const std::optional<Timestamp> time = wall_clock_->eventTime(*clock_, now, wall);
  if (!time || *time <= order_->newest()) return;
  order_->advanceTo(*time);
  release();
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
  order_.emplace(time_.max_delay);
  clock_.emplace(time_.idle_timeout);
  wall_clock_.emplace(time_.unit);
  reported_ = INT64_MIN;
}

std::optional<Timestamp> QueryRuns::watermark() const {
  if (order_->newest() == INT64_MIN) return std::nullopt;
  return order_->watermark();
}

void QueryRuns::feed(const EventPtr& event) {
  for (auto& run : runs_) {
    if (Status s = run->detection->onEvent(event); !s) listener_.onDetectorError(run->query, s);
  }
  reported_ = event->ts();
  listener_.onReleased(reported_);
}

// Every event up to the watermark went to the detectors; one at it may
// still come. A detector already told of a later time (a fed event's) is
// told nothing.
void QueryRuns::passTime() {
  if (order_->newest() == INT64_MIN) return;
  const Timestamp watermark = order_->watermark();
  if (watermark <= reported_) return;
  for (auto& run : runs_) {
    if (Status s = run->detection->advanceTo(watermark); !s) {
      listener_.onDetectorError(run->query, s);
    }
  }
  reported_ = watermark;
  listener_.onReleased(watermark);
}

void QueryRuns::flush(bool end_of_stream) {
  for (auto& run : runs_) {
    Status s = end_of_stream ? run->detection->flush() : run->detection->flushReleased();
    if (!s) listener_.onDetectorError(run->query, s);
  }
}

}  // namespace cepbus::services::cluster
