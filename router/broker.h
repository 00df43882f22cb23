#pragma once

// Broker: the core of the normalized router (P1). publish() resolves the
// subscribers of an exchange's address (topic patterns with content filters),
// asks the delivery policy which flow carries it and with what QoS, and hands
// it to that flow. request() invokes the one provider of an address with an
// in-out exchange and correlates its reply, or times it out.
//
// The publish path takes no lock and hashes no string: the address is an
// interned Symbol that indexes the route cache, whose entries (targets,
// filters, decisions) are built on the first publish to an address and
// dropped whenever subscriptions change; an epoch guard keeps a route alive
// for readers that loaded it before it was dropped. Subscribing is the slow
// path (a mutex, the subscription table, a cache reset).
//
// Faults and outcomes: an exchange whose pattern asks for faults (robust
// in-only, in-out) hears kFault when no target subscribes to its address, and
// whatever its flow reports otherwise (see flows/exchange.h).
//
// Pausing a route (an operator's call, e.g. while a consumer is redeployed):
// publish() and request() refuse every exchange the route would carry with
// Unavailable (the exchange hears kRejected), before anything is queued, so
// a publisher that retries on Unavailable (the AMQP listener releases the
// delivery, the admin API answers 503) loses nothing; what the route had
// accepted before the pause is still delivered. Resuming lets exchanges
// through again. The check is one relaxed load of a flag that sits next to
// the route's counters, which publish() writes anyway.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/core/event_filter.h"
#include "bus/core/status.h"
#include "bus/core/symbol.h"
#include "bus/core/wire_names.h"
#include "flows/abstract_flow.h"
#include "flows/exchange.h"
#include "router/delivery_policy.h"
#include "router/endpoint.h"
#include "router/epoch_reclaimer.h"
#include "router/registry.h"
#include "router/request_tracker.h"
#include "router/route_cache.h"
#include "router/route_stats.h"
#include "router/subscription_table.h"

namespace cepbus::router {

// Whether an endpoint that is removed may come back under its name: a
// service being redeployed or a durable subscriber that is away may, and
// the flows keep what waits for it (a reliable flow's records); a
// subscription that ended will not, and what waited for it goes.
enum class EndpointExit : uint8_t { kMayReturn, kForGood };

// Thread-safety: publish() and request() may be called from any thread,
// concurrently with each other and with the control calls (endpoints,
// subscriptions, providers, start/stop), which are serialized internally.
// Control calls must not be made from inside a delivery to an endpoint of a
// queueing flow (removing an endpoint waits for its stages to drain); publish
// and request may. After removeEndpoint() or unsubscribe() returns, a
// straight-through delivery that was already in flight may still complete.
// Ownership: owns the policy (and so the flows), the endpoints, the
// subscriptions and the request tracker; shares the registry.
class Broker {
 public:
  Broker(std::unique_ptr<DeliveryPolicy> policy, std::shared_ptr<Registry> registry);
  ~Broker();  // stops, detaches the endpoints, removes its registry entries
  Broker(const Broker&) = delete;
  Broker& operator=(const Broker&) = delete;

  // Starts the flows, in policy order, and the request tracker. If a flow
  // fails to start, the ones started are stopped again and its status returned.
  Status start();
  // Stops the flows (they drain and flush) then the tracker (pending requests
  // fault). Idempotent.
  void stop();

  // Registers an endpoint (and its registry entry, owned by `owner`) and
  // attaches it to every flow.
  Status addEndpoint(std::string name, Endpoint::Consumer consumer, std::string owner = {});
  // Drops its subscriptions and provider bindings, detaches it from the flows
  // (draining its queues) and removes its registry entry. `exit` says whether
  // an endpoint of this name may come back (EndpointExit).
  Status removeEndpoint(std::string_view name, EndpointExit exit = EndpointExit::kMayReturn);
  std::shared_ptr<Endpoint> endpoint(std::string_view name) const;
  // What the flows keep for an endpoint of this name that was removed as one
  // that may return (a subscriber that went away) goes: it did not come back
  // in time. No effect while an endpoint of this name exists. The caller
  // makes sure none is added meanwhile.
  void forgetAway(std::string_view name);
  // The names beginning with `prefix` that the flows keep something for and
  // that no endpoint has, sorted: endpoints that went away, and those of
  // before a restart (a reliable flow's journal names them). A service that
  // names its endpoints `prefix...` gives them at its start what it gives
  // one that went away, so that they do not wait for good.
  std::vector<std::string> awayEndpoints(std::string_view prefix) const;

