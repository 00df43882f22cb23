#include "router/broker.h"

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "router/topic.h"

namespace cepbus::router {

namespace {

// The targets of one publish when some subscriptions filter: the
// unconditional ones plus those whose filter matches, on the stack unless
// the fan-out is large.
class SelectedTargets {
 public:
  std::span<flows::DeliveryTarget* const> select(const ResolvedRoute& route, const Event& event) {
    for (flows::DeliveryTarget* target : route.targets) push(target);
    for (const FilteredTarget& candidate : route.filtered) {
      for (const EventFilterPtr& filter : candidate.filters) {
        if (filter->matches(event)) {
          push(candidate.target);
          break;
        }
      }
    }
    if (!overflow_.empty()) return overflow_;
    return std::span<flows::DeliveryTarget* const>(inline_.data(), size_);
  }

 private:
  void push(flows::DeliveryTarget* target) {
    if (overflow_.empty() && size_ < inline_.size()) {
      inline_[size_++] = target;
      return;
    }
    if (overflow_.empty()) overflow_.assign(inline_.begin(), inline_.end());
    overflow_.push_back(target);
  }

  std::array<flows::DeliveryTarget*, 16> inline_{};
  size_t size_ = 0;
  std::vector<flows::DeliveryTarget*> overflow_;
};

// The targets of one send, by outcome.
void record(RouteStats& route, const flows::SendOutcome& out) {
  auto add = [](stats::Counter& counter, uint64_t n) {
    if (n != 0) counter.add(n);
  };
  add(route.delivered, out.delivered);
  add(route.enqueued, out.queued);
  add(route.rejected, out.rejected);
  add(route.failed, out.failed);
}

}  // namespace

Broker::Broker(std::unique_ptr<DeliveryPolicy> policy, std::shared_ptr<Registry> registry)
    : policy_(std::move(policy)),
      registry_(std::move(registry)),
      tracker_(std::make_shared<RequestTracker>()),
      cache_(reclaimer_) {
  const stats::Store& store = registry_->stats();
  for (size_t i = 0; i < policy_->routeCount(); ++i) {
    const RouteRule& rule = policy_->route(i);
    route_stats_.push_back(std::make_unique<RouteStats>(
        store.scope(kRouteSchema, {{"route", rule.pattern}, {"flow", rule.flow}})));
  }
  route_stats_.push_back(std::make_unique<RouteStats>(
      store.scope(kRouteSchema,
                  {{"route", std::string(kDefaultRouteLabel)}, {"flow", policy_->defaultFlow()}})));
  const std::weak_ptr<DeliveryPolicy> weak_policy = policy_;
  for (const auto& flow : policy_->flows()) {
    std::string name = "flow/" + flow->name();
    Result<std::shared_ptr<ComponentEntry>> entry =
        registry_->add(name, ComponentKind::kFlow, "broker");
    if (!entry) continue;  // a second broker on the same registry: its flows stay unlisted
    flows::AbstractFlow* raw = flow.get();
    (*entry)->setProbe([weak_policy, raw](LiveNumbers& numbers) {
      // The policy owns the flow: holding it keeps the flow alive for the read.
      if (std::shared_ptr<DeliveryPolicy> alive = weak_policy.lock()) {
        const flows::FlowMetricsSnapshot m = raw->metrics();
        numbers.delivered = m.delivered;
        numbers.failed = m.failed;
        numbers.rejected = m.rejected;
      }
    });
    flow_entries_.push_back(std::move(name));
  }
}

Broker::~Broker() {
  stop();
  std::vector<std::shared_ptr<Endpoint>> endpoints;
  {
    MutexLock lock(mu_);
    for (auto& [name, endpoint] : endpoints_) endpoints.push_back(endpoint);
  }
  for (const auto& endpoint : endpoints) {
    for (const auto& flow : policy_->flows()) flow->detach(*endpoint);
    registry_->remove(endpoint->name());
  }
  for (const std::string& name : flow_entries_) registry_->remove(name);
}

Status Broker::start() {
  MutexLock lifecycle(lifecycle_mu_);
  if (running_) return Status::ok();
  const auto flows = policy_->flows();
  for (size_t i = 0; i < flows.size(); ++i) {
    Status status = flows[i]->start();
    std::shared_ptr<ComponentEntry> entry = registry_->find("flow/" + flows[i]->name());
    if (!status.isOk()) {
      if (entry) entry->setState(ComponentState::kFailed, status.toString());
      for (size_t j = i; j-- > 0;) flows[j]->stop();
      return status;
    }
    if (entry) entry->setState(ComponentState::kStarted);
  }
  tracker_->start();
  running_ = true;
  return Status::ok();
}

void Broker::stop() {
  MutexLock lifecycle(lifecycle_mu_);
  if (!running_) return;
  running_ = false;
  const auto flows = policy_->flows();
  // Reverse order; the tracker last, so replies from draining queues still land.
  for (size_t i = flows.size(); i-- > 0;) {
    flows[i]->stop();
    if (auto entry = registry_->find("flow/" + flows[i]->name())) {
      entry->setState(ComponentState::kStopped);
    }
  }
  tracker_->stop();
}

Status Broker::addEndpoint(std::string name, Endpoint::Consumer consumer, std::string owner) {
  if (!consumer) return Status::invalidArgument("endpoint " + name + ": no consumer");
  Result<std::shared_ptr<ComponentEntry>> entry =
      registry_->add(name, ComponentKind::kEndpoint, std::move(owner));
  if (!entry) return entry.status();
  auto endpoint = std::make_shared<Endpoint>(name, std::move(consumer), *entry);
  const auto flows = policy_->flows();
  for (size_t i = 0; i < flows.size(); ++i) {
    if (Status status = flows[i]->attach(*endpoint); !status.isOk()) {
      for (size_t j = i; j-- > 0;) flows[j]->detach(*endpoint);
      registry_->remove(name);
      return status;
    }
  }
  const std::weak_ptr<DeliveryPolicy> weak_policy = policy_;
  const std::weak_ptr<Endpoint> weak_endpoint = endpoint;
  (*entry)->setProbe([weak_policy, weak_endpoint](LiveNumbers& numbers) {
    std::shared_ptr<DeliveryPolicy> policy = weak_policy.lock();
    std::shared_ptr<Endpoint> alive = weak_endpoint.lock();
    if (policy == nullptr || alive == nullptr) return;
    uint64_t queued = 0;
    for (const auto& flow : policy->flows()) queued += flow->queueLength(*alive);
    numbers.queue_length = queued;
  });
  (*entry)->setState(ComponentState::kStarted);
  MutexLock lock(mu_);
  endpoints_.emplace(std::move(name), std::move(endpoint));
  return Status::ok();
}

Status Broker::removeEndpoint(std::string_view name, EndpointExit exit) {
  std::shared_ptr<Endpoint> endpoint;
  {
    MutexLock lock(mu_);
    auto it = endpoints_.find(name);
    if (it == endpoints_.end()) {
      return Status::notFound("no endpoint named '" + std::string(name) + "'");
    }
    endpoint = std::move(it->second);
    endpoints_.erase(it);
    subscriptions_.removeTarget(endpoint.get());
    std::erase_if(providers_, [&](const auto& entry) { return entry.second.endpoint == endpoint; });
    invalidateRoutes();
  }
  // Outside the lock: draining may deliver, and deliveries may publish.
  for (const auto& flow : policy_->flows()) {
    if (exit == EndpointExit::kForGood) {
      flow->retire(*endpoint);
    } else {
      flow->detach(*endpoint);
    }
  }
  endpoint->entry().setState(ComponentState::kStopped);
  registry_->remove(endpoint->name());
  return Status::ok();
}

void Broker::forgetAway(std::string_view name) {
  if (endpoint(name) != nullptr) return;
  for (const auto& flow : policy_->flows()) flow->forgetAway(name);
}

std::vector<std::string> Broker::awayEndpoints(std::string_view prefix) const {
  std::vector<std::string> names;
  for (const auto& flow : policy_->flows()) {
    for (std::string& name : flow->awayNames()) {
      if (name.starts_with(prefix)) names.push_back(std::move(name));
    }
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  std::erase_if(names, [this](const std::string& name) { return endpoint(name) != nullptr; });
  return names;
}

std::shared_ptr<Endpoint> Broker::endpoint(std::string_view name) const {
  MutexLock lock(mu_);
  auto it = endpoints_.find(name);
  return it == endpoints_.end() ? nullptr : it->second;
}

Result<SubscriptionId> Broker::subscribe(std::string_view endpoint, std::string_view pattern,
                                         EventFilterPtr filter) {
  MutexLock lock(mu_);
  auto it = endpoints_.find(endpoint);
  if (it == endpoints_.end()) {
    return Status::notFound("subscribe: no endpoint named '" + std::string(endpoint) + "'");
  }
  Result<SubscriptionId> id = subscriptions_.add(pattern, it->second, std::move(filter));
  if (id) invalidateRoutes();
  return id;
}

Status Broker::unsubscribe(SubscriptionId id) {
  MutexLock lock(mu_);
  if (!subscriptions_.remove(id)) {
    return Status::notFound("unsubscribe: no subscription " + std::to_string(id));
  }
  invalidateRoutes();
  return Status::ok();
}

size_t Broker::subscriptionCount() const {
  MutexLock lock(mu_);
  return subscriptions_.size();
}

Status Broker::provide(std::string_view address, std::string_view endpoint) {
  if (Status s = validateAddress(address); !s.isOk()) return s;
  MutexLock lock(mu_);
  auto it = endpoints_.find(endpoint);
  if (it == endpoints_.end()) {
    return Status::notFound("provide: no endpoint named '" + std::string(endpoint) + "'");
  }
  std::optional<NameHold> held = holdWireName(address);
  if (!held) return Status::unavailable("provide: " + wireNameRefusal("address", address));
  SharedName name(std::move(*held));
  auto [slot, inserted] = providers_.try_emplace(name.symbol(), Provider{name, it->second});
  if (!inserted) {
    return Status::alreadyExists("provide: '" + std::string(address) + "' is provided by " +
                                 slot->second.endpoint->name());
  }
  return Status::ok();
}

Status Broker::withdraw(std::string_view address) {
  MutexLock lock(mu_);
  // By name: a held address has no symbol Symbol::find() knows.
  if (std::erase_if(providers_, [&](const auto& entry) {
        return entry.second.address.name() == address;
      }) == 0) {
    return Status::notFound("withdraw: no provider for '" + std::string(address) + "'");
  }
  return Status::ok();
}

void Broker::invalidateRoutes() {
  cache_.clear();
  reclaimer_.reclaim();
}

const ResolvedRoute* Broker::route(Symbol address) {
  const ResolvedRoute* cached = cache_.find(address);
  return cached != nullptr ? cached : resolve(address);
}

const ResolvedRoute* Broker::resolve(Symbol address) {
  MutexLock lock(mu_);
  if (const ResolvedRoute* cached = cache_.find(address)) return cached;
  const ResolvedRoute* installed = cache_.install(buildRoute(address));
  reclaimer_.reclaim();
  return installed;
}

std::unique_ptr<ResolvedRoute> Broker::buildRoute(Symbol address) const {
  auto route = std::make_unique<ResolvedRoute>();
  route->address = address;
  route->incarnation = heldNameIncarnation(address);
  const std::string_view name = address.name();
  if (Status s = validateAddress(name); !s.isOk()) {
    route->invalid = std::move(s);
    return route;
  }
  for (flows::Qos qos : {flows::Qos::kBestEffort, flows::Qos::kReliable}) {
    Result<DeliveryDecision> decision = policy_->decide(name, qos);
    if (!decision) {
      route->invalid = decision.status();
      return route;
    }
    route->decisions[static_cast<size_t>(qos)] = *decision;
  }

  std::vector<const Subscription*> matches;
  subscriptions_.match(name, matches);
  // One entry per target: unconditional if any subscription has no filter.
  struct Wanted {
    std::shared_ptr<flows::DeliveryTarget> target;
    bool unconditional = false;
    std::vector<EventFilterPtr> filters;
  };
  std::vector<Wanted> wanted;
  std::unordered_map<const flows::DeliveryTarget*, size_t> index;
  for (const Subscription* s : matches) {
    auto [it, inserted] = index.try_emplace(s->target.get(), wanted.size());
    if (inserted) wanted.push_back(Wanted{s->target, false, {}});
    Wanted& w = wanted[it->second];
    if (s->filter == nullptr) {
      w.unconditional = true;
    } else {
      w.filters.push_back(s->filter);
    }
  }
  for (Wanted& w : wanted) {
    if (w.unconditional) {
      route->targets.push_back(w.target.get());
    } else {
      route->filtered.push_back(FilteredTarget{w.target.get(), std::move(w.filters)});
    }
    route->keep_alive.push_back(std::move(w.target));
  }
  return route;
}

void Broker::reportUnrouted(const flows::Exchange& exchange) {
  if (exchange.pattern == flows::Pattern::kInOnly || exchange.listener == nullptr) return;
  exchange.report(flows::Outcome{
      flows::OutcomeKind::kFault,
      {},
      Status::notFound("no subscriber for '" + std::string(exchange.address.name()) + "'"),
      nullptr});
}

flows::SendOutcome Broker::refusePaused(const flows::Exchange& exchange, RouteStats& stats) {
  stats.refused_paused.inc();
  flows::SendOutcome out;
  out.status = Status::unavailable("route for '" + std::string(exchange.address.name()) +
                                   "' is paused; retry later");
  exchange.report(flows::Outcome{flows::OutcomeKind::kRejected, {}, out.status, nullptr});
  return out;
}

Status Broker::setRoutePaused(std::string_view pattern, bool paused) {
  const size_t routes = policy_->routeCount();
  size_t index = routes;
  if (!pattern.empty()) {
    for (index = 0; index < routes && policy_->route(index).pattern != pattern; ++index) {
    }
    if (index == routes) {
      return Status::notFound("no route with pattern '" + std::string(pattern) + "'");
    }
  }
  route_stats_[index]->paused.store(paused, std::memory_order_relaxed);
  return Status::ok();
}

flows::SendOutcome Broker::publish(const flows::Exchange& exchange, flows::WakeHold* wake_hold) {
  if (exchange.event == nullptr) {
    flows::SendOutcome out;
    out.status = Status::invalidArgument("publish: exchange without an event");
    exchange.report(flows::Outcome{flows::OutcomeKind::kRejected, {}, out.status, nullptr});
    return out;
  }
  EpochReclaimer::Guard guard = reclaimer_.enter();
  const ResolvedRoute* resolved = route(exchange.address);
  if (!resolved->invalid.isOk()) {
    flows::SendOutcome out;
    out.status = resolved->invalid;
    exchange.report(flows::Outcome{flows::OutcomeKind::kRejected, {}, out.status, nullptr});
    return out;
  }
  const DeliveryDecision& decision = resolved->decisions[static_cast<size_t>(exchange.qos)];
  RouteStats& stats = *route_stats_[decision.route];
  if (stats.paused.load(std::memory_order_relaxed)) [[unlikely]] {
    return refusePaused(exchange, stats);
  }
  stats.published.inc();

  SelectedTargets selected;
  std::span<flows::DeliveryTarget* const> targets = resolved->targets;
  if (!resolved->filtered.empty()) targets = selected.select(*resolved, *exchange.event);
  if (targets.empty()) {
    stats.unrouted.inc();
    reportUnrouted(exchange);
    return flows::SendOutcome{};
  }

  flows::SendOutcome out;
  if (decision.qos == exchange.qos) {
    out = decision.flow->send(exchange, targets, wake_hold);
  } else {
    flows::Exchange adjusted = exchange;
    adjusted.qos = decision.qos;
    out = decision.flow->send(adjusted, targets, wake_hold);
  }
  record(stats, out);
  return out;
}

Result<uint64_t> Broker::request(flows::Exchange exchange, std::chrono::nanoseconds timeout,
                                 ReplyCallback on_reply) {
  if (exchange.event == nullptr)
    return Status::invalidArgument("request: exchange without an event");
  if (!on_reply) return Status::invalidArgument("request: no reply callback");
  std::shared_ptr<Endpoint> provider;
  {
    MutexLock lock(mu_);
    auto it = providers_.find(exchange.address);
    if (it == providers_.end()) {
      return Status::notFound("request: no provider for '" + std::string(exchange.address.name()) +
                              "'");
    }
    provider = it->second.endpoint;
  }
  EpochReclaimer::Guard guard = reclaimer_.enter();
  const ResolvedRoute* resolved = route(exchange.address);
  if (!resolved->invalid.isOk()) return resolved->invalid;
  const DeliveryDecision& decision = resolved->decisions[static_cast<size_t>(exchange.qos)];
  RouteStats& stats = *route_stats_[decision.route];
  if (stats.paused.load(std::memory_order_relaxed)) {
    stats.refused_paused.inc();
    return Status::unavailable("route for '" + std::string(exchange.address.name()) +
                               "' is paused; retry later");
  }

  Result<uint64_t> id = tracker_->track(timeout, std::move(on_reply));
  if (!id) return id.status();
  exchange.pattern = flows::Pattern::kInOut;
  exchange.qos = decision.qos;
  exchange.correlation_id = *id;
  exchange.listener = tracker_;

  stats.published.inc();
  flows::DeliveryTarget* target = provider.get();
  // Outcomes (a rejection included) reach the caller through the tracker.
  record(stats, decision.flow->send(exchange, std::span<flows::DeliveryTarget* const>(&target, 1)));
  return *id;
}

}  // namespace cepbus::router
