#pragma once

// MembershipLoop: a cluster node's part in the membership of its cluster —
// what it announces, which partitions it attaches, hands over or drops, and
// when its own silence means starting over.
//
// - Heartbeats. Every heartbeat period the node announces itself (its
//   incarnation, the partitions it is attached to, its connection's local
//   address) and forgets peers silent for the idle timeout (membership.h),
//   asking for their broker connections to be closed (evict), so that their
//   partitions move within the idle timeout rather than the broker's own
//   heartbeat.
// - Reconcile. The node attaches a consumer to the partitions where it ranks
//   first or second among the live nodes and detaches elsewhere; when it is
//   active on a partition whose owner is live and attached, it ends the
//   partition's session so that the broker moves the consumer to the owner
//   (a joining node takes its share). It attaches nothing for two heartbeat
//   periods after connecting: a node that attached to everything first would
//   be active everywhere. A session end the broker never confirms
//   (RabbitMQ 3.10 sometimes sends none) is given up after the idle timeout.
// - Stall. A node whose own timer or input ran late by more than the idle
//   timeout was stopped or starved: the others counted it gone and took its
//   partitions, so it drops every partition and every stale record of its
//   peers, and attaches again after a round of heartbeats.
// - Echo. The node's own heartbeats come back to it through the fanout
//   members exchange. When none came back for twice the idle timeout, the
//   broker no longer routes what this connection publishes (RabbitMQ 3.10 was
//   seen, after another broker node died, to keep such a connection
//   delivering input while taking none of its heartbeats or composites): the
//   others count this node gone while it still holds its partitions, so it
//   gives the connection up and reconnects through the next broker.
//
// The loop decides; its Actions (the connection handler) act on the broker.
//
// Thread-safety: none; the node drives it from its container thread. Time is
// passed in. Ownership: the spec, the actions and the counters outlive it.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "services/cluster/cluster_spec.h"
#include "services/cluster/cluster_stats.h"
#include "services/cluster/membership.h"

namespace Poco {
class Logger;
}

namespace cepbus::services::cluster {

class MembershipLoop {
 public:
  // What the loop asks of the node's broker connection.
  class Actions {
   public:
    virtual ~Actions() = default;
    // True while the broker connection is open and not closing.
    virtual bool connected() const = 0;
    // Publishes `heartbeat` on the members exchange; false when there is no
    // link to publish it on.
    virtual bool sendHeartbeat(const Heartbeat& heartbeat) = 0;
    // Attaches a consumer to `partition`, in a session of its own.
    virtual void attach(uint32_t partition) = 0;
    // Ends the partition's session and its active life: the broker takes
    // back what the node held and moves the consumer to the next in line.
    // The end comes back through sessionEnded().
    virtual void detach(uint32_t partition) = 0;
    // Forgets the session of `partition`, whose end the broker never
    // confirmed.
    virtual void abandon(uint32_t partition) = 0;
    // True when this node is the partition's active consumer.
    virtual bool active(uint32_t partition) const = 0;
    // Has the broker connections of the silent `node`, found by the local
    // addresses it announced, closed (off this thread: it may block).
    virtual void evict(const std::string& node, const std::vector<std::string>& addresses) = 0;
    // Gives the broker connection up; the node reconnects through the next
    // broker.
    virtual void reconnect() = 0;
  };

  // The loop of node `spec.node`, started at process start as `incarnation`.
  MembershipLoop(const ClusterSpec& spec, uint64_t incarnation, Actions& actions,
                 ClusterStats& counters);

  // The node runs from `now` on: the stall check measures from here.
  void start(SteadyTime now);
  // A broker connection to `broker` opened at `now` from `local_address`:
  // the node announces itself at once.
  void connected(SteadyTime now, std::string local_address, ClusterBroker broker);
  // A heartbeat heard on the members exchange at `now`, the node's own
  // included.
  void heard(const Heartbeat& heartbeat, SteadyTime now);
  // On every timer tick and every input, before anything else: true when the
  // node was stalled (the last check longer ago than the idle timeout), and
  // has dropped every partition.
  bool checkStall(SteadyTime now);
  // Every heartbeat period: expires and evicts silent peers, announces the
  // node, and reconciles.
  void tick(SteadyTime now);
  // Every heartbeat period, after the partitions' own work: gives the
  // connection up when the node's heartbeats stopped coming back.
  void checkEcho(SteadyTime now);
  // The partition's session ended: the broker's end came, or the connection
  // went.
  void sessionEnded(uint32_t partition);
  // The node leaves: it says so (its partitions move at once) and detaches
  // from every partition.
  void leave(SteadyTime now);

  // True when the node has a consumer on `partition` (active or standby).
  bool attached(uint32_t partition) const { return partitions_[partition].attached; }
  // The live nodes, sorted, this one included.
  std::vector<std::string> live() const { return membership_.live(); }

 private:
  struct Partition {
    bool attached = false;
    bool handing_over = false;  // its session was ended; the broker's end not seen yet
    SteadyTime handover_started;
  };

  void announce(bool leaving, SteadyTime now);
  void reconcile(SteadyTime now);
  void detach(uint32_t partition, SteadyTime now);

  const ClusterSpec& spec_;
  const uint64_t incarnation_;
  const std::chrono::milliseconds heartbeat_;
  const std::chrono::milliseconds idle_timeout_;
  Actions& actions_;
  ClusterStats& counters_;
  Poco::Logger& log_;
  Membership membership_;
  std::vector<Partition> partitions_;
  // Every address a peer announced (it reconnects from new ports), for eviction.
  std::map<std::string, std::vector<std::string>> peer_addresses_;
  std::string local_address_;  // of the current connection, announced in heartbeats
  ClusterBroker broker_;
  SteadyTime last_check_;
  SteadyTime connected_at_ = SteadyTime::max();
  SteadyTime last_echo_;  // this connection's last heartbeat that came back
};

}  // namespace cepbus::services::cluster
