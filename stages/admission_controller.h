#pragma once

// Admission control of a stage (P1 SEDA, part 3): decides, for each offered
// item, whether it is queued as asked, queued with its QoS degraded
// (reliable -> best effort, P1 part 4), or rejected.
//
// Three monitors feed the decision:
//  - static: a fixed threshold on the queue length; past it reliable items degrade;
//  - dynamic: input vs output message counts over a sliding interval; when
//    input persistently outruns output by `overload_ratio` and the queue is
//    past a soft level, reliable items degrade too;
//  - hard limit: the queue capacity; past it items are rejected and the caller
//    reports the rejection to the sender (never a silent drop).
// A saturated downstream stage (backpressure, P1 part 5) makes the stage treat
// itself as more loaded: the static threshold drops to the soft level.
//
// The decisions are free functions of observed numbers so that they can be
// tested without threads or clocks; AdmissionController binds them to a
// configuration and to a RateMonitor fed by the stage's periodic driver.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>

#include "stages/stage_types.h"

namespace cepbus::stages {

struct AdmissionConfig {
  // Fractions of the queue capacity.
  double static_threshold = 0.75;      // past it reliable items are degraded
  double soft_threshold = 0.25;        // past it the dynamic monitor may degrade
  double saturation_threshold = 0.90;  // past it pressure() is kSaturated
  // Input/output ratio over `rate_window` that counts as overload.
  double overload_ratio = 1.25;
  std::chrono::milliseconds rate_window{500};
};

// Queue lengths derived from a config and a capacity. A level L is reached
// when queue_length >= L.
struct AdmissionLevels {
  size_t capacity = 0;
  size_t static_level = 0;
  size_t soft_level = 0;
  size_t saturation_level = 0;

  // Throws std::invalid_argument naming the bad field when the fractions are
  // outside (0, 1], not ordered soft <= static <= saturation, or capacity is 0.
  static AdmissionLevels from(const AdmissionConfig& config, size_t capacity);
};

// What admission sees when an item is offered.
struct AdmissionInput {
  size_t queue_length = 0;
  bool reliable = false;
  bool overloaded = false;            // the dynamic monitor's verdict
  bool downstream_saturated = false;  // some downstream stage reports kSaturated
};

Admission decideAdmission(const AdmissionLevels& levels, const AdmissionInput& input);
// The pressure a stage shows upstream for the same observations (`reliable` is ignored).
Pressure decidePressure(const AdmissionLevels& levels, const AdmissionInput& input);

// Input and output rates over a sliding interval, from cumulative counters
// sampled periodically. Thread-safety: none; one driver thread samples it.
class RateMonitor {
 public:
  RateMonitor(std::chrono::nanoseconds window, double overload_ratio);

  // Records cumulative totals (monotonic) observed at `now` (monotonic too).
  void sample(std::chrono::steady_clock::time_point now, uint64_t input_total,
              uint64_t output_total);
  // True when the samples span the whole window and, over it, input > 0 and
  // input >= overload_ratio * output.
  bool overloaded() const;
  // Items per second over the covered part of the window; 0 before two samples.
  double inputRate() const;
  double outputRate() const;

 private:
  struct Sample {
    std::chrono::steady_clock::time_point at;
    uint64_t input;
    uint64_t output;
  };
  const std::chrono::nanoseconds window_;
  const double overload_ratio_;
  std::deque<Sample> samples_;
};

// Thread-safety: admit(), pressure() and overloaded() may be called from any
// thread concurrently with sample(), which only one thread may call.
class AdmissionController {
 public:
  // Throws std::invalid_argument on a bad config (see AdmissionLevels::from).
  AdmissionController(const AdmissionConfig& config, size_t capacity);

  Admission admit(size_t queue_length, bool reliable, bool downstream_saturated) const;
  Pressure pressure(size_t queue_length, bool downstream_saturated) const;
  void sample(std::chrono::steady_clock::time_point now, uint64_t offered_total,
              uint64_t handled_total);
  bool overloaded() const { return overloaded_.load(std::memory_order_relaxed); }
  const AdmissionLevels& levels() const { return levels_; }

 private:
  const AdmissionLevels levels_;
  RateMonitor rates_;
  std::atomic<bool> overloaded_{false};
};

}  // namespace cepbus::stages
