#include "stages/admission_controller.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace cepbus::stages {
namespace {

void checkFraction(const char* field, double value) {
  if (!(value > 0.0 && value <= 1.0)) {
    throw std::invalid_argument(std::string("admission.") + field + " must be in (0, 1], got " +
                                std::to_string(value));
  }
}

// The queue length at which `fraction` of the capacity is reached; at least 1.
size_t levelOf(double fraction, size_t capacity) {
  const auto level = static_cast<size_t>(std::ceil(fraction * static_cast<double>(capacity)));
  return std::max<size_t>(level, 1);
}

}  // namespace

AdmissionLevels AdmissionLevels::from(const AdmissionConfig& config, size_t capacity) {
  if (capacity == 0) throw std::invalid_argument("capacity must be positive");
  checkFraction("static_threshold", config.static_threshold);
  checkFraction("soft_threshold", config.soft_threshold);
  checkFraction("saturation_threshold", config.saturation_threshold);
  if (config.soft_threshold > config.static_threshold ||
      config.static_threshold > config.saturation_threshold) {
    throw std::invalid_argument(
        "admission thresholds must satisfy soft_threshold <= static_threshold <= "
        "saturation_threshold");
  }
  if (!(config.overload_ratio >= 1.0)) {
    throw std::invalid_argument("admission.overload_ratio must be >= 1, got " +
                                std::to_string(config.overload_ratio));
  }
  if (config.rate_window.count() <= 0) {
    throw std::invalid_argument("admission.rate_window must be positive");
  }
  AdmissionLevels levels;
  levels.capacity = capacity;
  levels.static_level = levelOf(config.static_threshold, capacity);
  levels.soft_level = levelOf(config.soft_threshold, capacity);
  levels.saturation_level = levelOf(config.saturation_threshold, capacity);
  return levels;
}

Admission decideAdmission(const AdmissionLevels& levels, const AdmissionInput& input) {
  if (input.queue_length >= levels.capacity) return Admission::kRejected;
  // Best-effort items have no QoS left to degrade.
  if (!input.reliable) return Admission::kAccepted;
  const size_t static_level = input.downstream_saturated ? levels.soft_level : levels.static_level;
  if (input.queue_length >= static_level) return Admission::kDegraded;
  if (input.overloaded && input.queue_length >= levels.soft_level) return Admission::kDegraded;
  return Admission::kAccepted;
}

Pressure decidePressure(const AdmissionLevels& levels, const AdmissionInput& input) {
  if (input.queue_length >= levels.saturation_level) return Pressure::kSaturated;
  AdmissionInput as_reliable = input;
  as_reliable.reliable = true;
  // A saturated downstream is passed on as kDegraded even when this queue is
  // short, so that pressure travels up the chain before queues fill.
  if (input.downstream_saturated || decideAdmission(levels, as_reliable) != Admission::kAccepted) {
    return Pressure::kDegraded;
  }
  return Pressure::kNormal;
}

RateMonitor::RateMonitor(std::chrono::nanoseconds window, double overload_ratio)
    : window_(window), overload_ratio_(overload_ratio) {}

void RateMonitor::sample(std::chrono::steady_clock::time_point now, uint64_t input_total,
                         uint64_t output_total) {
  samples_.push_back({now, input_total, output_total});
  // Keep the newest sample at or before now - window as the base, so the
  // retained samples cover the whole window once enough time has passed.
  while (samples_.size() > 2 && samples_[1].at <= now - window_) samples_.pop_front();
}

bool RateMonitor::overloaded() const {
  if (samples_.size() < 2) return false;
  const Sample& first = samples_.front();
  const Sample& last = samples_.back();
  if (last.at - first.at < window_) return false;
  const uint64_t in = last.input - first.input;
  const uint64_t out = last.output - first.output;
  return in > 0 && static_cast<double>(in) >= overload_ratio_ * static_cast<double>(out);
}

namespace {
double perSecond(uint64_t n, std::chrono::nanoseconds span) {
  if (span.count() <= 0) return 0;
  return static_cast<double>(n) / std::chrono::duration<double>(span).count();
}
}  // namespace

double RateMonitor::inputRate() const {
  if (samples_.size() < 2) return 0;
  return perSecond(samples_.back().input - samples_.front().input,
                   samples_.back().at - samples_.front().at);
}

double RateMonitor::outputRate() const {
  if (samples_.size() < 2) return 0;
  return perSecond(samples_.back().output - samples_.front().output,
                   samples_.back().at - samples_.front().at);
}

AdmissionController::AdmissionController(const AdmissionConfig& config, size_t capacity)
    : levels_(AdmissionLevels::from(config, capacity)),
      rates_(config.rate_window, config.overload_ratio) {}

Admission AdmissionController::admit(size_t queue_length, bool reliable,
                                     bool downstream_saturated) const {
  return decideAdmission(levels_, {queue_length, reliable, overloaded(), downstream_saturated});
}

Pressure AdmissionController::pressure(size_t queue_length, bool downstream_saturated) const {
  return decidePressure(levels_, {queue_length, true, overloaded(), downstream_saturated});
}

void AdmissionController::sample(std::chrono::steady_clock::time_point now, uint64_t offered_total,
                                 uint64_t handled_total) {
  rates_.sample(now, offered_total, handled_total);
  // Stored only on change: every offer() reads this line.
  const bool overloaded = rates_.overloaded();
  if (overloaded != overloaded_.load(std::memory_order_relaxed)) {
    overloaded_.store(overloaded, std::memory_order_relaxed);
  }
}

}  // namespace cepbus::stages
