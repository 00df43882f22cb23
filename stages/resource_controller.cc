#include "stages/resource_controller.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace cepbus::stages {

size_t decideThreads(const ResourceConfig& config, size_t min_threads, size_t max_threads,
                     const ResourceSample& s) {
  const size_t threads = std::clamp(s.threads, min_threads, max_threads);
  if (threads != s.threads) return threads;
  if (s.elapsed.count() <= 0 || threads == 0) return threads;

  const double capacity_ns = static_cast<double>(s.elapsed.count()) * static_cast<double>(threads);
  const double utilization = static_cast<double>(s.busy.count()) / capacity_ns;

  if (s.queue_length > 0) {
    // More threads would only queue up behind the saturated downstream.
    if (s.downstream_saturated) return threads;
    if (s.completed > 0 && s.busy.count() > 0) {
      const double ns_per_item = static_cast<double>(s.busy.count()) / s.completed;
      const double drain_ns = static_cast<double>(s.queue_length) * ns_per_item / threads;
      const auto target_ns = std::chrono::nanoseconds(config.target_latency).count();
      if (drain_ns > static_cast<double>(target_ns)) return std::min(threads + 1, max_threads);
      return threads;
    }
    // Nothing finished in a whole period while work waits and the threads
    // were busy: the handler is slower than the period, so the rate is
    // unmeasurable but clearly too low.
    if (utilization >= 0.5) return std::min(threads + 1, max_threads);
    return threads;
  }
  if (utilization < config.idle_utilization) return std::max(threads - 1, min_threads);
  return threads;
}

ResourceController::ResourceController(const ResourceConfig& config, size_t min_threads,
                                       size_t max_threads)
    : config_(config), min_threads_(min_threads), max_threads_(max_threads) {
  if (min_threads_ == 0) throw std::invalid_argument("min_threads must be at least 1");
  if (min_threads_ > max_threads_) {
    throw std::invalid_argument("min_threads (" + std::to_string(min_threads_) +
                                ") exceeds max_threads (" + std::to_string(max_threads_) + ")");
  }
  if (config_.period.count() <= 0) throw std::invalid_argument("resource.period must be positive");
  if (config_.target_latency.count() <= 0) {
    throw std::invalid_argument("resource.target_latency must be positive");
  }
}

size_t ResourceController::update(std::chrono::steady_clock::time_point now, size_t threads,
                                  size_t queue_length, uint64_t completed_total,
                                  uint64_t busy_ns_total, bool downstream_saturated) {
  if (!primed_) {
    primed_ = true;
    last_at_ = now;
    last_completed_ = completed_total;
    last_busy_ns_ = busy_ns_total;
    return std::clamp(threads, min_threads_, max_threads_);
  }
  ResourceSample s;
  s.threads = threads;
  s.queue_length = queue_length;
  s.completed = completed_total - last_completed_;
  s.busy = std::chrono::nanoseconds(busy_ns_total - last_busy_ns_);
  s.elapsed = now - last_at_;
  s.downstream_saturated = downstream_saturated;
  last_at_ = now;
  last_completed_ = completed_total;
  last_busy_ns_ = busy_ns_total;
  return decideThreads(config_, min_threads_, max_threads_, s);
}

PeriodicTask::PeriodicTask(std::chrono::nanoseconds period, Tick tick)
    : period_(period), tick_(std::move(tick)) {}

PeriodicTask::~PeriodicTask() { stop(); }

void PeriodicTask::start() {
  MutexLock lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { run(); });
}

void PeriodicTask::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PeriodicTask::run() {
  auto next = std::chrono::steady_clock::now() + period_;
  MutexLock lock(mu_);
  while (!stopping_) {
    if (dormant_.load(std::memory_order_relaxed)) {
      cv_.wait(mu_, [this] {
        mu_.assertHeld();
        return stopping_ || !dormant_.load(std::memory_order_relaxed);
      });
      next = std::chrono::steady_clock::now() + period_;
      continue;
    }
    if (cv_.waitUntil(mu_, next, [this] {
          mu_.assertHeld();
          return stopping_;
        })) {
      break;
    }
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    const bool keep_ticking = tick_(now);
    // A late tick does not cause a burst of catch-up ticks.
    next += period_;
    if (next <= now) next = now + period_;
    lock.lock();
    if (!keep_ticking) dormant_.store(true, std::memory_order_relaxed);
  }
}

void PeriodicTask::resume() {
  {
    MutexLock lock(mu_);
    if (!dormant_.load(std::memory_order_relaxed)) return;
    dormant_.store(false, std::memory_order_relaxed);
  }
  cv_.notify_all();
}

}  // namespace cepbus::stages
