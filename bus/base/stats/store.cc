#include "bus/base/stats/store.h"

#include <cassert>
#include <map>
#include <utility>

#include "bus/base/mutex.h"

namespace cepbus::stats {
namespace detail {

struct ScopeState {
  using Reader = std::function<double()>;
  // One metric: exactly one of the owned ones, or a function that reads it.
  struct Entry {
    const Family* family;  // the store's, which never removes one
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
    Reader read;
  };

  ScopeState(uint64_t scope_id, std::string scope_component, Labels scope_labels)
      : id(scope_id), component(std::move(scope_component)), labels(std::move(scope_labels)) {}

  const uint64_t id;  // creation order
  const std::string component;
  const Labels labels;
  Mutex mu;
  bool closed GUARDED_BY(mu) = false;  // its Scope is destroyed: nothing to read
  std::vector<Entry> entries GUARDED_BY(mu);
};

struct StoreState {
  static Family familyOf(const std::string& component, const MetricSpec& spec) {
    return Family{component, std::string(spec.name), spec.kind, std::string(spec.help)};
  }

  // Declares `schema`'s families that are not declared yet.
  void declare(const Schema& schema) REQUIRES(mu) {
    const std::string component(schema.component);
    auto& declared = families[component];
    for (const MetricSpec& spec : schema.metrics) {
      declared.try_emplace(std::string(spec.name), familyOf(component, spec));
    }
  }

  // The family of `spec` in `component`'s schema.
  const Family* family(const std::string& component, const MetricSpec& spec) EXCLUDES(mu) {
    MutexLock lock(mu);
    auto& declared = families[component];
    auto it = declared.find(spec.name);
    if (it == declared.end()) {
      // A spec its schema does not list: declared now, so it still renders.
      assert(false && "a metric registered outside its scope's schema");
      it = declared.try_emplace(std::string(spec.name), familyOf(component, spec)).first;
    }
    assert(it->second.kind == spec.kind && "a metric registered with another kind");
    return &it->second;
  }

