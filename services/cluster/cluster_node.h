#pragma once

// ClusterNode: one cepbus node of a scale-out cluster on RabbitMQ.
//
// The node consumes, over AMQP 1.0, the partition queues "<name>.p<i>" that
// it owns or stands by for (one session per partition, so that one
// partition can be handed over alone), runs every cluster query on each
// active partition separately (one detector per query and partition, fed in
// event-time order through a reorder buffer of the cluster's max-delay), and
// publishes each composite event to the exchange "<name>.out" with the
// routing key of the query's output and a deterministic message-id
// (bus/host/detection/composite_id.h), so a replayed composite is a recognisable duplicate.
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
// The node is four parts: this class, the Proton handler that owns the
// connection, its sessions and links and maps Proton's events onto the
// others; the membership loop (membership_loop.h: heartbeats, reconcile,
// stalls, echoes); a partition runner for each active partition
// (partition_runner.h: input, order, detection, composites, settlement,
// checkpoints); and the output sender (output_sender.h: the runners'
// composites and late events in batches, the broker's answers back to the
// runners). The last two reach the broker only through small I/O interfaces.
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
#include "services/cluster/cluster_stats.h"
#include "services/service.h"

namespace cepbus::services::cluster {

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

class ClusterNode final : public Service, private ClusterMember {
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
  const ClusterMember* clusterMember() const override { return this; }

 private:
  // ClusterMember
  const std::string& clusterName() const override;
  std::string componentName() const override;
  ClusterStats clusterStats() const override { return stats(); }

  class Impl;
  explicit ClusterNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cepbus::services::cluster
