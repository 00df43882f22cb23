#pragma once

// ClusterNode: one cepbus node of a scale-out cluster on RabbitMQ.
//
// The node consumes, over AMQP 1.0, the partition queues "<name>.p<i>" that
// it owns or stands by for (one session per partition, so that one
// partition can be handed over alone), runs every cluster query on each
// active partition separately (one detector per query and partition, fed in
// event-time order through a reorder buffer of the cluster's slack), and
// publishes each composite event to the exchange "<name>.out" with the
// routing key of the query's output and a deterministic message-id
// (composite_id.h), so a replayed composite is a recognisable duplicate.
//
// State lives in the broker, not in the node: an input message is accepted
// only once no window can still need it and the composites it took part in
// were accepted (partition_ledger.h). When a node dies, the broker's single
// active consumer hands each of its partitions to the standby, redelivers
// what the dead node had not accepted, and the standby rebuilds its partial
// matches by replaying those messages. Composites come out at least once;
// their ids make the duplicates recognisable.
//
// With stream input (ClusterSpec::Input::kStream) the events are
// read from the stream "<name>.p<i>.log" instead, and "<name>.p<i>" holds
// the partition's lease: the node that holds its token is the active one,
// reads the stream from the offset the token carries, and moves that offset
// forward by publishing new tokens as its windows let go of old events
// (stream_checkpoint.h). Windows are then bounded by the stream's retention
// rather than by how many messages a node may hold unsettled.
//
// Ownership is rendezvous hashing over the live nodes (membership.h), which
// heartbeat on "<name>.members". A node attaches to the partitions where it
// ranks first or second; when it finds itself active on a partition whose
// owner is live and attached, it ends that partition's session so that the
// broker moves the consumer to the owner (a joining node takes its share, a
// node leaving cleanly announces it and hands over). A node whose own
// heartbeat timer ran late by more than the idle timeout (it was stopped or
// starved) drops every partition and attaches again, since the others have
// taken its partitions meanwhile; the others evict a silent node's broker
// connections (hooks.evict) so its partitions move within the idle timeout
// instead of the broker's heartbeat.
//
// Thread-safety: start()/stop() from the control plane; stats() from any
// thread. Everything else runs on the node's own Proton container thread.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bus/core/status.h"
#include "services/cluster/cluster_spec.h"
#include "services/service.h"

namespace cepbus::services::cluster {

// What one partition looks like from this node.
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
  // Stream input, active: the offset a successor would resume from now, and
  // the one the partition's lease carries (behind by at most a heartbeat).
  std::optional<uint64_t> resume_from;
  std::optional<uint64_t> lease_offset;
};

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
};

// The stats as the JSON object of /api/cluster (one node's part).
std::string clusterStatsJson(const ClusterStats& stats);

// What the node asks of the broker's management side, supplied by whoever
// builds it (the management HTTP API in a real bus, fakes in tests).
struct ClusterHooks {
  // Checks, before the node consumes anything, that the broker's topology
  // is the one the descriptor describes (partition count, queue kinds).
  std::function<Status()> verify_topology;
  // Closes the broker connections of a node that went silent, found by the
  // local socket addresses it announced ("host:port"); runs on a thread of
  // its own, may block.
  std::function<void(const std::string& node, const std::vector<std::string>& addresses)> evict;
  // The program that runs this node's stall watchdog (stall_watchdog.h);
  // empty: no watchdog (then only the broker's heartbeat fences a stopped
  // node).
  std::string watchdog_program;
};

class ClusterNode final : public Service {
 public:
  // Compiles and checks every query of `spec` (errors name the descriptor
  // line: a query the cluster key does not partition, one without WITHIN,
  // one its engine refuses). `password` is the broker user's.
  static Result<std::unique_ptr<ClusterNode>> create(const ClusterSpec& spec, std::string password,
                                                     ClusterHooks hooks, ServiceContext& context);
  ~ClusterNode() override;

  const std::string& name() const override;
  Status start() override;
  // Announces that the node leaves (its partitions move at once), closes
  // the connection and joins the container thread. Idempotent.
  void stop() override;

  ClusterStats stats() const;

 private:
  class Impl;
  explicit ClusterNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cepbus::services::cluster
