#pragma once

// Who is in the cluster, and who owns which partition.
//
// Nodes announce themselves on the cluster's members exchange every
// heartbeat period; a node not heard from for the idle timeout is gone, and
// so is one that said it is leaving. Ownership needs no agreement protocol:
// every node ranks the live nodes for a partition by rendezvous hashing
// (highest mix64(FNV-1a 64 of "<node>/<partition>") first, fnv1a.h), so nodes that see the
// same live set compute the same owner, a node that joins takes about 1/N
// of the partitions and one that leaves hands over only its own. While
// nodes disagree (a heartbeat in flight), the broker's single active
// consumer still lets only one node consume a partition at a time.
//
// Thread-safety: none; the cluster node drives it from its container thread.
// Time is passed in, so the rules are testable without clocks.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cepbus::services::cluster {

using SteadyTime = std::chrono::steady_clock::time_point;

// What a node says of itself in each heartbeat.
struct Heartbeat {
  std::string node;
  // Random per process start: a node that restarted under the same id is a
  // new incarnation, whose partitions start from nothing.
  uint64_t incarnation = 0;
  bool leaving = false;
  // The partitions it has a consumer attached on (active or standby).
  std::vector<uint32_t> attached;
  // The local address ("host:port") of its broker connection, by which
  // another node can have the broker close it (ClusterHooks::evict); a node
  // also knows its own heartbeats by it when they come back.
  std::string address;
};

// The nodes of `live` ranked for `partition`, best first.
std::vector<std::string> rankNodes(uint32_t partition, const std::vector<std::string>& live);

class Membership {
 public:
  Membership(std::string self, std::chrono::milliseconds idle_timeout);

  // Records a heartbeat heard at `now` (our own included); true when the
  // live set changed.
  bool heard(const Heartbeat& heartbeat, SteadyTime now);
  // Forgets nodes silent for longer than the idle timeout (never ourselves);
  // returns the ones forgotten.
  std::vector<std::string> expire(SteadyTime now);

  // Forgets every other node: for a node that was stalled, whose record of
  // who it heard when is stale.
  void forgetPeers();

  // The live nodes, sorted, ourselves included.
  std::vector<std::string> live() const;
  // The owner of `partition` among the live nodes, and its runner-up (the
  // standby; empty when alone).
  std::string owner(uint32_t partition) const;
  std::string standby(uint32_t partition) const;
  // True when `node` is live and said it has a consumer on `partition`.
  bool attached(const std::string& node, uint32_t partition) const;

  const std::string& self() const { return self_; }

 private:
  struct Peer {
    uint64_t incarnation = 0;
    SteadyTime last_heard;
    std::vector<uint32_t> attached;
  };

  const std::string self_;
  const std::chrono::milliseconds idle_timeout_;
  std::map<std::string, Peer> peers_;  // ourselves included once heard
};

}  // namespace cepbus::services::cluster