  Mutex mu;
  // By component, then name. Families are never removed, nor changed.
  std::map<std::string, std::map<std::string, Family, std::less<>>, std::less<>> families
      GUARDED_BY(mu);
  std::map<uint64_t, std::shared_ptr<ScopeState>> scopes GUARDED_BY(mu);  // the live ones, by id
  uint64_t next_id GUARDED_BY(mu) = 1;
};

}  // namespace detail

namespace {

using detail::ScopeState;

// The metric `family` of `scope` held in `slot`, made on the first call.
template <typename T>
T& owned(ScopeState& scope, const Family* family, std::unique_ptr<T> ScopeState::Entry::*slot) {
  MutexLock lock(scope.mu);
  for (ScopeState::Entry& entry : scope.entries) {
    if (entry.family != family) continue;
    if (entry.*slot != nullptr) return *(entry.*slot);
    assert(false && "a metric registered twice, as two different things");
  }
  ScopeState::Entry entry{family, nullptr, nullptr, nullptr, nullptr};
  entry.*slot = std::make_unique<T>();
  T& made = *(entry.*slot);
  scope.entries.push_back(std::move(entry));
  return made;
}

MetricValue valueOf(const ScopeState::Entry& entry) {
  MetricValue out{entry.family->name, entry.family->kind, 0, {}};
  if (entry.counter != nullptr) {
    out.value = static_cast<double>(entry.counter->value());
  } else if (entry.gauge != nullptr) {
    out.value = static_cast<double>(entry.gauge->value());
  } else if (entry.histogram != nullptr) {
    out.summary = entry.histogram->summary();
  } else if (entry.read) {
    out.value = entry.read();
  }
  return out;
}

}  // namespace

std::string_view ScopeSnapshot::label(std::string_view key) const {
  for (const auto& [k, v] : labels) {
    if (k == key) return v;
  }
  return {};
}

const MetricValue* ScopeSnapshot::find(std::string_view name) const {
  for (const MetricValue& m : metrics) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

Store::Store() : state_(std::make_shared<detail::StoreState>()) {}

Store::Store(std::shared_ptr<detail::StoreState> state) : state_(std::move(state)) {}

void Store::declare(const Schema& schema) const {
  MutexLock lock(state_->mu);
  state_->declare(schema);
}

ScopePtr Store::scope(const Schema& schema, Labels labels) const {
  MutexLock lock(state_->mu);
  state_->declare(schema);
  auto state = std::make_shared<ScopeState>(state_->next_id++, std::string(schema.component),
                                            std::move(labels));
  state_->scopes.emplace(state->id, state);
  return ScopePtr(new Scope(state_, std::move(state)));
}

std::vector<Family> Store::families() const {
  std::vector<Family> out;
  MutexLock lock(state_->mu);
  for (const auto& [component, families] : state_->families) {
    for (const auto& [name, family] : families) out.push_back(family);
  }
  return out;
}

std::vector<ScopeSnapshot> Store::scopes(std::string_view component) const {
  return scopes([component](std::string_view c, const Labels&) {
    return component.empty() || c == component;
  });
}

std::vector<ScopeSnapshot> Store::scopes(const Filter& which) const {
  // Read outside the store's lock: a function may take a lock of its own
  // under which someone makes a scope.
  std::vector<std::shared_ptr<ScopeState>> live;
  {
    MutexLock lock(state_->mu);
    for (const auto& [id, scope] : state_->scopes) {
      if (which(scope->component, scope->labels)) live.push_back(scope);
    }
  }
  std::vector<ScopeSnapshot> out;
  out.reserve(live.size());
  for (const auto& scope : live) {
    ScopeSnapshot snapshot{scope->component, scope->labels, {}};
    MutexLock lock(scope->mu);
    if (scope->closed) continue;
    snapshot.metrics.reserve(scope->entries.size());
    for (const ScopeState::Entry& entry : scope->entries) {
      snapshot.metrics.push_back(valueOf(entry));
    }
    out.push_back(std::move(snapshot));
  }
  return out;
}

Scope::Scope(std::shared_ptr<detail::StoreState> store, std::shared_ptr<detail::ScopeState> state)
    : store_(std::move(store)), state_(std::move(state)) {}

Scope::~Scope() {
  {
    // Waits for a function that runs; drops what the functions hold.
    MutexLock lock(state_->mu);
    state_->closed = true;
    for (ScopeState::Entry& entry : state_->entries) entry.read = nullptr;
  }
  MutexLock lock(store_->mu);
  store_->scopes.erase(state_->id);
}

const std::string& Scope::component() const { return state_->component; }

const Labels& Scope::labels() const { return state_->labels; }

Counter& Scope::counter(const MetricSpec& spec) {
  return owned(*state_, store_->family(state_->component, spec), &ScopeState::Entry::counter);
}

Gauge& Scope::gauge(const MetricSpec& spec) {
  return owned(*state_, store_->family(state_->component, spec), &ScopeState::Entry::gauge);
}

Histogram& Scope::histogram(const MetricSpec& spec) {
  return owned(*state_, store_->family(state_->component, spec), &ScopeState::Entry::histogram);
}

void Scope::counter(const MetricSpec& spec, std::function<uint64_t()> read) {
  gauge(spec, [read = std::move(read)] { return static_cast<double>(read()); });
}

void Scope::gauge(const MetricSpec& spec, std::function<double()> read) {
  const Family* family = store_->family(state_->component, spec);
  MutexLock lock(state_->mu);
  for (const ScopeState::Entry& entry : state_->entries) {
    if (entry.family == family) return;
  }
  state_->entries.push_back({family, nullptr, nullptr, nullptr, std::move(read)});
}

ScopePtr Scope::child(const Schema& schema, Labels more) const {
  Labels labels = state_->labels;
  labels.insert(labels.end(), std::make_move_iterator(more.begin()),
                std::make_move_iterator(more.end()));
  return Store(store_).scope(schema, std::move(labels));
}

}  // namespace cepbus::stats
