#include "stages/stage.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <bit>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>

namespace cepbus::stages {
namespace {

using Clock = std::chrono::steady_clock;

// Validates everything the members' constructors would reject, so that the
// error names the stage.
StageConfig checked(StageConfig config, bool has_handler) {
  const std::string where = "stage '" + config.name + "': ";
  if (!has_handler) throw std::invalid_argument(where + "handler is empty");
  if (config.batch_size == 0) throw std::invalid_argument(where + "batch_size must be positive");
  try {
    AdmissionLevels::from(config.admission, config.capacity);
    CostClassifier classifier(config.cost_thresholds);
    ResourceController resource(config.resource, config.min_threads, config.max_threads);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + e.what());
  }
  return config;
}

void logFailure(const std::string& stage, uint64_t before, uint64_t failures,
                const std::string& why) {
  // When the count passes a power of two only: a handler failing on every
  // item must not flood the log.
  if (std::bit_width(before) == std::bit_width(failures)) return;
  Poco::Logger::get("cepbus.stages")
      .warning("stage '" + stage + "': handler failed (" + std::to_string(failures) +
               " failures so far): " + why);
}

}  // namespace

Stage::Stage(StageConfig config, StageHandler handler, stats::ScopePtr scope)
    : Stage(std::move(config), std::move(handler), StageBatchHandler{}, std::move(scope)) {}

Stage::Stage(StageConfig config, StageBatchHandler handler, stats::ScopePtr scope)
    : Stage(std::move(config), StageHandler{}, std::move(handler), std::move(scope)) {}

Stage::Stage(StageConfig config, StageHandler handler, StageBatchHandler batch_handler,
             stats::ScopePtr scope)
    : config_(checked(std::move(config), handler || batch_handler)),
      handler_(std::move(handler)),
      batch_handler_(std::move(batch_handler)),
      admission_(config_.admission, config_.capacity),
      resource_(config_.resource, config_.min_threads, config_.max_threads),
      queue_(config_.capacity, CostClassifier(config_.cost_thresholds), config_.idle_spin,
             admission_.levels().soft_level),
      pool_(config_.name, [this] { workerLoop(); }),
      controller_(config_.resource.period,
                  [this](Clock::time_point now) { return controllerTick(now); }),
      scope_(scope != nullptr ? std::move(scope)
                              : stats::Store().scope(kStageSchema, {{"stage", config_.name}})),
      metrics_(*scope_) {
  reportGauges();
}

void Stage::reportGauges() {
  namespace s = stage_stats;
  scope_->counter(s::kOffered, [this] { return offeredTotal(); });
  scope_->gauge(s::kQueueLength, [this] { return static_cast<double>(queue_.size()); });
  scope_->gauge(s::kThreads, [this] { return static_cast<double>(pool_.threads()); });
  scope_->gauge(s::kPressure, [this] { return static_cast<double>(pressure()); });
  scope_->gauge(s::kCapacity).set(static_cast<int64_t>(config_.capacity));
  scope_->gauge(s::kMinThreads).set(static_cast<int64_t>(config_.min_threads));
  scope_->gauge(s::kMaxThreads).set(static_cast<int64_t>(config_.max_threads));
}

Stage::~Stage() { stop(); }

void Stage::start() {
  std::lock_guard<std::mutex> lock(lifecycle_mu_);
  if (state_.load(std::memory_order_relaxed) != State::kCreated) return;
  state_.store(State::kRunning, std::memory_order_release);
  pool_.resize(config_.min_threads);
  controller_.start();
}

void Stage::stop() {
  std::lock_guard<std::mutex> lock(lifecycle_mu_);
  const State was = state_.load(std::memory_order_relaxed);
  if (was == State::kStopped) return;
  state_.store(State::kStopped, std::memory_order_release);
  // The controller goes first so that the pool is not resized while it drains.
  controller_.stop();
  queue_.close();
  if (was == State::kRunning) {
    // Workers leave once the closed queue is empty; at least min_threads of
    // them are never asked to retire, so every queued item is handled.
    pool_.join();
    // An offer() running the handler inline finishes before stop() returns.
    waitForInlineRun();
    return;
  }
  // Never started: the queued items are handled here.
  std::vector<StageItem> batch(config_.batch_size);
  while (size_t n = queue_.tryPopBatch(batch.data(), batch.size())) handleBatch(batch.data(), n);
}

