#pragma once

// What a cluster node reports about itself: the counters its membership
// loop (membership_loop.h) and its partition runners (partition_runner.h)
// keep (services/cluster_member.h's ClusterStats), published to the stats
// store's scopes "cluster" and "cluster_partition" for /metrics by the
// node's NodeReport. /api/cluster reads them through ClusterMember.
//
// Thread-safety: NodeReport says its own.

#include <cstdint>
#include <string>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/base/stats/store.h"
#include "services/cluster_member.h"

namespace cepbus::services::cluster {

using services::ClusterStats;
using services::PartitionStats;

// The families of the scope "cluster" {cluster, node}: the node's counters
// (ClusterStats), and of its child "cluster_partition" {partition, role}:
// each partition as the node sees it.
namespace cluster_stats {
using stats::MetricSpec;
inline constexpr MetricSpec kReceived =
    MetricSpec::counter("received", "Input messages the node received from its partitions.");
inline constexpr MetricSpec kSettled = MetricSpec::counter(
    "settled", "Input events the node let go (a message is accepted with its last).");
inline constexpr MetricSpec kReplayed = MetricSpec::counter(
    "replayed", "Input messages that arrived redelivered (a takeover's replay).");
inline constexpr MetricSpec kTakeovers =
    MetricSpec::counter("takeovers", "Partitions the node became the active consumer of.");
inline constexpr MetricSpec kHandovers =
    MetricSpec::counter("handovers", "Partitions the node gave up to their owner while active.");
inline constexpr MetricSpec kDuplicates =
    MetricSpec::counter("duplicates", "Input events whose event id the partition already held.");
inline constexpr MetricSpec kLate = MetricSpec::counter(
    "late",
    "Events more than the max-delay behind their partition's newest, re-published as late.");
inline constexpr MetricSpec kRejected =
    MetricSpec::counter("rejected", "Input messages that were not events (refused).");
inline constexpr MetricSpec kComposites =
    MetricSpec::counter("composites", "Composite events the node published.");
inline constexpr MetricSpec kReconnects =
    MetricSpec::counter("reconnects", "Broker connections the node lost and made again.");
inline constexpr MetricSpec kStalls = MetricSpec::counter(
    "stalls", "Times the watchdog found the node stalled past the idle timeout.");
inline constexpr MetricSpec kUnconfirmedHandovers = MetricSpec::counter(
    "unconfirmed_handovers",
    "Handovers whose session end the broker did not confirm within the idle timeout.");
inline constexpr MetricSpec kWindowFull = MetricSpec::counter(
    "window_full", "Times a partition queue held max-unsettled messages its windows need.");
inline constexpr MetricSpec kCheckpoints = MetricSpec::counter(
    "checkpoints", "Stream input: lease tokens (resume offsets) the broker accepted.");
inline constexpr MetricSpec kRetentionGaps = MetricSpec::counter(
    "retention_gaps", "Stream input: offsets to replay that the stream no longer held.");
inline constexpr MetricSpec kOutOfOrder = MetricSpec::counter(
    "out_of_order",
    "Stream input: messages stored after later ones of their publisher, held until those came.");
inline constexpr MetricSpec kSequenceGaps = MetricSpec::counter(
    "sequence_gaps",
    "Stream input: messages of a publisher that never came while later ones waited.");
inline constexpr MetricSpec kStreamRefreshes =
    MetricSpec::counter("stream_refreshes", "Stream input: stream links reopened after a silence.");
inline constexpr MetricSpec kStreamBrokerSwitches = MetricSpec::counter(
    "stream_broker_switches",
    "Stream input: broker connections given up for delivering nothing from a stream that held "
    "more.");
inline constexpr MetricSpec kEchoTimeouts = MetricSpec::counter(
    "echo_timeouts",
    "Broker connections given up because the node's own heartbeats stopped coming back.");
inline constexpr MetricSpec kIngressReceived =
    MetricSpec::counter("ingress_received", "Messages the node's ingress took from producers.");
inline constexpr MetricSpec kIngressEvents =
    MetricSpec::counter("ingress_events", "Events in the messages the ingress took.");
inline constexpr MetricSpec kIngressAccepted = MetricSpec::counter(
    "ingress_accepted",
    "Producer deliveries the ingress accepted once the broker confirmed their batches.");
inline constexpr MetricSpec kIngressRejected = MetricSpec::counter(
    "ingress_rejected",
    "Producer messages the ingress refused: no event, or an event without a key attribute.");
inline constexpr MetricSpec kIngressReleased = MetricSpec::counter(
    "ingress_released", "Producer deliveries released because the broker refused a batch of them.");
inline constexpr MetricSpec kIngressBatches =
    MetricSpec::counter("ingress_batches", "Ingress batches the broker confirmed.");
inline constexpr MetricSpec kIngressResent =
    MetricSpec::counter("ingress_resent",
                        "Ingress batches sent again after the broker connection or link failed or "
                        "the broker released them.");
inline constexpr MetricSpec kAll[] = {kReceived,
                                      kSettled,
                                      kReplayed,
                                      kTakeovers,
                                      kHandovers,
                                      kDuplicates,
                                      kLate,
                                      kRejected,
                                      kComposites,
                                      kReconnects,
                                      kStalls,
                                      kUnconfirmedHandovers,
                                      kWindowFull,
                                      kCheckpoints,
                                      kRetentionGaps,
                                      kOutOfOrder,
                                      kSequenceGaps,
                                      kStreamRefreshes,
                                      kStreamBrokerSwitches,
                                      kEchoTimeouts,
                                      kIngressReceived,
                                      kIngressEvents,
                                      kIngressAccepted,
                                      kIngressRejected,
                                      kIngressReleased,
                                      kIngressBatches,
                                      kIngressResent};
}  // namespace cluster_stats
inline constexpr stats::Schema kClusterSchema{"cluster", cluster_stats::kAll};

namespace cluster_partition_stats {
using stats::MetricSpec;
inline constexpr MetricSpec kActive =
    MetricSpec::gauge("active", "1 while the node is the partition's active consumer.");
inline constexpr MetricSpec kHeld = MetricSpec::gauge(
    "held", "Input messages the node holds unsettled for the partition (the replay log).");
inline constexpr MetricSpec kAll[] = {kActive, kHeld};
}  // namespace cluster_partition_stats
inline constexpr stats::Schema kClusterPartitionSchema{"cluster_partition",
                                                       cluster_partition_stats::kAll};

// NodeReport: the numbers one node published last. stats() returns them
// (/api/cluster); the node's scope "cluster" {cluster, node} reads its
// counters when the store is read, and a child "cluster_partition"
// {partition, role} per partition shows it as of the last publish(): a
// partition whose role changed gets a new child, so its old labels go.
//
// Thread-safety: publish() and withdraw() from one thread at a time (the
// node's container thread, then its stop()); stats() and the store's reads
// from any thread. Ownership: owns its scopes.
class NodeReport {
 public:
  NodeReport(const stats::Store& store, std::string cluster, std::string node);

  // What the node looks like now.
  void publish(const ClusterStats& stats) EXCLUDES(mu_);
  // The last publish()'s stats.
  ClusterStats stats() const EXCLUDES(mu_);
  // Takes the node's numbers out of the store (the node stopped); stats()
  // still answers.
  void withdraw();

 private:
  struct Partition {
    std::string role;
    stats::ScopePtr scope;
  };

  const stats::Store store_;
  const std::string cluster_;
  const std::string node_;
  mutable Mutex mu_;
  ClusterStats published_ GUARDED_BY(mu_);
  std::vector<Partition> partitions_;  // by index; publish() and withdraw() only
  // Last, so that its functions, which read published_, are gone first.
  stats::ScopePtr scope_;
};

}  // namespace cepbus::services::cluster
