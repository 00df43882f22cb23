#pragma once

// ComponentEntry: one service, endpoint or flow in the registry (the shared
// state of P1): its runtime state, its metadata, and its live numbers.
//
// Components push their counters (lock-free atomics, cheap on the data path)
// and may install a probe that the registry calls when it takes a snapshot,
// for numbers that are cheaper to read than to push (a stage's queue length).
// The live numbers are reported in the stats scope "component" {name, kind}
// (kComponentSchema), read whenever the store is, until the entry leaves
// the registry (closeStats()).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/base/stats/store.h"

namespace cepbus::router {

enum class ComponentKind : uint8_t { kService, kEndpoint, kFlow };

enum class ComponentState : uint8_t {
  kRegistered,  // known, not started yet
  kStarted,
  kStopped,
  kFailed,  // the reason says why
};

const char* componentKindName(ComponentKind kind);
const char* componentStateName(ComponentState state);

namespace component_stats {
using stats::MetricSpec;
inline constexpr MetricSpec kDelivered =
    MetricSpec::counter("delivered", "Deliveries the component completed.");
inline constexpr MetricSpec kFailed =
    MetricSpec::counter("failed", "Deliveries that failed at the component.");
inline constexpr MetricSpec kRejected =
    MetricSpec::counter("rejected", "Deliveries to the component refused by admission.");
inline constexpr MetricSpec kQueueLength =
    MetricSpec::gauge("queue_length", "Events waiting in the component's queues.");
inline constexpr MetricSpec kThroughput = MetricSpec::gauge(
    "throughput_per_second", "Deliveries per second over the last sampling interval.");
inline constexpr MetricSpec kAll[] = {kDelivered, kFailed, kRejected, kQueueLength, kThroughput};
}  // namespace component_stats
inline constexpr stats::Schema kComponentSchema{"component", component_stats::kAll};

// Numbers a probe may fill in; they start as the pushed counters.
struct LiveNumbers {
  uint64_t queue_length = 0;
  uint64_t delivered = 0;
  uint64_t failed = 0;
  uint64_t rejected = 0;
};

// A plain copy for the admin side.
struct ComponentSnapshot {
  std::string name;
  ComponentKind kind = ComponentKind::kService;
  std::string owner;  // e.g. the service an endpoint belongs to
  ComponentState state = ComponentState::kRegistered;
  std::string reason;
  std::vector<std::pair<std::string, std::string>> metadata;  // sorted by key
  uint64_t queue_length = 0;
  uint64_t delivered = 0;
  uint64_t failed = 0;
  uint64_t rejected = 0;
  double throughput_per_s = 0;  // delivered per second over the last sampling interval
};

// Thread-safety: every member may be called from any thread. Counters are
// relaxed atomics; state and metadata are under a mutex. The probe is called
// without the entry's lock held and must not call setProbe(); it runs
// whenever the registry's snapshot or the stats store is read.
class ComponentEntry {
 public:
  using Probe = std::function<void(LiveNumbers&)>;
  // Throughput is measured over intervals of at least this much.
  static constexpr std::chrono::milliseconds kMinSampleInterval{250};

  // Reports its live numbers into `stats` (by default a store of its own).
  ComponentEntry(std::string name, ComponentKind kind, std::string owner,
                 const stats::Store& stats = {});

  const std::string& name() const { return name_; }
  ComponentKind kind() const { return kind_; }
  const std::string& owner() const { return owner_; }

  void setState(ComponentState state, std::string reason = {});
  ComponentState state() const;
  void setMetadata(std::string key, std::string value);
  std::optional<std::string> metadata(std::string_view key) const;

  void addDelivered(uint64_t n = 1) { delivered_.fetch_add(n, std::memory_order_relaxed); }
  void addFailed(uint64_t n = 1) { failed_.fetch_add(n, std::memory_order_relaxed); }
  void addRejected(uint64_t n = 1) { rejected_.fetch_add(n, std::memory_order_relaxed); }
  void setQueueLength(uint64_t n) { queue_length_.store(n, std::memory_order_relaxed); }
  void setProbe(Probe probe);

  // A copy of everything, probing the live numbers; `now` advances the
  // throughput sample when kMinSampleInterval has passed since the last one.
  ComponentSnapshot snapshot(std::chrono::steady_clock::time_point now);
  // Takes its numbers out of the stats store (the entry left the registry).
  // Not to be called with a lock held that the probe takes.
  void closeStats() EXCLUDES(mu_);

 private:
  // The pushed counters, then what the probe makes of them.
  LiveNumbers live() const EXCLUDES(mu_);
  // The throughput over the last sample, advancing it as snapshot() says.
  double throughput(std::chrono::steady_clock::time_point now, uint64_t delivered) EXCLUDES(mu_);

  const std::string name_;
  const ComponentKind kind_;
  const std::string owner_;
  std::atomic<uint64_t> delivered_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> rejected_{0};
  std::atomic<uint64_t> queue_length_{0};

  mutable Mutex mu_;
  ComponentState state_ GUARDED_BY(mu_) = ComponentState::kRegistered;
  std::string reason_ GUARDED_BY(mu_);
  std::map<std::string, std::string, std::less<>> metadata_ GUARDED_BY(mu_);
  Probe probe_ GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point sample_at_ GUARDED_BY(mu_);
  uint64_t sample_delivered_ GUARDED_BY(mu_) = 0;
  double throughput_ GUARDED_BY(mu_) = 0;
  // Last, so destroyed first: its functions read everything above. Reset by
  // closeStats().
  stats::ScopePtr scope_ GUARDED_BY(mu_);
};

}  // namespace cepbus::router
