#include "services/cluster/cluster_stats.h"

#include <utility>

namespace cepbus::services::cluster {
namespace {

// Each counter of the scope "cluster" and the field it reads.
struct CounterField {
  const stats::MetricSpec& spec;
  uint64_t ClusterStats::*field;
};

namespace c = cluster_stats;
const CounterField kCounterFields[] = {
    {c::kReceived, &ClusterStats::received},
    {c::kSettled, &ClusterStats::settled},
    {c::kReplayed, &ClusterStats::replayed},
    {c::kTakeovers, &ClusterStats::takeovers},
    {c::kHandovers, &ClusterStats::handovers},
    {c::kDuplicates, &ClusterStats::duplicates},
    {c::kLate, &ClusterStats::late},
    {c::kRejected, &ClusterStats::rejected},
    {c::kComposites, &ClusterStats::composites},
    {c::kReconnects, &ClusterStats::reconnects},
    {c::kStalls, &ClusterStats::stalls},
    {c::kUnconfirmedHandovers, &ClusterStats::unconfirmed_handovers},
    {c::kWindowFull, &ClusterStats::window_full},
    {c::kCheckpoints, &ClusterStats::checkpoints},
    {c::kRetentionGaps, &ClusterStats::retention_gaps},
    {c::kOutOfOrder, &ClusterStats::out_of_order},
    {c::kSequenceGaps, &ClusterStats::sequence_gaps},
    {c::kStreamRefreshes, &ClusterStats::stream_refreshes},
    {c::kStreamBrokerSwitches, &ClusterStats::stream_broker_switches},
    {c::kEchoTimeouts, &ClusterStats::echo_timeouts},
    {c::kIngressReceived, &ClusterStats::ingress_received},
    {c::kIngressEvents, &ClusterStats::ingress_events},
    {c::kIngressAccepted, &ClusterStats::ingress_accepted},
    {c::kIngressRejected, &ClusterStats::ingress_rejected},
    {c::kIngressReleased, &ClusterStats::ingress_released},
    {c::kIngressBatches, &ClusterStats::ingress_batches},
    {c::kIngressResent, &ClusterStats::ingress_resent},
};

}  // namespace

NodeReport::NodeReport(const stats::Store& store, std::string cluster, std::string node)
    : store_(store), cluster_(std::move(cluster)), node_(std::move(node)) {
  scope_ = store_.scope(kClusterSchema, {{"cluster", cluster_}, {"node", node_}});
  for (const CounterField& counter : kCounterFields) {
    scope_->counter(counter.spec, [this, field = counter.field] {
      MutexLock lock(mu_);
      return published_.*field;
    });
  }
}

void NodeReport::publish(const ClusterStats& stats) {
  {
    MutexLock lock(mu_);
    published_ = stats;
  }
  if (scope_ == nullptr) return;
  namespace p = cluster_partition_stats;
  for (const PartitionStats& ps : stats.partitions) {
    if (partitions_.size() <= ps.partition) partitions_.resize(ps.partition + 1);
    Partition& partition = partitions_[ps.partition];
    if (partition.scope == nullptr || partition.role != ps.role) {
      // Before the new one is made: two live scopes of one partition would
      // both be rendered.
      partition.scope.reset();
      partition.role = ps.role;
      partition.scope =
          scope_->child(kClusterPartitionSchema,
                        {{"partition", std::to_string(ps.partition)}, {"role", ps.role}});
      partition.scope->gauge(p::kActive).set(ps.role == "active" ? 1 : 0);
    }
    partition.scope->gauge(p::kHeld).set(static_cast<int64_t>(ps.held));
  }
}

ClusterStats NodeReport::stats() const {
  MutexLock lock(mu_);
  return published_;
}

void NodeReport::withdraw() {
  partitions_.clear();
  scope_.reset();
}

}  // namespace cepbus::services::cluster