Admission Stage::offer(StageItem item) {
  if (state_.load(std::memory_order_acquire) == State::kStopped) {
    metrics_.rejected.inc();
    return Admission::kRejected;
  }
  controller_.wake();  // watching the stage again, if it went quiet
  // Below the soft level every rule admits, and the producer-side estimate
  // tells so without reading the workers' cache lines.
  size_t queue_length = queue_.sizeAtMost();
  if (queue_length >= admission_.levels().soft_level) queue_length = queue_.size();
  const Admission decision = admission_.admit(queue_length, item.reliable, downstreamSaturated());
  if (decision == Admission::kRejected) {
    metrics_.rejected.inc();
    return Admission::kRejected;
  }
  if (decision == Admission::kDegraded) item.reliable = false;
  item.enqueued_at = Clock::now();
  item.inline_run = false;  // the stage's to say (tryRunInline())
  if (config_.run_inline_when_idle) {
    if (tryRunInline(item)) {
      metrics_.ran_inline.inc();
      if (decision == Admission::kDegraded) metrics_.degraded.inc();
      return decision;
    }
    // Counted before the push: a worker cannot finish it (and uncount it) first.
    outstanding_.fetch_add(1, std::memory_order_seq_cst);
  }
  // The queue enforces the capacity again: another producer may have filled
  // it since the decision, or stop() may have closed it.
  if (queue_.tryPush(item) != PushResult::kOk) {
    if (config_.run_inline_when_idle) outstanding_.fetch_sub(1, std::memory_order_release);
    metrics_.rejected.inc();
    return Admission::kRejected;
  }
  if (decision == Admission::kDegraded) metrics_.degraded.inc();
  return decision;
}

bool Stage::tryRunInline(StageItem& item) {
  uint64_t idle = 0;
  if (!outstanding_.compare_exchange_strong(idle, kInlineRun | 1, std::memory_order_seq_cst)) {
    return false;
  }
  // Checked after the claim: stop() either sees the claim and waits for this
  // run, or stopped first and this thread sees it (both seq_cst). A stage
  // not started yet keeps the item queued for its workers.
  if (state_.load(std::memory_order_seq_cst) != State::kRunning) {
    outstanding_.fetch_sub(kInlineRun | 1, std::memory_order_release);
    return false;
  }
  item.inline_run = true;
  handleBatch(&item, 1);
  outstanding_.fetch_sub(kInlineRun | 1, std::memory_order_release);
  return true;
}

void Stage::waitForInlineRun() const {
  // Inline runs are short by contract (cheap handlers only), so a yield loop
  // is enough; it only happens when producers on several threads overlap.
  while ((outstanding_.load(std::memory_order_acquire) & kInlineRun) != 0) {
    std::this_thread::yield();
  }
}

Admission Stage::offerWait(StageItem item, std::chrono::nanoseconds timeout) {
  if (state_.load(std::memory_order_acquire) != State::kStopped) {
    queue_.waitBelow(admission_.levels().saturation_level, Clock::now() + timeout);
  }
  return offer(std::move(item));
}

Pressure Stage::pressure() const {
  return admission_.pressure(queue_.size(), downstreamSaturated());
}

StageMetricsSnapshot Stage::metrics() const {
  StageMetricsSnapshot s;
  s.name = config_.name;
  s.enqueued = queue_.pushedTotal();
  s.ran_inline = metrics_.ran_inline.value();
  s.rejected = metrics_.rejected.value();
  s.offered = s.enqueued + s.ran_inline + s.rejected;
  s.processed = metrics_.processed.value();
  s.failed = metrics_.failed.value();
  s.degraded = metrics_.degraded.value();
  s.backpressure_waits = metrics_.backpressure_waits.value();
  s.queue_length = queue_.size();
  s.capacity = config_.capacity;
  s.threads = pool_.threads();
  s.min_threads = config_.min_threads;
  s.max_threads = config_.max_threads;
  s.pressure = pressure();
  s.latency = metrics_.latency.summary();
  return s;
}

void Stage::addDownstream(const Stage* downstream) {
  std::lock_guard<std::mutex> lock(lifecycle_mu_);
  if (downstream == nullptr || downstream == this) {
    throw std::invalid_argument("stage '" + config_.name + "': downstream must be another stage");
  }
  const size_t n = downstream_count_.load(std::memory_order_relaxed);
  for (size_t i = 0; i < n; ++i) {
    if (downstream_[i].load(std::memory_order_relaxed) == downstream) return;
  }
  if (n == kMaxDownstream) {
    throw std::invalid_argument("stage '" + config_.name + "': more than " +
                                std::to_string(kMaxDownstream) + " downstream stages");
  }
  downstream_[n].store(downstream, std::memory_order_relaxed);
  downstream_count_.store(n + 1, std::memory_order_release);
}

bool Stage::downstreamSaturated() const {
  const size_t n = downstream_count_.load(std::memory_order_acquire);
  for (size_t i = 0; i < n; ++i) {
    const Stage* d = downstream_[i].load(std::memory_order_relaxed);
    const size_t level = d->admission_.levels().saturation_level;
    if (d->queue_.sizeAtMost() >= level && d->queue_.size() >= level) return true;
  }
  return false;
}

