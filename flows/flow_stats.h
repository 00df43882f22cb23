#pragma once

// What flows report (bus/base/stats/): every flow its sends and their
// outcomes in the scope "flow" {flow}; a reliable flow also its journal in
// the scope "journal" {flow}; the stages of a queueing flow report
// themselves (stages/stage_metrics.h, {flow, stage}).

#include "bus/base/stats/metric.h"

namespace cepbus::flows {

namespace flow_stats {
using stats::MetricSpec;
inline constexpr MetricSpec kSent = MetricSpec::counter("sent", "Exchanges handed to the flow.");
inline constexpr MetricSpec kDelivered =
    MetricSpec::counter("delivered", "Target deliveries that succeeded.");
inline constexpr MetricSpec kFailed =
    MetricSpec::counter("failed", "Target deliveries that failed.");
inline constexpr MetricSpec kRejected =
    MetricSpec::counter("rejected", "Target admissions refused.");
inline constexpr MetricSpec kDegraded =
    MetricSpec::counter("degraded", "Reliable deliveries degraded to best effort.");
inline constexpr MetricSpec kInvalid =
    MetricSpec::counter("invalid", "Exchanges refused by validation.");
inline constexpr MetricSpec kDuplicates =
    MetricSpec::counter("duplicates", "Deliveries suppressed as duplicates.");
inline constexpr MetricSpec kListenerErrors =
    MetricSpec::counter("listener_errors", "Outcomes the sender's listener threw on.");
inline constexpr MetricSpec kAll[] = {kSent,     kDelivered, kFailed,     kRejected,
                                      kDegraded, kInvalid,   kDuplicates, kListenerErrors};
}  // namespace flow_stats
inline constexpr stats::Schema kFlowSchema{"flow", flow_stats::kAll};

namespace journal_stats {
using stats::MetricSpec;
inline constexpr MetricSpec kJournaled =
    MetricSpec::counter("journaled", "Records the journal committed.");
inline constexpr MetricSpec kCommits =
    MetricSpec::counter("commits", "Journal transactions written.");
inline constexpr MetricSpec kAcknowledged = MetricSpec::counter(
    "acknowledged", "Acknowledgements committed (row removed, or only the id kept if cancelled).");
inline constexpr MetricSpec kCancelled = MetricSpec::counter(
    "cancelled", "Records acknowledged by their target before the journal wrote them.");
inline constexpr MetricSpec kRedelivered =
    MetricSpec::counter("redelivered", "Records found in the journal and dispatched again.");
inline constexpr MetricSpec kRetries =
    MetricSpec::counter("retries", "Deliveries tried again after a fault or a full stage.");
inline constexpr MetricSpec kAbandoned = MetricSpec::counter(
    "abandoned", "Records that used up their attempts (journaled until the next start).");
inline constexpr MetricSpec kCorrupt = MetricSpec::counter(
    "corrupt", "Journal records (removed) or delivered-id batches (skipped) that did not decode.");
inline constexpr MetricSpec kErrors =
    MetricSpec::counter("errors", "Journal transactions that failed.");
inline constexpr MetricSpec kInFlight =
    MetricSpec::gauge("in_flight", "Journaled deliveries not acknowledged yet in this run.");
inline constexpr MetricSpec kBacklog =
    MetricSpec::gauge("backlog", "Records waiting for a journal commit.");
inline constexpr MetricSpec kHeldBack =
    MetricSpec::gauge("held_back", "Deliveries waiting for their target's next retry.");
inline constexpr MetricSpec kDeparted = MetricSpec::counter(
    "departed", "Records removed because their target left for good (a subscription ended).");
inline constexpr MetricSpec kOrphans =
    MetricSpec::gauge("orphans", "Records waiting for their target to attach again.");
inline constexpr MetricSpec kAll[] = {
    kJournaled, kCommits,  kAcknowledged, kCancelled, kRedelivered, kRetries,  kAbandoned,
    kCorrupt,   kDeparted, kErrors,       kInFlight,  kBacklog,     kHeldBack, kOrphans};
}  // namespace journal_stats
inline constexpr stats::Schema kJournalSchema{"journal", journal_stats::kAll};

}  // namespace cepbus::flows
