#pragma once

// Registry: the shared state of the router (P1) — every service, endpoint and
// flow with its runtime state, metadata and live numbers. Components register
// and report into their entry; the admin side reads snapshots. It also holds
// the stats store (bus/base/stats/) every component of the bus reports its
// numbers into, which /metrics and /api render; the store has the
// registry's entries (kComponentSchema) and the process-wide budget of names
// clients may create (bus/core/wire_names.h, kWireNameSchema) from the start.

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/base/stats/store.h"
#include "bus/core/status.h"
#include "router/component_entry.h"

namespace cepbus::router {

namespace wire_name_stats {
using stats::MetricSpec;
inline constexpr MetricSpec kRefused = MetricSpec::counter(
    "refused",
    "Event types and attribute names from clients refused: the budget of names held "
    "was spent.");
inline constexpr MetricSpec kHeld = MetricSpec::gauge(
    "held", "Names from clients in the symbol table now; given back when nothing holds them.");
inline constexpr MetricSpec kGivenBack = MetricSpec::counter(
    "given_back", "Names from clients freed because nothing held them any more.");
inline constexpr MetricSpec kBudget =
    MetricSpec::gauge("budget", "How many names clients may create.");
inline constexpr MetricSpec kAll[] = {kRefused, kHeld, kGivenBack, kBudget};
}  // namespace wire_name_stats
inline constexpr stats::Schema kWireNameSchema{"wire_names", wire_name_stats::kAll};

// Thread-safety: every member may be called from any thread. Ownership:
// entries are shared with the components that report into them; a removed
// entry lives on until its last holder drops it, but no longer shows up.
class Registry {
 public:
  Registry();

  // AlreadyExists when `name` is taken; InvalidArgument for an empty name.
  Result<std::shared_ptr<ComponentEntry>> add(std::string name, ComponentKind kind,
                                              std::string owner = {});
  // False when there is no such entry. Its numbers leave the stats store.
  bool remove(std::string_view name);
  std::shared_ptr<ComponentEntry> find(std::string_view name) const;
  size_t size() const;
  // Every entry, sorted by name, as it is (nothing probed): for readers of
  // metadata on the control path (router/relays.h).
  std::vector<std::shared_ptr<ComponentEntry>> entries() const;

  // Every entry, sorted by name. Probes run outside the registry's lock.
  std::vector<ComponentSnapshot> snapshot(
      std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) const;
  std::optional<ComponentSnapshot> snapshotOf(
      std::string_view name,
      std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) const;

  // The store the bus's components report into.
  const stats::Store& stats() const { return stats_; }

 private:
  const stats::Store stats_;
  const stats::ScopePtr wire_names_;
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<ComponentEntry>, std::less<>> entries_ GUARDED_BY(mu_);
};

}  // namespace cepbus::router
