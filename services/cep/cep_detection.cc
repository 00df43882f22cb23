#include "services/cep/cep_detection.h"

#include <Poco/Logger.h>

#include <algorithm>

#include "bus/core/plugin/snapshot.h"
#include "bus/host/detection/composite_id.h"
#include "router/topic.h"
#include "services/cep/cep_query.h"
#include "services/cep/cep_stats.h"
#include "services/cep/query_checkpoints.h"

namespace cepbus::services::cep {
namespace {

// The stage item that asks the worker to flush the detection: an event no
// publisher can produce, recognised by identity.
const EventPtr& flushMarker() {
  static const EventPtr marker = EventBuilder(Symbol::intern("cepbus.flush")).build();
  return marker;
}

// The stage item that asks the worker to wait until the bus takes the
// composite events it refused for now (OutputBacklog), recognised by identity.
const EventPtr& retryMarker() {
  static const EventPtr marker = EventBuilder(Symbol::intern("cepbus.retry-output")).build();
  return marker;
}

// The stage item that asks the worker to move the event time (a tick of the
// service's ticker), recognised by identity.
const EventPtr& tickMarker() {
  static const EventPtr marker = EventBuilder(Symbol::intern("cepbus.tick")).build();
  return marker;
}

// The type of the stage items that ask the worker to run a control (mute
// a removed query, swap an edited one), each made for one and recognised
// by identity: a publisher may send an event of that type, which is then
// detected as any other.
Symbol controlType() {
  static const Symbol type = Symbol::intern("cepbus.control");
  return type;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

CepDetection::CepDetection(std::vector<std::shared_ptr<CepQuery>> members,
                           std::vector<std::string> inputs, const QuerySettings& settings,
                           const CepServiceConfig& config, ServiceContext& context)
    : members_(std::move(members)),
      live_(members_.size()),
      removed_(members_.size(), false),
      inputs_(std::move(inputs)),
      flush_when_idle_(settings.flush_when_idle),
      run_inline_(settings.run_inline),
      idle_timeout_(settings.idle_timeout),
      checkpoint_interval_(settings.checkpoint_interval),
      ts_unit_(settings.ts_unit),
      service_(config.name),
      capacity_(config.capacity),
      batch_size_(config.batch_size),
      context_(context),
      log_(Poco::Logger::get("cepbus.cep")),
      backlog_([&broker = context.broker](const flows::Exchange& e) { return broker.publish(e); },
               [this](const flows::Exchange& e, const flows::SendOutcome& out) {
                 if (auto it = senders_.find(e.sender); it != senders_.end()) it->second->lost(out);
               }),
      clock_(settings.idle_timeout),
      wall_clock_(settings.ts_unit) {
  for (const auto& q : members_) {
    outputs_.push_back(q->output());
    senders_.emplace(q->sender(), q);
  }
}

CepDetection::~CepDetection() = default;

void CepDetection::open(std::string endpoint) {
  endpoint_ = std::move(endpoint);
  label_ = (members_.size() == 1 ? "query " : "queries ") + endpoint_;
  stages::StageConfig stage;
  stage.name = "cep:" + endpoint_;
  stage.capacity = capacity_;
  stage.batch_size = batch_size_;
  // A detector is single-threaded and needs its events in arrival order:
  // one worker, and one cost class so that costs do not reorder them.
  stage.min_threads = 1;
  stage.max_threads = 1;
  stage.cost_thresholds.clear();
  stage.run_inline_when_idle = run_inline_;
  batch_.reserve(stage.batch_size);
  stage_ = std::make_unique<stages::Stage>(
      std::move(stage), [this](std::span<stages::StageItem> items) { return handle(items); });
}

bool CepDetection::consumes(const std::string& address) const {
  return std::any_of(inputs_.begin(), inputs_.end(), [&address](const std::string& input) {
    return router::topicMatches(input, address);
  });
}

Status CepDetection::start(const std::shared_ptr<CepDetection>& self) {
  if (started_ || stopped_) return Status::ok();
  started_ = true;
  // Before the first event can come: the stored state first, then what the
  // journal redelivers. Before the queries enter: their stats show it.
  openCheckpoints();
  for (size_t i = 0; i < members_.size(); ++i) {
    if (removed_[i]) continue;
    if (Status s = members_[i]->enter(members_[i], self); !s) {
      stop();
      return s;
    }
  }
  stage_->start();
  reportStats();
  Status added = context_.broker.addEndpoint(
      endpoint_,
      [self](const flows::Exchange& exchange, flows::DeliveryContext& context) {
        return self->consume(exchange, context);
      },
      service_);
  if (!added) {
    stop();
    return added;
  }
  endpoint_added_ = true;
  for (const std::string& input : inputs_) {
    auto id = context_.broker.subscribe(endpoint_, input);
    if (!id) {
      stop();
      return id.status();
    }
  }
  log_.debug("%s started: input %s", label_, joined(inputs_));
  return Status::ok();
}

void CepDetection::stop() {
  if (stopped_) return;
  stopped_ = true;
  // Composites the bus refuses for now get kStopDrain from here to go out,
  // however many events are still queued.
  give_up_at_.store((std::chrono::steady_clock::now() + kStopDrain).time_since_epoch().count(),
                    std::memory_order_release);
  // Removing the endpoint drops its subscriptions and drains the flows'
  // queues into the stage; stopping the stage then runs every queued event.
  // Stopping: there is nothing to do about an endpoint already gone.
  if (endpoint_added_) (void)context_.broker.removeEndpoint(endpoint_);
  if (stage_) stage_->stop();
  if (started_) {
    {
      // The stage's worker is joined; exportModel() may still come.
      MutexLock lock(detection_mu_);
      if (retiring_) retireIfDue(true);
      if (Status s = detection_->flush(); !s) failed("flush", s);
      if (checkpoints_) checkpoints_->finish(*detection_, clock_, detection_->stats().consumed);
    }
    awaitOutputs();
  }
  for (const auto& q : members_) q->leave();
  scope_.reset();
}

void CepDetection::reportStats() {
  namespace d = cep_detection_stats;
  scope_ = context_.registry.stats().scope(kCepDetectionSchema, {{"name", endpoint_}});
  scope_->counter(d::kConsumed, [this] { return current()->stats().consumed; });
  scope_->counter(d::kErrors, [this] { return current()->stats().errors; });
  scope_->counter(d::kRejected, [this] { return rejected_.load(std::memory_order_relaxed); });
  scope_->counter(d::kRanInline, [this] { return stage_->metrics().ran_inline; });
  scope_->gauge(d::kQueued,
                [this] { return static_cast<double>(pending_.load(std::memory_order_acquire)); });
}

stages::Admission CepDetection::offerControl(const EventPtr& marker) {
  pending_.fetch_add(1, std::memory_order_acq_rel);
  stages::StageItem item;
  item.event = marker;
  const stages::Admission admission = stage_->offer(std::move(item));
  if (admission == stages::Admission::kRejected) pending_.fetch_sub(1, std::memory_order_acq_rel);
  return admission;
}

bool CepDetection::onWorker(std::function<void()> run) {
  auto request = std::make_shared<Control>();
  request->marker = EventBuilder(controlType()).build();
  request->run = std::move(run);
  std::future<void> done = request->done.get_future();
  {
    MutexLock lock(controls_mu_);
    controls_.push_back(request);
  }
  if (offerControl(request->marker) == stages::Admission::kRejected) {
    // A full stage: run now, between two of the worker's batches.
    {
      MutexLock lock(controls_mu_);
      std::erase(controls_, request);
    }
    request->run();
    return true;
  }
  // Bounded: a worker waiting for the bus to take held composites gets to
  // the marker only then, and a control call must not hang on a stuck
  // subscriber.
  return done.wait_for(kStopDrain) != std::future_status::timeout;
}

void CepDetection::detach(size_t member) {
  const CepQuery& query = *members_[member];
  // Behind the events already queued, as for a query of its own whose stage
  // drains before it goes: what was delivered before the removal counts.
  // The query stays a member (alive) until it is muted.
  if (started_ && !stopped_) {
    if (!onWorker([this, member] { mute(member, true); })) {
      log_.warning(
          "%s: query %s removed while its detector waits for the bus to take its held "
          "composite events; it is muted when the detector gets there",
          label_, query.name());
    }
  } else {
    mute(member, false);
  }
  removed_[member] = true;
  --live_;
  log_.information(
      "%s: query %s removed; its pattern stays in the detector, muted, while %Lu other queries "
      "use it",
      label_, query.name(), static_cast<Poco::UInt64>(live_));
}

std::string CepDetection::whyNotReplaceable(const std::vector<std::string>& inputs,
                                            const QuerySettings& settings) const {
  if (members_.size() > 1) {
    return "it shares its detector with other queries (the option share_detector=false gives it "
           "one of its own)";
  }
  if (checkpoint_interval_.count() > 0 || settings.checkpoint_interval.count() > 0) {
    return "a checkpointed query (option checkpoint_interval) cannot be edited at run time yet";
  }
  if (inputs != inputs_) return "the edit changes its input";
  if (settings.flush_when_idle != flush_when_idle_ || settings.run_inline != run_inline_ ||
      settings.idle_timeout != idle_timeout_ || settings.ts_unit != ts_unit_) {
    return "the edit changes how its events are fed to its detector (the options "
           "flush_when_idle, run_inline, idle_timeout or its time-unit)";
  }
  return {};
}

Result<QueryEdit> CepDetection::replace(Edit edit) {
  outputs_.push_back(edit.query->output());
  // Shared with the worker, which may get there after this call gave up.
  auto shared = std::make_shared<Edit>(std::move(edit));
  auto outcome = std::make_shared<QueryEdit>();
  auto apply = [this, shared, outcome] {
    MutexLock lock(detection_mu_);
    *outcome = swap(*shared);
  };
  if (!started_ || stopped_) {
    apply();
  } else if (!onWorker(apply)) {
    log_.warning(
        "%s: query %s edited while its detector waits for the bus to take its held composite "
        "events; the edit is made when the detector gets there",
        label_, shared->query->name());
    return Status::unavailable(label_ +
                               ": its detector waits for the bus to take its held composite "
                               "events; the edit is made when it gets there");
  }
  return *outcome;
}

QueryEdit CepDetection::swap(Edit& edit) {
  QueryEdit record;
  record.at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  record.from = members_.front()->text();
  // What the events before the edit complete is the replaced query's: it
  // reports it before its state is taken (what the slack holds back stays
  // in the state, for the edited query).
  if (Status s = detection_->flushReleased(); !s) failed("flush", s);
  Result<std::string> state = detection::checkpointBytes(*detection_, identity_, 0);
  if (state) {
    Result<detection::RestoredCheckpoint> restored = detection::restoreCheckpointBytes(
        *state, "the state of " + label_, *edit.detection, edit.identity);
    record.carried_over = restored.isOk();
    if (!restored) {
      record.why_not = restored.status().message();
      // Never go on from half a state: a new detection, empty.
      Result<std::unique_ptr<detection::Detection>> fresh = edit.remake();
      if (fresh) {
        edit.detection = std::move(fresh).value();
      } else {
        record.why_not += "; and no new detection: " + fresh.status().message();
      }
    }
  } else {
    record.why_not = "engine '" + detection_->engine() +
                     "' cannot hand its state over: " + state.status().message();
  }
  if (!record.carried_over) {
    // One version at a time runs beside the edited one.
    if (retiring_) retireIfDue(true);
    const std::optional<int64_t> horizon = members_.front()->horizon();
    const Timestamp watermark = detection_->stats().watermark;
    if (horizon && watermark != INT64_MIN) {
      const Timestamp newest = watermark + detection_->maxDelay();
      record.side_by_side_until = newest + *horizon;
      retiring_ = Retiring{detection_, members_.front(), newest, newest + *horizon};
      if (!edit_published_) edit_published_.emplace(QueryCheckpoints::kPublishedWindow);
    } else if (Status s = detection_->flush(); !s) {
      // As for a removed query: the replaced one reports what it holds.
      failed("flush", s);
    }
  }
  {
    MutexLock current(current_mu_);
    const detection::DetectionStats before = detection_->stats();
    replaced_.consumed += before.consumed;
    replaced_.errors += before.errors;
    replaced_.late += before.late;
    replaced_.matches += detection_->matches(0);
    replaced_.suppressed += detection_->suppressed(0);
    detection_ = std::move(edit.detection);
  }
  remake_ = std::move(edit.remake);
  identity_ = std::move(edit.identity);
  edit.query->continueCountsOf(*members_.front());
  members_.front() = edit.query;
  senders_[edit.query->sender()] = edit.query;
  logged_evictions_ = 0;
  // A detection that starts empty has heard no time yet.
  if (Status s = advanceTime(); !s) failed("tick", s);
  edit.query->noteEdit(record);
  if (record.carried_over) {
    log_.notice("%s: query %s edited; its partial matches and windows carried over", label_,
                edit.query->name());
  } else if (record.side_by_side_until) {
    log_.notice(
        "%s: query %s edited; it starts empty (%s), the replaced version runs beside it for the "
        "matches open at the edit until event time %Ld",
        label_, edit.query->name(), record.why_not,
        static_cast<Poco::Int64>(*record.side_by_side_until));
  } else {
    log_.notice("%s: query %s edited; it starts empty: %s", label_, edit.query->name(),
                record.why_not);
  }
  return record;
}

void CepDetection::onRetiring(const std::function<Status(detection::Detection&)>& call) {
  feeding_retiring_ = true;
  const Status status = call(*retiring_->detection);
  feeding_retiring_ = false;
  // Its events are the edited detection's too, which counts and logs them.
  if (!status) log_.debug("%s: the replaced version refused a call: %s", label_, status.toString());
}

void CepDetection::retireIfDue(bool now) {
  if (!now && retiring_->detection->stats().watermark <= retiring_->until) return;
  // What it holds of the matches open at the edit comes out now, after what
  // the edited query holds: a match both found is the edited query's.
  if (Status s = detection_->flushReleased(); !s) failed("flush", s);
  onRetiring([](detection::Detection& d) { return d.flush(); });
  log_.notice("%s: the replaced version of query %s retired (event time past %Ld)", label_,
              retiring_->query->name(), static_cast<Poco::Int64>(retiring_->until));
  retiring_.reset();
}

std::shared_ptr<const detection::Detection> CepDetection::current() const {
  MutexLock lock(current_mu_);
  return detection_;
}

std::pair<std::shared_ptr<const detection::Detection>, CepDetection::Replaced>
CepDetection::currentAndReplaced() const {
  MutexLock lock(current_mu_);
  return {detection_, replaced_};
}

uint64_t CepDetection::matches(size_t member) const {
  const auto [detection, replaced] = currentAndReplaced();
  return detection->matches(member) + replaced.matches;
}

uint64_t CepDetection::suppressed(size_t member) const {
  const auto [detection, replaced] = currentAndReplaced();
  return detection->suppressed(member) + replaced.suppressed;
}

uint64_t CepDetection::late() const {
  const auto [detection, replaced] = currentAndReplaced();
  return detection->stats().late + replaced.late;
}

void CepDetection::mute(size_t member, bool flush) {
  MutexLock lock(detection_mu_);
  // A flush mid-stream is allowed (the detector takes more events after
  // it); what the slack holds back stays held for the queries that stay.
  if (flush) {
    if (Status s = detection_->flushReleased(); !s) failed("flush", s);
  }
  detection_->mute(member);
}

bool CepDetection::isControl(const EventPtr& event) {
  if (event == flushMarker() || event == retryMarker() || event == tickMarker()) return true;
  if (event->type() != controlType()) return false;
  MutexLock lock(controls_mu_);
  return std::any_of(controls_.begin(), controls_.end(),
                     [&event](const auto& c) { return c->marker == event; });
}

void CepDetection::openCheckpoints() {
  if (checkpoint_interval_.count() == 0) return;
  CheckpointSettings settings{endpoint_, label_, checkpoint_interval_, context_.journal_path,
                              identity_};
  checkpoints_ = std::make_unique<QueryCheckpoints>(std::move(settings), log_);
  MutexLock lock(detection_mu_);
  if (checkpoints_->restore(*detection_, clock_, members_)) return;
  // Never start from half a snapshot: a new detection, empty.
  auto fresh = remake_();
  if (!fresh) {
    log_.error("%s: cannot make a new detection after its checkpoint was refused: %s", label_,
               fresh.status().message());
    return;
  }
  MutexLock current(current_mu_);
  detection_ = std::move(fresh).value();
}

void CepDetection::checkpointIfDue(bool flushed) {
  if (!checkpoints_ ||
      !(flushed ? checkpoints_->pending() : checkpoints_->due(std::chrono::steady_clock::now()))) {
    return;
  }
  MutexLock lock(detection_mu_);
  checkpoints_->checkpoint(*detection_, clock_, detection_->stats().consumed);
}

void CepDetection::activate() {
  if (checkpoints_) checkpoints_->activate();
}

std::optional<CheckpointStats> CepDetection::checkpointStats() const {
  if (!checkpoints_) return std::nullopt;
  return checkpoints_->stats();
}

Status CepDetection::consume(const flows::Exchange& exchange, flows::DeliveryContext& context) {
  // Counted before the offer: the worker may detect the event before offer() returns.
  pending_.fetch_add(1, std::memory_order_acq_rel);
  // Its acknowledgement waits for the checkpoint that covers it; taken
  // before the offer, which may run the detection inline.
  if (checkpoints_) checkpoints_->delivered(exchange.event.get(), context);
  stages::StageItem item;
  item.event = exchange.event;
  item.reliable = exchange.qos == flows::Qos::kReliable;
  item.token = exchange.source;
  if (stage_->offer(std::move(item)) != stages::Admission::kRejected) return Status::ok();
  if (checkpoints_) checkpoints_->refused(exchange.event.get());
  pending_.fetch_sub(1, std::memory_order_acq_rel);
  const uint64_t n = rejected_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (worthLogging(n - 1, n)) {
    log_.warning("%s: its stage refused an event (%Lu so far): queue full or query stopped", label_,
                 static_cast<Poco::UInt64>(n));
  }
  return Status::rejected(label_ + ": queue full or query stopped");
}

bool CepDetection::requestFlush() {
  if (!started_ || stopped_) return true;
  return offerControl(flushMarker()) != stages::Admission::kRejected;
}

void CepDetection::requestTick() {
  if (!started_ || stopped_) return;
  const size_t sources = sources_.load(std::memory_order_relaxed);
  // A checkpointed detection ticks anyway: its worker stores a checkpoint
  // that falls due while its input is quiet.
  if (!checkpoints_ && (sources == 0 || (sources == 1 && ts_unit_ == pattern::TimeUnit::kNone))) {
    return;
  }
  if (tick_queued_.exchange(true, std::memory_order_acq_rel)) return;
  ends_before_tick_.store(flows::sourceEnds().count(), std::memory_order_release);
  // A full stage refuses it: the events queued move the time anyway.
  if (offerControl(tickMarker()) == stages::Admission::kRejected) {
    tick_queued_.store(false, std::memory_order_release);
  }
}

void CepDetection::readSourceEnds() {
  const uint64_t due = ends_before_tick_.load(std::memory_order_acquire);
  if (due <= ends_read_) return;
  const auto now = std::chrono::steady_clock::now();
  // Ends the log no longer keeps (ends.lost): those sources go idle in their time.
  const flows::SourceEnds::Ends ends = flows::sourceEnds().read(ends_read_, due);
  for (const uint64_t source : ends.sources) clock_.ended(source, now);
  ends_read_ = due;
}

Status CepDetection::advanceTime() {
  const auto now = std::chrono::steady_clock::now();
  sources_.store(clock_.sources(), std::memory_order_relaxed);
  idle_sources_.store(clock_.idleSources(now), std::memory_order_relaxed);
  const std::optional<Timestamp> time =
      wall_clock_.eventTime(clock_, now, std::chrono::system_clock::now());
  if (!time) return Status::ok();
  Status status = detection_->advanceTo(*time);
  if (retiring_) {
    onRetiring([&time](detection::Detection& d) { return d.advanceTo(*time); });
    retireIfDue(false);
  }
  return status;
}

void CepDetection::queueRetry() {
  if (retry_queued_.exchange(true, std::memory_order_acq_rel)) return;
  // A full stage refuses it: its worker gets to the backlog before its next batch.
  if (offerControl(retryMarker()) == stages::Admission::kRejected) {
    retry_queued_.store(false, std::memory_order_release);
  }
}

void CepDetection::awaitOutputs() {
  while (!backlog_.drain(std::chrono::steady_clock::now() + std::chrono::milliseconds(100))) {
    const std::chrono::steady_clock::time_point give_up{
        std::chrono::steady_clock::duration(give_up_at_.load(std::memory_order_acquire))};
    if (std::chrono::steady_clock::now() >= give_up) {
      log_.warning("%s: stopped while the bus refused %Lu of its composite events; given up",
                   label_, static_cast<Poco::UInt64>(backlog_.size()));
      backlog_.abandon();
      return;
    }
  }
}

stages::StageBatchResult CepDetection::handle(std::span<stages::StageItem> items) {
  stages::StageBatchResult result;
  // The worker takes no more events while the bus refuses composites; a run
  // on the delivering thread never waits, it asks the worker to.
  const bool on_worker = !items.front().inline_run;
  if (on_worker && !backlog_.empty()) awaitOutputs();
  // A control item splits the batch: the events before it, then the flush,
  // the wait for held composites or the mute.
  while (!items.empty()) {
    const auto marker =
        std::find_if(items.begin(), items.end(),
                     [this](const stages::StageItem& i) { return isControl(i.event); });
    const auto run = static_cast<size_t>(marker - items.begin());
    if (run > 0) detectEvents(items.first(run), result);
    if (run == items.size()) break;
    if (marker->event == flushMarker()) {
      {
        MutexLock lock(detection_mu_);
        if (Status s = detection_->flush(); !s) failed("flush", s);
        if (retiring_) onRetiring([](detection::Detection& d) { return d.flush(); });
      }
      // While the marker still counts as pending: the bus stops its flows
      // once every service is idle, and this checkpoint needs them.
      if (on_worker) checkpointIfDue(/*flushed=*/true);
    } else if (marker->event == tickMarker()) {
      tick_queued_.store(false, std::memory_order_release);
      MutexLock lock(detection_mu_);
      readSourceEnds();
      if (Status s = advanceTime(); !s) failed("tick", s);
      // What the time released, a batching engine reports now (as after a batch).
      if (flush_when_idle_ && pending_.load(std::memory_order_acquire) == 1) {
        if (Status s = detection_->flushReleased(); !s) failed("flush", s);
        if (retiring_) onRetiring([](detection::Detection& d) { return d.flushReleased(); });
      }
    } else if (marker->event == retryMarker()) {
      retry_queued_.store(false, std::memory_order_release);
      if (on_worker) awaitOutputs();
    } else {
      std::shared_ptr<Control> request;
      {
        MutexLock lock(controls_mu_);
        const auto it = std::find_if(controls_.begin(), controls_.end(), [&marker](const auto& c) {
          return c->marker == marker->event;
        });
        request = *it;
        controls_.erase(it);
      }
      request->run();
      request->done.set_value();
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
    items = items.subspan(run + 1);
  }
  // Not on a delivering thread: a checkpoint waits for its transaction.
  if (on_worker) checkpointIfDue(/*flushed=*/false);
  if (!backlog_.empty()) {
    if (on_worker) {
      awaitOutputs();
    } else {
      queueRetry();
    }
  }
  return result;
}

void CepDetection::detectEvents(std::span<stages::StageItem> items,
                                stages::StageBatchResult& result) {
  for (stages::StageItem& item : items) batch_.push_back(std::move(item.event));
  const size_t n = batch_.size();
  Status status = Status::ok();
  Status flushed = Status::ok();
  {
    MutexLock lock(detection_mu_);
    for (const std::shared_ptr<CepQuery>& query : members_) query->watch(batch_);
    auto note = [&status](Status s) {
      if (!s && status) status = std::move(s);
    };
    // Each event is judged against the time before it, which the events
    // before it in the batch may have moved (their source was the slowest
    // live one). The batch goes to the detection whole unless an event is
    // late only against that moved time: the run before it goes first, and
    // the time moves before it is offered.
    const auto now = std::chrono::steady_clock::now();
    const Timestamp delay = detection_->maxDelay();
    std::optional<Timestamp> time = clock_.eventTime(now);
    size_t from = 0;
    for (size_t i = 0; i < n; ++i) {
      const Event& event = *batch_[i];
      if (time && event.ts() < *time - delay && !detection_->isLate(event)) {
        note(detection_->onEvents(std::span<const EventPtr>(batch_).subspan(from, i - from)));
        note(detection_->advanceTo(*time));
        from = i;
      }
      clock_.heard(items[i].token, event.ts(), now);
      time = clock_.eventTime(now);
    }
    note(detection_->onEvents(std::span<const EventPtr>(batch_).subspan(from)));
    if (retiring_) {
      onRetiring([this](detection::Detection& d) { return d.onEvents(batch_); });
    }
    if (checkpoints_) checkpoints_->consumed(batch_);
    note(advanceTime());
    // Nothing is queued behind these events: the input paused, so a batching
    // engine reports what it holds now instead of at its next batch
    // boundary, which may be far off when events are sparse. Under load the
    // queue is rarely empty and the engine keeps batching.
    // A pause is not the end of the stream: what the slack holds back stays
    // held, or the next event of a slower producer would be late.
    if (flush_when_idle_ && pending_.load(std::memory_order_acquire) == n) {
      flushed = detection_->flushReleased();
      if (retiring_) onRetiring([](detection::Detection& d) { return d.flushReleased(); });
    }
    noteEvictions();
  }
  batch_.clear();
  // onEvents() reports the first error of the batch only: one error is
  // counted (and one item failed) however many of its events were refused.
  if (!status) {
    failed("event", status);
    if (result.failed++ == 0) result.first_error = status;
  }
  if (!flushed) failed("flush", flushed);
  // Last: matches of these events are published by now, so an idle query
  // has handed everything on.
  pending_.fetch_sub(n, std::memory_order_acq_rel);
}

void CepDetection::failed(const char* call, const Status& status) {
  const uint64_t n = current()->stats().errors;
  if (worthLogging(n - 1, n)) {
    log_.warning("%s: detector refused %s (%Lu errors so far): %s", label_, std::string(call),
                 static_cast<Poco::UInt64>(n), status.toString());
  }
}

void CepDetection::noteEvictions() {
  const std::optional<plugin::DetectorState> state = detection_->stats().partial_matches;
  if (!state || state->evicted == logged_evictions_) return;
  if (worthLogging(logged_evictions_, state->evicted)) {
    log_.warning(
        "%s: its state reached a cap: %Lu partial matches dropped or refused so far, %Lu held "
        "(%Lu bytes); the engine options max_partial_matches, max_partition_partial_matches and "
        "state_policy set the caps",
        label_, static_cast<Poco::UInt64>(state->evicted),
        static_cast<Poco::UInt64>(state->partial_matches), static_cast<Poco::UInt64>(state->bytes));
  }
  logged_evictions_ = state->evicted;
}

void CepDetection::publishReliably(flows::Exchange exchange) {
  if (!backlog_.publish(std::move(exchange))) return;
  const uint64_t held = backlog_.heldTotal();
  if (worthLogging(held - 1, held)) {
    log_.warning(
        "%s: the bus refused a composite event for now (%Lu held so far); the query "
        "holds it, and its input waits, until the bus takes it (output_held counts "
        "what waits)",
        label_, held);
  }
}

QueryStats CepDetection::stats() const {
  const auto [detection, replaced] = currentAndReplaced();
  const detection::DetectionStats d = detection->stats();
  QueryStats s;
  s.consumed = d.consumed + replaced.consumed;
  s.errors = d.errors + replaced.errors;
  s.late = d.late + replaced.late;
  if (d.watermark != INT64_MIN) s.watermark = d.watermark;
  s.partial_matches = d.partial_matches;
  s.output_held = backlog_.size();
  s.rejected = rejected_.load(std::memory_order_relaxed);
  s.queued = pending_.load(std::memory_order_acquire);
  s.ran_inline = stage_->metrics().ran_inline;
  s.sources = sources_.load(std::memory_order_relaxed);
  s.idle_sources = idle_sources_.load(std::memory_order_relaxed);
  return s;
}

Result<std::string> CepDetection::exportModel(std::string_view format) const {
  MutexLock lock(detection_mu_);
  return detection_->exportModel(format);
}

plugin::EngineCounters CepDetection::engineCounters() const {
  if (detection_mu_.try_lock()) {
    Result<std::string> text = detection_->exportModel(plugin::kCountersFormat);
    detection_mu_.unlock();
    Result<plugin::EngineCounters> counters = text.isOk()
                                                  ? plugin::parseEngineCounters(*text)
                                                  : Result<plugin::EngineCounters>(text.status());
    MutexLock lock(counters_mu_);
    counters_ = counters.isOk() ? std::move(counters).value() : plugin::EngineCounters{};
  }
  MutexLock lock(counters_mu_);
  return counters_;
}

void CepDetection::onMatch(size_t member, const plugin::Match& match) {
  detection_mu_.assertHeld();  // inside a call into a detection
  CepQuery& query = feeding_retiring_ ? *retiring_->query : *members_[member];
  if (edit_published_) {
    std::vector<EventId> constituents;
    Timestamp first = INT64_MAX;
    for (size_t i = 0; i < match.size(); ++i) {
      constituents.push_back(match.event(i)->id());
      first = std::min(first, match.event(i)->ts());
    }
    // A match that begins after the edit is the edited query's alone.
    if (feeding_retiring_ && first > retiring_->newest) return;
    if (!edit_published_->insert(detection::compositeId(query.name(), constituents))) return;
  }
  query.publish(match);
}

void CepDetection::onLate(const EventPtr& event, Timestamp newest) {
  detection_mu_.assertHeld();  // inside a call into a detection
  if (feeding_retiring_) return;
  for (size_t i = 0; i < members_.size(); ++i) {
    if (!detection_->muted(i)) members_[i]->publishLate(event);
  }
  // Counted by the detection before this call.
  const uint64_t n = detection_->stats().late;
  if (worthLogging(n - 1, n)) {
    log_.warning(
        "%s: late event (%Lu so far, not matched): type %s at ts %Ld arrived after ts %Ld, more "
        "than the maximum delay behind (the query option max_delay=D sets it)",
        label_, static_cast<Poco::UInt64>(n), std::string(event->type().name()),
        static_cast<Poco::Int64>(event->ts()), static_cast<Poco::Int64>(newest));
  }
}

void CepDetection::onTrialDecided(const plugin::TrialOutcome& outcome) {
  log_.information("%s: engine auto's trial %s", label_, outcome.describe());
}

}  // namespace cepbus::services::cep
