#include "router/registry.h"

#include <utility>

#include "bus/core/wire_names.h"

namespace cepbus::router {

Registry::Registry() : wire_names_(stats_.scope(kWireNameSchema)) {
  namespace w = wire_name_stats;
  wire_names_->counter(w::kRefused, [] { return wireNameStats().refused; });
  wire_names_->gauge(w::kHeld, [] { return static_cast<double>(wireNameStats().held); });
  wire_names_->counter(w::kGivenBack, [] { return wireNameStats().given_back; });
  wire_names_->gauge(w::kBudget, [] { return static_cast<double>(wireNameStats().budget); });
}

Result<std::shared_ptr<ComponentEntry>> Registry::add(std::string name, ComponentKind kind,
                                                      std::string owner) {
  if (name.empty()) return Status::invalidArgument("registry: a component needs a name");
  MutexLock lock(mu_);
  if (entries_.contains(name)) {
    return Status::alreadyExists("registry: '" + name + "' is already registered");
  }
  auto entry = std::make_shared<ComponentEntry>(name, kind, std::move(owner), stats_);
  entries_.emplace(std::move(name), entry);
  return entry;
}

bool Registry::remove(std::string_view name) {
  std::shared_ptr<ComponentEntry> entry;
  {
    MutexLock lock(mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) return false;
    entry = std::move(it->second);
    entries_.erase(it);
  }
  entry->closeStats();
  return true;
}

std::shared_ptr<ComponentEntry> Registry::find(std::string_view name) const {
  MutexLock lock(mu_);
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : it->second;
}

size_t Registry::size() const {
  MutexLock lock(mu_);
  return entries_.size();
}

std::vector<std::shared_ptr<ComponentEntry>> Registry::entries() const {
  std::vector<std::shared_ptr<ComponentEntry>> entries;
  MutexLock lock(mu_);
  entries.reserve(entries_.size());
  for (const auto& [name, entry] : entries_) entries.push_back(entry);
  return entries;
}

std::vector<ComponentSnapshot> Registry::snapshot(std::chrono::steady_clock::time_point now) const {
  const std::vector<std::shared_ptr<ComponentEntry>> entries = this->entries();
  std::vector<ComponentSnapshot> out;
  out.reserve(entries.size());
  for (const auto& entry : entries) out.push_back(entry->snapshot(now));
  return out;
}

std::optional<ComponentSnapshot> Registry::snapshotOf(
    std::string_view name, std::chrono::steady_clock::time_point now) const {
  std::shared_ptr<ComponentEntry> entry = find(name);
  if (entry == nullptr) return std::nullopt;
  return entry->snapshot(now);
}

}  // namespace cepbus::router
