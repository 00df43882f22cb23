#pragma once

// ClusterMember: a cluster node as the admin API sees it — which cluster and
// node it is and what it reports about itself (/api/cluster). The cluster
// node (services/cluster/cluster_node.h) is one; the admin API reaches it
// through Service::clusterMember(), knowing nothing of how a node runs.
//
// Thread-safety: every call may be made from any thread while the node runs.
// ClusterStats and PartitionStats are plain values.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cepbus::services {

// What one partition looks like from a node.
struct PartitionStats {
  uint32_t partition = 0;
  std::string role;   // "active", "standby" (attached, not receiving) or "none"
  std::string owner;  // the rendezvous owner among the live nodes
  uint64_t held = 0;  // events of input messages received and not yet accepted
  uint64_t unaccepted_outputs = 0;
  // The most input messages this node held at once since it took the
  // partition: what a window needs, to size max-unsettled by.
  uint64_t held_messages_peak = 0;
  bool stream_ended = false;  // active, and the last input was an end-of-stream marker
  // Active: the partition's newest ts minus the cluster's max-delay, below
  // which an event is late; nullopt before its first event.
  std::optional<int64_t> watermark;
  // Stream input, active: the offset a successor would resume from now, and
  // the one the partition's lease carries (behind by at most a heartbeat).
  std::optional<uint64_t> resume_from;
  std::optional<uint64_t> lease_offset;
};

// What a node counts; /metrics has the same numbers as the families of the
// scope "cluster" (services/cluster/cluster_stats.h).
struct ClusterStats {
  std::string node;
  std::vector<std::string> live_nodes;
  std::vector<PartitionStats> partitions;
  uint64_t received = 0;  // input messages
  uint64_t settled = 0;   // input events let go (a message is accepted with its last)
  // Input messages that arrived redelivered; with stream input, read again
  // below where the previous owner had read (as its last lease token said).
  uint64_t replayed = 0;
  uint64_t takeovers = 0;   // partitions this node became active on
  uint64_t handovers = 0;   // partitions this node gave up while active
  uint64_t duplicates = 0;  // input messages whose event id was already held
  uint64_t late = 0;        // events later than the slack, re-published as late
  uint64_t rejected = 0;    // input messages that are not events (refused)
  uint64_t composites = 0;  // composite events published
  uint64_t detector_errors = 0;
  uint64_t reconnects = 0;
  uint64_t stalls = 0;  // times the watchdog found this node stalled
  // Handovers whose session end the broker never confirmed (RabbitMQ 3.10
  // sometimes sends none): given up after the idle timeout.
  uint64_t unconfirmed_handovers = 0;
  uint64_t window_full = 0;     // times a partition held max-unsettled messages
  uint64_t checkpoints = 0;     // stream input: lease tokens the broker accepted
  uint64_t retention_gaps = 0;  // stream input: offsets to replay the stream no longer had
  // Stream input: messages stored after later ones of their publisher (a
  // broker failover), held until the earlier ones came (stream_sequencer.h);
  // and messages given up on after waiting for them.
  uint64_t out_of_order = 0;
  uint64_t sequence_gaps = 0;
  // Stream input: links reopened after a silence (RabbitMQ 3.10 may stop
  // delivering to a consumer that attached during a leader election).
  uint64_t stream_refreshes = 0;
  // Stream input: broker connections given up because the broker delivered
  // nothing from a stream that held events past the reader (StreamReaderWatch).
  uint64_t stream_broker_switches = 0;
  // Broker connections given up because the node's own heartbeats stopped
  // coming back through the broker (it routed nothing this node published).
  uint64_t echo_timeouts = 0;
  uint64_t streams_ended = 0;  // end-of-stream markers taken
  // The node's ingress (services/cluster/cluster_ingress.h): producer
  // messages and their events taken; deliveries accepted, refused as bad
  // input, released after the broker refused their batch; batches confirmed
  // and sent again.
  uint64_t ingress_received = 0;
  uint64_t ingress_events = 0;
  uint64_t ingress_accepted = 0;
  uint64_t ingress_rejected = 0;
  uint64_t ingress_released = 0;
  uint64_t ingress_batches = 0;
  uint64_t ingress_resent = 0;
};

class ClusterMember {
 public:
  virtual ~ClusterMember() = default;

  virtual const std::string& clusterName() const = 0;
  // The name of the node's entry in the router's registry (its state).
  virtual std::string componentName() const = 0;
  virtual ClusterStats clusterStats() const = 0;
};

}  // namespace cepbus::services