bool Stage::pauseForDownstream() {
  const size_t n = downstream_count_.load(std::memory_order_acquire);
  if (n == 0) return false;
  bool waited = false;
  Clock::time_point deadline{};
  for (size_t i = 0; i < n; ++i) {
    const Stage* d = downstream_[i].load(std::memory_order_relaxed);
    const size_t level = d->admission_.levels().saturation_level;
    if (d->queue_.sizeAtMost() < level || d->queue_.size() < level) continue;
    if (!waited) deadline = Clock::now() + config_.backpressure_wait;
    waited = true;
    d->queue_.waitBelow(level, deadline);
  }
  return waited;
}

void Stage::workerLoop() {
  std::vector<StageItem> batch(config_.batch_size);
  // Idle workers of a pool that may shrink wake up once per controller
  // period to notice a retirement. A fixed-size pool never retires a worker
  // (stop() wakes them by closing the queue): its idle workers just sleep.
  const auto idle_wait = config_.max_threads > config_.min_threads
                             ? std::chrono::nanoseconds(config_.resource.period)
                             : std::chrono::nanoseconds(std::chrono::hours(1));
  for (;;) {
    if (pool_.shouldRetire()) return;
    if (pauseForDownstream()) metrics_.backpressure_waits.inc();
    const size_t n = queue_.popBatch(batch.data(), batch.size(), Clock::now() + idle_wait);
    if (n > 0) {
      if (config_.run_inline_when_idle) waitForInlineRun();
      handleBatch(batch.data(), n);
      if (config_.run_inline_when_idle) outstanding_.fetch_sub(n, std::memory_order_release);
    } else if (queue_.drained()) {
      return;
    }
  }
}

void Stage::handleBatch(StageItem* items, size_t n) {
  uint64_t ok = 0;
  const auto started = Clock::now();
  if (batch_handler_) {
    ok = n - handleAll(std::span(items, n));
  } else {
    for (size_t i = 0; i < n; ++i) ok += handleOne(items[i]) ? 1 : 0;
  }
  // Release the events now rather than when the slots are next overwritten.
  for (size_t i = 0; i < n; ++i) items[i] = StageItem{};
  metrics_.processed.add(ok);
  busy_ns_.fetch_add(
      static_cast<uint64_t>(std::chrono::nanoseconds(Clock::now() - started).count()),
      std::memory_order_relaxed);
}

bool Stage::handleOne(StageItem& item) {
  Status status;
  try {
    status = handler_(item);
  } catch (const std::exception& e) {
    status = Status::internal(std::string("handler threw: ") + e.what());
  } catch (...) {
    status = Status::internal("handler threw a non-standard exception");
  }
  metrics_.latency.recordDuration(Clock::now() - item.enqueued_at);
  if (status.isOk()) return true;
  countFailures(1, status);
  return false;
}

size_t Stage::handleAll(std::span<StageItem> items) {
  StageBatchResult result;
  try {
    result = batch_handler_(items);
  } catch (const std::exception& e) {
    result = {items.size(), Status::internal(std::string("handler threw: ") + e.what())};
  } catch (...) {
    result = {items.size(), Status::internal("handler threw a non-standard exception")};
  }
  // Every item of the batch is done when the call returns.
  const auto done = Clock::now();
  for (const StageItem& item : items) metrics_.latency.recordDuration(done - item.enqueued_at);
  const size_t failed = std::min(result.failed, items.size());
  if (failed > 0) countFailures(failed, result.first_error);
  return failed;
}

void Stage::countFailures(uint64_t n, const Status& why) {
  const uint64_t before = metrics_.failed.value();
  metrics_.failed.add(n);
  logFailure(config_.name, before, before + n,
             why.isOk() ? std::string("the handler reported failed items") : why.toString());
}

uint64_t Stage::offeredTotal() const {
  return queue_.pushedTotal() + metrics_.ran_inline.value() + metrics_.rejected.value();
}

uint64_t Stage::handledTotal() const {
  return metrics_.processed.value() + metrics_.failed.value();
}

bool Stage::controllerTick(Clock::time_point now) {
  const uint64_t handled = handledTotal();
  const uint64_t offered = offeredTotal();
  admission_.sample(now, offered, handled);
  const size_t queued = queue_.size();
  const size_t threads =
      resource_.update(now, pool_.threads(), queued, handled,
                       busy_ns_.load(std::memory_order_relaxed), downstreamSaturated());
  pool_.resize(threads);
  // Quiet: nothing came or went for a whole rate window, nothing waits, no
  // thread to retire and no overload to clear. Then the samples would all be
  // alike, so the controller sleeps until the next offer() wakes it.
  const bool quiet = offered == last_offered_ && handled == last_handled_ && queued == 0 &&
                     threads == config_.min_threads && !admission_.overloaded();
  last_offered_ = offered;
  last_handled_ = handled;
  quiet_ticks_ = quiet ? quiet_ticks_ + 1 : 0;
  return quiet_ticks_ * config_.resource.period < config_.admission.rate_window;
}

}  // namespace cepbus::stages
