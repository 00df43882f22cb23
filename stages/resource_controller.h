#pragma once

// Resource control of a stage (P1 SEDA, part 2): tunes the number of worker
// threads between min and max from the stage's load and measured performance.
//
// Each period the driver turns cumulative counters into one ResourceSample
// and asks decideThreads() for the thread count to run: grow by one when the
// queued items exceed what the current threads drain within the target
// latency (at the service rate measured over the period), shrink by one when
// the queue is empty and the threads were mostly idle. One step per period
// keeps the controller stable under noisy measurements (as SEDA's thread-pool
// controller does).

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>

#include "bus/base/mutex.h"

namespace cepbus::stages {

struct ResourceConfig {
  std::chrono::milliseconds period{50};
  // Grow when draining the queue at the measured rate would take longer than this.
  std::chrono::microseconds target_latency{10'000};
  // Shrink when the queue is empty and busy time / (threads * period) is below this.
  double idle_utilization = 0.2;
};

// One period of observations.
struct ResourceSample {
  size_t threads = 0;
  size_t queue_length = 0;
  uint64_t completed = 0;            // items finished during the period
  std::chrono::nanoseconds busy{0};  // handler time summed over threads during the period
  std::chrono::nanoseconds elapsed{0};
  bool downstream_saturated = false;  // more threads would only wait on the downstream
};

// The thread count to run next, within [min_threads, max_threads].
size_t decideThreads(const ResourceConfig& config, size_t min_threads, size_t max_threads,
                     const ResourceSample& sample);

// Turns cumulative counters into per-period samples and decisions.
// Thread-safety: none; used by one driver thread.
class ResourceController {
 public:
  // Throws std::invalid_argument when min_threads is 0, min > max, or the
  // period or target latency is not positive.
  ResourceController(const ResourceConfig& config, size_t min_threads, size_t max_threads);

  size_t update(std::chrono::steady_clock::time_point now, size_t threads, size_t queue_length,
                uint64_t completed_total, uint64_t busy_ns_total, bool downstream_saturated);
  const ResourceConfig& config() const { return config_; }

 private:
  const ResourceConfig config_;
  const size_t min_threads_;
  const size_t max_threads_;
  bool primed_ = false;
  std::chrono::steady_clock::time_point last_at_{};
  uint64_t last_completed_ = 0;
  uint64_t last_busy_ns_ = 0;
};

// Runs `tick` every `period` on its own thread until stop(). A tick that
// returns false has nothing left to watch: the task goes dormant and sleeps,
// without waking every period, until wake() (the next activity) or stop();
// the next tick then comes one period after the wake-up. So an idle stage
// costs no wake-ups at all, and a busy one pays one relaxed load per wake().
// Thread-safety: start() and stop() from one controlling thread; stop() is
// idempotent. wake() and dormant() from any thread.
class PeriodicTask {
 public:
  // Returns whether to keep ticking.
  using Tick = std::function<bool(std::chrono::steady_clock::time_point now)>;

  PeriodicTask(std::chrono::nanoseconds period, Tick tick);
  ~PeriodicTask();
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

  void start();
  void stop();

  // Ends a dormancy; cheap (one relaxed load) when the task is not dormant.
  void wake() {
    if (dormant_.load(std::memory_order_relaxed)) resume();
  }
  bool dormant() const { return dormant_.load(std::memory_order_relaxed); }

 private:
  void run() EXCLUDES(mu_);
  void resume();

  const std::chrono::nanoseconds period_;
  const Tick tick_;
  Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  // Written under mu_, read without it by wake(). Activity between a tick's
  // verdict and the dormancy goes unnoticed; the next wake() ends it.
  std::atomic<bool> dormant_{false};
  std::thread thread_;
};

}  // namespace cepbus::stages
