#include "router/component_entry.h"

namespace cepbus::router {

const char* componentKindName(ComponentKind kind) {
  switch (kind) {
    case ComponentKind::kService:
      return "service";
    case ComponentKind::kEndpoint:
      return "endpoint";
    case ComponentKind::kFlow:
      return "flow";
  }
  return "unknown";
}

const char* componentStateName(ComponentState state) {
  switch (state) {
    case ComponentState::kRegistered:
      return "registered";
    case ComponentState::kStarted:
      return "started";
    case ComponentState::kStopped:
      return "stopped";
    case ComponentState::kFailed:
      return "failed";
  }
  return "unknown";
}

ComponentEntry::ComponentEntry(std::string name, ComponentKind kind, std::string owner,
                               const stats::Store& stats)
    : name_(std::move(name)),
      kind_(kind),
      owner_(std::move(owner)),
      sample_at_(std::chrono::steady_clock::now()),
      scope_(stats.scope(kComponentSchema, {{"name", name_}, {"kind", componentKindName(kind_)}})) {
  namespace c = component_stats;
  scope_->counter(c::kDelivered, [this] { return live().delivered; });
  scope_->counter(c::kFailed, [this] { return live().failed; });
  scope_->counter(c::kRejected, [this] { return live().rejected; });
  scope_->gauge(c::kQueueLength, [this] { return static_cast<double>(live().queue_length); });
  scope_->gauge(c::kThroughput,
                [this] { return throughput(std::chrono::steady_clock::now(), live().delivered); });
}

void ComponentEntry::setState(ComponentState state, std::string reason) {
  MutexLock lock(mu_);
  state_ = state;
  reason_ = std::move(reason);
}

ComponentState ComponentEntry::state() const {
  MutexLock lock(mu_);
  return state_;
}

void ComponentEntry::setMetadata(std::string key, std::string value) {
  MutexLock lock(mu_);
  metadata_.insert_or_assign(std::move(key), std::move(value));
}

std::optional<std::string> ComponentEntry::metadata(std::string_view key) const {
  MutexLock lock(mu_);
  auto it = metadata_.find(key);
  if (it == metadata_.end()) return std::nullopt;
  return it->second;
}

void ComponentEntry::setProbe(Probe probe) {
  MutexLock lock(mu_);
  probe_ = std::move(probe);
}

LiveNumbers ComponentEntry::live() const {
  LiveNumbers numbers;
  numbers.queue_length = queue_length_.load(std::memory_order_relaxed);
  numbers.delivered = delivered_.load(std::memory_order_relaxed);
  numbers.failed = failed_.load(std::memory_order_relaxed);
  numbers.rejected = rejected_.load(std::memory_order_relaxed);
  Probe probe;
  {
    MutexLock lock(mu_);
    probe = probe_;
  }
  if (probe) probe(numbers);
  return numbers;
}

double ComponentEntry::throughput(std::chrono::steady_clock::time_point now, uint64_t delivered) {
  MutexLock lock(mu_);
  const auto elapsed = now - sample_at_;
  if (elapsed >= kMinSampleInterval) {
    const double seconds = std::chrono::duration<double>(elapsed).count();
    const uint64_t delta = delivered >= sample_delivered_ ? delivered - sample_delivered_ : 0;
    throughput_ = static_cast<double>(delta) / seconds;
    sample_at_ = now;
    sample_delivered_ = delivered;
  }
  return throughput_;
}

ComponentSnapshot ComponentEntry::snapshot(std::chrono::steady_clock::time_point now) {
  const LiveNumbers numbers = live();
  ComponentSnapshot s;
  s.name = name_;
  s.kind = kind_;
  s.owner = owner_;
  s.queue_length = numbers.queue_length;
  s.delivered = numbers.delivered;
  s.failed = numbers.failed;
  s.rejected = numbers.rejected;
  s.throughput_per_s = throughput(now, numbers.delivered);
  MutexLock lock(mu_);
  s.state = state_;
  s.reason = reason_;
  s.metadata.assign(metadata_.begin(), metadata_.end());
  return s;
}

void ComponentEntry::closeStats() {
  stats::ScopePtr scope;
  {
    MutexLock lock(mu_);
    scope = std::move(scope_);
  }
  // Destroyed without mu_: it waits for a function of it, which takes mu_.
  scope.reset();
}

}  // namespace cepbus::router
