#include "services/cluster/cluster_stats.h"

#include <nlohmann/json.hpp>
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
};

}  // namespace

std::string clusterStatsJson(const ClusterStats& s) {
  nlohmann::json partitions = nlohmann::json::array();
  for (const PartitionStats& p : s.partitions) {
    partitions.push_back({{"partition", p.partition},
                          {"role", p.role},
                          {"owner", p.owner},
                          {"held", p.held},
                          {"unaccepted_outputs", p.unaccepted_outputs},
                          {"held_messages_peak", p.held_messages_peak},
                          {"stream_ended", p.stream_ended}});
    if (p.resume_from) {
      partitions.back()["resume_from"] = *p.resume_from;
      partitions.back()["lease_offset"] = *p.lease_offset;
    }
  }
  return nlohmann::json{{"node", s.node},
                        {"live_nodes", s.live_nodes},
                        {"partitions", std::move(partitions)},
                        {"received", s.received},
                        {"settled", s.settled},
                        {"replayed", s.replayed},
                        {"takeovers", s.takeovers},
                        {"handovers", s.handovers},
                        {"duplicates", s.duplicates},
                        {"late", s.late},
                        {"rejected", s.rejected},
                        {"composites", s.composites},
                        {"detector_errors", s.detector_errors},
                        {"reconnects", s.reconnects},
                        {"stalls", s.stalls},
                        {"unconfirmed_handovers", s.unconfirmed_handovers},
                        {"window_full", s.window_full},
                        {"checkpoints", s.checkpoints},
                        {"retention_gaps", s.retention_gaps},
                        {"out_of_order", s.out_of_order},
                        {"sequence_gaps", s.sequence_gaps},
                        {"stream_refreshes", s.stream_refreshes},
                        {"stream_broker_switches", s.stream_broker_switches},
                        {"echo_timeouts", s.echo_timeouts},
                        {"streams_ended", s.streams_ended}}
      .dump();
}

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
