#pragma once

// Store and Scope: where the bus's components register their numbers, and
// where the renderers (/metrics, /api) read them.
//
// A Store knows the families (each kind of component declares its Schema
// once: names, kinds, help texts) and the live scopes. A Scope is one
// component's registration: a Schema and labels ({flow="st"}), and the
// metrics it hands out, which it owns. While the scope lives the store
// renders them; destroying it removes them, so components that come and go
// at run time (queries, routes, connections) take their numbers with them.
// A family stays declared once its last scope is gone: a scrape shows the
// same families, with or without samples.
//
//   ScopePtr scope = store.scope(kFlowSchema, {{"flow", "st"}});
//   Counter& sent = scope->counter(kSent);   // at construction, once
//   sent.inc();                              // on the data path
//
// Registration (scope(), counter(), ...) is the control plane: it locks and
// allocates. Registering a name again in a scope returns what the first
// registration made: a metric is registered once.
//
// What a component knows anyway (a queue's length, a pool's size) is
// registered as a function, read when the store is. A function runs with
// its scope's lock held, so that none runs once the scope is destroyed: it
// must be quick and must not call into the store, and the destructor of a
// scope waits for a function of it that runs, so whoever destroys a scope
// must not hold a lock its functions take.
//
// Two live scopes with one schema and the same labels are both kept (a
// component replaced while the old one winds down); renderers show the
// older one.
//
// Thread-safety: every member of Store and Scope may be called from any
// thread. Ownership: a Store is a handle; its copies share one store, which
// lives as long as any copy or scope of it. A Scope belongs to its
// component (ScopePtr); the references it hands out are valid while it lives.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bus/base/stats/histogram.h"
#include "bus/base/stats/metric.h"

namespace cepbus::stats {

namespace detail {
struct StoreState;
struct ScopeState;
}  // namespace detail

class Scope;
using ScopePtr = std::unique_ptr<Scope>;

// A declared family: cepbus_<component>_<name>.
struct Family {
  std::string component;
  std::string name;
  MetricKind kind = MetricKind::kCounter;
  std::string help;
};

// One metric of a scope, as read.
struct MetricValue {
  std::string name;
  MetricKind kind = MetricKind::kCounter;
  double value = 0;          // a counter or a gauge
  HistogramSummary summary;  // a histogram
};

// One scope, as read: what the renderers iterate.
struct ScopeSnapshot {
  std::string component;
  Labels labels;
  std::vector<MetricValue> metrics;  // in registration order

  // The value of label `key`; empty when the scope has no such label.
  std::string_view label(std::string_view key) const;
  // The metric `name`; null when the scope has none.
  const MetricValue* find(std::string_view name) const;
};

class Store {
 public:
  // An empty store of its own.
  Store();

  // Declares every family of `schema` (again: no effect).
  void declare(const Schema& schema) const;
  // A new scope of `schema`'s component with `labels`; declares the schema.
  ScopePtr scope(const Schema& schema, Labels labels = {}) const;

  // Every declared family, sorted by component, then name.
  std::vector<Family> families() const;
  // Chooses scopes by their component and labels, before they are read.
  using Filter = std::function<bool(std::string_view component, const Labels& labels)>;

  // The live scopes of `component` (every component's when empty), read
  // now, in the order they were made.
  std::vector<ScopeSnapshot> scopes(std::string_view component = {}) const;
  // The live scopes `which` accepts, read now, in the order they were made.
  std::vector<ScopeSnapshot> scopes(const Filter& which) const;

 private:
  friend class Scope;
  explicit Store(std::shared_ptr<detail::StoreState> state);

  std::shared_ptr<detail::StoreState> state_;
};

class Scope {
 public:
  ~Scope();  // removes its metrics from the store
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  const std::string& component() const;
  const Labels& labels() const;

  // The metric `spec` of this scope, registered on the first call. `spec`
  // must be one of the scope's schema.
  Counter& counter(const MetricSpec& spec);
  Gauge& gauge(const MetricSpec& spec);
  Histogram& histogram(const MetricSpec& spec);
  // A counter or gauge `spec` whose value `read` returns when the store is
  // read (see above). A second registration of the name is ignored.
  void counter(const MetricSpec& spec, std::function<uint64_t()> read);
  void gauge(const MetricSpec& spec, std::function<double()> read);

  // A scope of another schema in the same store, with this scope's labels
  // followed by `more`: a stage {flow, stage} of a flow {flow}.
  ScopePtr child(const Schema& schema, Labels more = {}) const;

 private:
  friend class Store;
  Scope(std::shared_ptr<detail::StoreState> store, std::shared_ptr<detail::ScopeState> state);

  const std::shared_ptr<detail::StoreState> store_;
  const std::shared_ptr<detail::ScopeState> state_;
};

}  // namespace cepbus::stats