  Result<SubscriptionId> subscribe(std::string_view endpoint, std::string_view pattern,
                                   EventFilterPtr filter = nullptr);
  Status unsubscribe(SubscriptionId id);
  size_t subscriptionCount() const;

  // Makes `endpoint` the provider of the address for request(). The address
  // may come from a client (a subscribing link's): it is a held name
  // (bus/core/wire_names.h), given back with the binding, and refused with
  // Unavailable when the budget of names from clients is spent.
  Status provide(std::string_view address, std::string_view endpoint);
  Status withdraw(std::string_view address);

  // Publish/subscribe. The outcome counts every target; its status is the
  // first failure, InvalidArgument for a malformed address or a missing event.
  // `wake_hold`: the publisher's hold over the wakes of its burst
  // (flows/wake_hold.h), lent to the deliveries that run inside this call.
  flows::SendOutcome publish(const flows::Exchange& exchange, flows::WakeHold* wake_hold = nullptr);

  // Request/response: sends `exchange` as in-out to the provider of its
  // address; `on_reply` receives exactly one terminal outcome (kReply, kFault,
  // kRejected, kTimeout after `timeout`). The exchange's own listener and
  // correlation id are replaced. Returns the correlation id, or an error (and
  // then never calls `on_reply`) when there is no provider, the address is
  // malformed, the broker is not running or the route is paused (Unavailable).
  Result<uint64_t> request(flows::Exchange exchange, std::chrono::nanoseconds timeout,
                           ReplyCallback on_reply);

  // Pauses or resumes the route whose pattern is `pattern` ("" for the
  // default route); NotFound when the policy has no such route. Idempotent.
  Status setRoutePaused(std::string_view pattern, bool paused);

  const DeliveryPolicy& policy() const { return *policy_; }
  Registry& registry() const { return *registry_; }
  const RequestTracker& requests() const { return *tracker_; }

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };

  // The cached route of `address`, resolving it on a miss. The caller holds a guard.
  const ResolvedRoute* route(Symbol address);
  const ResolvedRoute* resolve(Symbol address) EXCLUDES(mu_);
  std::unique_ptr<ResolvedRoute> buildRoute(Symbol address) const REQUIRES(mu_);
  void invalidateRoutes() REQUIRES(mu_);
  static void reportUnrouted(const flows::Exchange& exchange);
  static flows::SendOutcome refusePaused(const flows::Exchange& exchange, RouteStats& stats);

  const std::shared_ptr<DeliveryPolicy> policy_;  // shared only with registry probes (weakly)
  const std::shared_ptr<Registry> registry_;
  const std::shared_ptr<RequestTracker> tracker_;
  // By route index, the default route last ({route, flow} scopes of the registry's store).
  std::vector<std::unique_ptr<RouteStats>> route_stats_;
  std::vector<std::string> flow_entries_;  // registry names of the flows

  mutable Mutex mu_;  // control calls and route-cache misses
  Mutex lifecycle_mu_;
  bool running_ GUARDED_BY(lifecycle_mu_) = false;
  SubscriptionTable subscriptions_ GUARDED_BY(mu_);
  std::unordered_map<std::string, std::shared_ptr<Endpoint>, StringHash, std::equal_to<>> endpoints_
      GUARDED_BY(mu_);
  // A provider binding holds its address's name while it lasts.
  struct Provider {
    SharedName address;
    std::shared_ptr<Endpoint> endpoint;
  };
  std::unordered_map<Symbol, Provider> providers_ GUARDED_BY(mu_);
  EpochReclaimer reclaimer_;  // declared before cache_: outlives it
  // Written (install, clear) only with mu_ held, but not GUARDED_BY(mu_):
  // publish() and request() read it without mu_ (route()), lock-free inside
  // an epoch guard of reclaimer_, which frees a replaced route only once no
  // guard can still see it.
  RouteCache cache_;
};

}  // namespace cepbus::router
