#pragma once

// The families the CEP service reports (cep_service.h): a scope "query"
// per query and a scope "cep_detection" per detection.
//
// "query" {name}, name the query's registry entry
// "<assembly>.<unit>/<query>:detector": its own matches, publish failures,
// events lacking an attribute its predicates read, late events (its
// detector's: the same for every query sharing it), and what its
// detector holds, read when the store is. A query
// whose engine does not count what it holds (plugin::Detector::state())
// has no partial-matches sample.
//
// "cep_detection" {name}, name the endpoint the detection consumes
// through (one query's, or the shared one of several): what it consumed,
// refused and has queued, the same for every query sharing it.
//
// Thread-safety: constants only.

#include "bus/base/stats/metric.h"

namespace cepbus::services::cep {

namespace query_stats {
using stats::MetricSpec;
inline constexpr MetricSpec kMatches = MetricSpec::counter(
    "matches", "Composite events the query reported (its own, also when it shares a detector).");
inline constexpr MetricSpec kPublishFailures =
    MetricSpec::counter("publish_failures", "Composite events of the query the bus did not take.");
inline constexpr MetricSpec kPartialMatches = MetricSpec::gauge(
    "partial_matches", "Partial matches the query's detector holds, in its engine's unit.");
inline constexpr MetricSpec kPartialMatchesPeak = MetricSpec::gauge(
    "partial_matches_peak", "The most partial matches the query's detector held at once.");
inline constexpr MetricSpec kStateEvictions = MetricSpec::counter(
    "state_evictions",
    "Partial matches a cap on the query's state dropped or refused (docs/engines.md, Bounded "
    "state).");
inline constexpr MetricSpec kStateBytes = MetricSpec::gauge(
    "state_bytes", "The memory the query's detector state keeps alive, its engine's estimate.");
inline constexpr MetricSpec kOutputHeld = MetricSpec::gauge(
    "output_held",
    "Composite events of reliable queries the bus refused for now, held by the query's detector.");
inline constexpr MetricSpec kMissingAttribute = MetricSpec::counter(
    "missing_attribute",
    "Events of the query's types that lacked an attribute its predicates read (counted by the "
    "host, whatever the engine).");
inline constexpr MetricSpec kLate = MetricSpec::counter(
    "late",
    "Events that came more than the query's maximum delay behind the newest one: not matched.");
inline constexpr MetricSpec kSuppressed = MetricSpec::counter(
    "suppressed",
    "Matches the query's output control (EMIT FIRST|LAST EVERY, AFTER MATCH SKIP PAST LAST "
    "EVENT) found and did not publish.");
// A checkpointed query's (services/query_host.h, CheckpointStats).
inline constexpr MetricSpec kCheckpoints = MetricSpec::counter(
    "checkpoints", "Checkpoints of the query's detector stored in the journal.");
inline constexpr MetricSpec kCheckpointFailures = MetricSpec::counter(
    "checkpoint_failures",
    "Checkpoints the journal did not store (the input stays unacknowledged until one is).");
inline constexpr MetricSpec kCheckpointBytes =
    MetricSpec::gauge("checkpoint_bytes", "The size of the query's last checkpoint.");
inline constexpr MetricSpec kCheckpointMs = MetricSpec::gauge(
    "checkpoint_ms", "How long the query's last checkpoint took, from snapshot to commit.");
inline constexpr MetricSpec kRestoreBytes =
    MetricSpec::gauge("restore_bytes", "The size of the checkpoint the query restored at start.");
inline constexpr MetricSpec kRestoreMs =
    MetricSpec::gauge("restore_ms", "How long restoring the query's checkpoint took at start.");
inline constexpr MetricSpec kRestoreRefused = MetricSpec::counter(
    "restore_refused", "Stored checkpoints refused at start (the query started empty).");
inline constexpr MetricSpec kDuplicatesDropped = MetricSpec::counter(
    "duplicates_dropped", "Composite events the query had published already, not published again.");
// Engine counters (bus/core/plugin/engine_counters.h) with a family, each
// sampled for a query whose engine reports it (today the window engine's).
inline constexpr MetricSpec kGroups =
    MetricSpec::gauge("groups", "Groups a window query keeps open (open windows or sessions).");
inline constexpr MetricSpec kMaxGroups =
    MetricSpec::gauge("max_groups", "The most groups a window query keeps open (max_groups).");
inline constexpr MetricSpec kRefusedEvents = MetricSpec::counter(
    "refused_events", "Events a window query refused because their group would pass max_groups.");
inline constexpr MetricSpec kNonNumeric = MetricSpec::counter(
    "non_numeric", "Values a window query's sum, avg, min, max or stddev skipped as not numbers.");
inline constexpr MetricSpec kEngineCounters[] = {kGroups, kMaxGroups, kRefusedEvents, kNonNumeric};
inline constexpr MetricSpec kAll[] = {kMatches,
                                      kPublishFailures,
                                      kPartialMatches,
                                      kPartialMatchesPeak,
                                      kStateEvictions,
                                      kStateBytes,
                                      kOutputHeld,
                                      kMissingAttribute,
                                      kLate,
                                      kSuppressed,
                                      kGroups,
                                      kMaxGroups,
                                      kRefusedEvents,
                                      kNonNumeric,
                                      kCheckpoints,
                                      kCheckpointFailures,
                                      kCheckpointBytes,
                                      kCheckpointMs,
                                      kRestoreBytes,
                                      kRestoreMs,
                                      kRestoreRefused,
                                      kDuplicatesDropped};
}  // namespace query_stats
inline constexpr stats::Schema kQuerySchema{"query", query_stats::kAll};

namespace cep_detection_stats {
using stats::MetricSpec;
inline constexpr MetricSpec kConsumed =
    MetricSpec::counter("consumed", "Events the detector consumed (those it refused included).");
inline constexpr MetricSpec kErrors =
    MetricSpec::counter("errors", "Events the detector refused or threw on, and failed flushes.");
inline constexpr MetricSpec kRejected =
    MetricSpec::counter("rejected", "Events the detector's stage refused (queue full or stopped).");
inline constexpr MetricSpec kRanInline = MetricSpec::counter(
    "ran_inline", "Events detected on the delivering thread (run_inline=when_idle).");
inline constexpr MetricSpec kQueued =
    MetricSpec::gauge("queued", "Events waiting in the detector's stage or being detected.");
inline constexpr MetricSpec kAll[] = {kConsumed, kErrors, kRejected, kRanInline, kQueued};
}  // namespace cep_detection_stats
inline constexpr stats::Schema kCepDetectionSchema{"cep_detection", cep_detection_stats::kAll};

}  // namespace cepbus::services::cep
