#pragma once

// The router's numbers in the Prometheus text exposition format (0.0.4):
// every family gets `# HELP` and `# TYPE` lines, even when it has no samples
// yet, so a scraper sees the same set of families from the first scrape on.
//
//   components (registry snapshot), labels {name, kind}:
//     cepbus_component_{delivered,failed,rejected}_total      counter
//     cepbus_component_queue_length                           gauge
//     cepbus_component_throughput_per_second                  gauge
//   routes (Broker::routeStats()), labels {route, flow}; the default route
//   is route="(default)", which no topic pattern can spell:
//     cepbus_route_{published,delivered,queued,rejected,failed,unrouted,
//                   refused_paused}_total                     counter
//     cepbus_route_paused                                     gauge (0/1)
//   flows (AbstractFlow::metrics()), label {flow}:
//     cepbus_flow_{sent,delivered,failed,rejected,degraded,invalid,
//                  duplicates,listener_errors}_total
//   journals (ReliableFlow::reliableMetrics(), reliable flows only), label {flow}:
//     cepbus_journal_{journaled,commits,acknowledged,cancelled,redelivered,
//                     retries,abandoned,corrupt,errors}_total  counter
//     cepbus_journal_{in_flight,backlog}                      gauge
//   cluster nodes (services/cluster/), labels {cluster, node}:
//     cepbus_cluster_{received,settled,replayed,takeovers,handovers,duplicates,
//                     late,rejected,composites,reconnects,stalls,
//                     unconfirmed_handovers,window_full,checkpoints,
//                     retention_gaps,out_of_order,sequence_gaps,
//                     stream_refreshes,stream_broker_switches,
//                     echo_timeouts}_total                     counter
//     cepbus_cluster_partition_{active,held}, labels {.., partition, role} gauge
//   HTTP listeners (services/http/http_listener.h), label {name}:
//     cepbus_http_{connections,connections_refused,ws_refused,
//                  request_timeouts}_total                    counter
//     cepbus_http_{open_connections,ws_clients}               gauge
//   CEP queries whose engine counts its partial matches
//   (plugin::Detector::state()), label {name} (the query's ":detector" entry):
//     cepbus_query_partial_matches{,_peak}                     gauge
//   stages (the SEDA stages of the queueing flows), labels {flow, stage}:
//     cepbus_stage_{offered,processed,failed,rejected,degraded}_total counter
//     cepbus_stage_{queue_length,capacity,threads}            gauge
//     cepbus_stage_latency_seconds{quantile="0.5|0.9|0.99"}   summary
//       (offer to handler return, with _sum and _count)

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flows/abstract_flow.h"
#include "flows/reliable_flow.h"
#include "router/broker.h"
#include "router/registry.h"
#include "stages/stage_metrics.h"

namespace cepbus::services::http {

// The Content-Type of renderMetrics()'s output.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// The route label of the default route.
inline constexpr std::string_view kDefaultRouteLabel = "(default)";

// A label value escaped as the exposition format asks: backslash, double
// quote and line feed become \\, \" and \n.
std::string escapeLabelValue(std::string_view value);

// A stage of a queueing flow (SEDA or reliable) and the flow it serves.
struct FlowStage {
  std::string flow;
  stages::StageMetricsSnapshot metrics;
};
// Every stage of the broker's flows, in policy order.
std::vector<FlowStage> flowStages(const router::Broker& broker);

// The journal numbers of a reliable flow; nullopt for any other flow. Both
// /metrics and /api/flows ask here, so they agree on which flows have a journal.
std::optional<flows::ReliableMetricsSnapshot> journalMetrics(const flows::AbstractFlow& flow);

// One scrape. Thread-safety: may be called from any thread (it only reads
// snapshots); the broker and registry must outlive the call.
std::string renderMetrics(const router::Broker& broker, const router::Registry& registry);

}  // namespace cepbus::services::http
