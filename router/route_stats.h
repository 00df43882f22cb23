#pragma once

// What each delivery-policy route reports (bus/base/stats/), in the scope
// "route" {route, flow}; the default route is route="(default)", which no
// topic pattern can spell. RouteStats holds the metrics the broker counts
// into on publish, and the route's pause flag beside them.

#include <atomic>
#include <string_view>

#include "bus/base/stats/store.h"

namespace cepbus::router {

// The route label of the default route.
inline constexpr std::string_view kDefaultRouteLabel = "(default)";

namespace route_stats {
using stats::MetricSpec;
inline constexpr MetricSpec kPublished =
    MetricSpec::counter("published", "Exchanges routed by the route (requests included).");
inline constexpr MetricSpec kDelivered =
    MetricSpec::counter("delivered", "Target deliveries finished before publish returned.");
// Since start: what waits now is the route's flow's stages' queue_length
// (the admin API's /api/routes "queued").
inline constexpr MetricSpec kEnqueued =
    MetricSpec::counter("enqueued", "Target deliveries accepted by a queueing flow, since start.");
inline constexpr MetricSpec kRejected =
    MetricSpec::counter("rejected", "Target deliveries refused by admission.");
inline constexpr MetricSpec kFailed =
    MetricSpec::counter("failed", "Target deliveries that failed.");
inline constexpr MetricSpec kUnrouted =
    MetricSpec::counter("unrouted", "Exchanges no subscriber (or filter) wanted.");
inline constexpr MetricSpec kRefusedPaused = MetricSpec::counter(
    "refused_paused", "Exchanges refused (Unavailable) while the route was paused.");
inline constexpr MetricSpec kPaused =
    MetricSpec::gauge("paused", "1 while the route is paused (refusing new exchanges).");
inline constexpr MetricSpec kAll[] = {kPublished, kDelivered, kEnqueued,      kRejected,
                                      kFailed,    kUnrouted,  kRefusedPaused, kPaused};
}  // namespace route_stats
inline constexpr stats::Schema kRouteSchema{"route", route_stats::kAll};

// Thread-safety: as stats::Counter; `paused` is read on every publish and
// written by the control plane.
struct RouteStats {
  explicit RouteStats(stats::ScopePtr route_scope)
      : scope(std::move(route_scope)),
        published(scope->counter(route_stats::kPublished)),
        delivered(scope->counter(route_stats::kDelivered)),
        enqueued(scope->counter(route_stats::kEnqueued)),
        rejected(scope->counter(route_stats::kRejected)),
        failed(scope->counter(route_stats::kFailed)),
        unrouted(scope->counter(route_stats::kUnrouted)),
        refused_paused(scope->counter(route_stats::kRefusedPaused)) {
    scope->gauge(route_stats::kPaused,
                 [this] { return paused.load(std::memory_order_relaxed) ? 1.0 : 0.0; });
  }

  std::atomic<bool> paused{false};  // before the scope, whose function reads it
  const stats::ScopePtr scope;
  stats::Counter& published;
  stats::Counter& delivered;
  stats::Counter& enqueued;
  stats::Counter& rejected;
  stats::Counter& failed;
  stats::Counter& unrouted;
  stats::Counter& refused_paused;
};

}  // namespace cepbus::router
