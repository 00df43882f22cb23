#include "services/cluster/membership_loop.h"

#include <Poco/Logger.h>

#include <algorithm>

namespace cepbus::services::cluster {
namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

MembershipLoop::MembershipLoop(const ClusterSpec& spec, uint64_t incarnation, Actions& actions,
                               ClusterStats& counters)
    : spec_(spec),
      incarnation_(incarnation),
      heartbeat_(spec.heartbeat_ms),
      idle_timeout_(spec.idle_timeout_ms),
      actions_(actions),
      counters_(counters),
      log_(Poco::Logger::get("cepbus.cluster")),
      membership_(spec.node, idle_timeout_),
      partitions_(spec.partitions) {}

void MembershipLoop::start(SteadyTime now) { last_check_ = now; }

void MembershipLoop::connected(SteadyTime now, std::string local_address, ClusterBroker broker) {
  local_address_ = std::move(local_address);
  broker_ = std::move(broker);
  connected_at_ = now;
  last_echo_ = now;
  announce(false, now);
}

void MembershipLoop::heard(const Heartbeat& heartbeat, SteadyTime now) {
  if (heartbeat.node == spec_.node) {
    if (heartbeat.incarnation == incarnation_ && heartbeat.address == local_address_) {
      last_echo_ = now;
    }
    return;
  }
  if (!heartbeat.address.empty()) {
    auto& known = peer_addresses_[heartbeat.node];
    if (std::find(known.begin(), known.end(), heartbeat.address) == known.end()) {
      known.push_back(heartbeat.address);
    }
  }
  if (membership_.heard(heartbeat, now)) {
    log_.information("cluster %s node %s: live nodes now %s", spec_.name, spec_.node,
                     joined(membership_.live()));
  }
}

bool MembershipLoop::checkStall(SteadyTime now) {
  const auto gap = now - last_check_;
  last_check_ = now;
  if (gap <= idle_timeout_) return false;
  ++counters_.stalls;
  log_.warning(
      "cluster %s node %s: stalled for %ld ms (idle timeout %lu ms); dropping every partition",
      spec_.name, spec_.node,
      static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(gap).count()),
      static_cast<unsigned long>(spec_.idle_timeout_ms));
  for (uint32_t p = 0; p < partitions_.size(); ++p) detach(p, now);
  connected_at_ = now;  // wait a round of heartbeats before attaching again
  // What it heard before the stall is stale: judged by it, every peer would
  // look gone (and be evicted). It hears them again within a heartbeat.
  membership_.forgetPeers();
  return true;
}

void MembershipLoop::tick(SteadyTime now) {
  for (const std::string& gone : membership_.expire(now)) {
    log_.warning("cluster %s node %s: node %s went silent; its partitions move", spec_.name,
                 spec_.node, gone);
    auto addresses = peer_addresses_.find(gone);
    if (addresses == peer_addresses_.end()) continue;
    actions_.evict(gone, addresses->second);
    peer_addresses_.erase(addresses);
  }
  announce(false, now);
  if (now - connected_at_ > 2 * heartbeat_) reconcile(now);
}

void MembershipLoop::checkEcho(SteadyTime now) {
  if (!actions_.connected() || now - last_echo_ < 2 * idle_timeout_) return;
  ++counters_.echo_timeouts;
  log_.warning(
      "cluster %s node %s: none of this node's heartbeats came back through broker %s:%hu for "
      "%s ms; reconnecting through the next broker",
      spec_.name, spec_.node, broker_.host, broker_.port,
      std::to_string(
          std::chrono::duration_cast<std::chrono::milliseconds>(now - last_echo_).count()));
  last_echo_ = now;
  actions_.reconnect();
}

void MembershipLoop::sessionEnded(uint32_t partition) {
  partitions_[partition].attached = false;
  partitions_[partition].handing_over = false;
}

void MembershipLoop::leave(SteadyTime now) {
  announce(true, now);
  for (uint32_t p = 0; p < partitions_.size(); ++p) detach(p, now);
}

void MembershipLoop::announce(bool leaving, SteadyTime now) {
  Heartbeat heartbeat{spec_.node, incarnation_, leaving, {}, local_address_};
  for (uint32_t p = 0; p < partitions_.size(); ++p) {
    if (partitions_[p].attached) heartbeat.attached.push_back(p);
  }
  if (!actions_.sendHeartbeat(heartbeat)) return;
  heartbeat.leaving = false;
  membership_.heard(heartbeat, now);
}

// Attach where this node ranks first or second, detach elsewhere, and hand
// over a partition this node is active on while its owner waits for it.
void MembershipLoop::reconcile(SteadyTime now) {
  if (!actions_.connected()) return;
  const std::vector<std::string> live = membership_.live();
  for (uint32_t index = 0; index < partitions_.size(); ++index) {
    Partition& p = partitions_[index];
    const std::vector<std::string> ranked = rankNodes(index, live);
    const auto rank = std::find(ranked.begin(), ranked.end(), spec_.node) - ranked.begin();
    const bool wanted = rank < 2;
    if (p.handing_over && now - p.handover_started > idle_timeout_) {
      // RabbitMQ 3.10 ended the session (its consumer was gone) but sent no
      // end back: waiting longer would leave the partition without this
      // node for good, even once it is the owner.
      log_.warning(
          "cluster %s node %s: partition %u: the broker did not confirm the end of its session "
          "within the idle timeout (%lu ms); the partition may be attached again",
          spec_.name, spec_.node, index, static_cast<unsigned long>(spec_.idle_timeout_ms));
      ++counters_.unconfirmed_handovers;
      actions_.abandon(index);
      sessionEnded(index);
    }
    if (wanted && !p.attached && !p.handing_over) {
      actions_.attach(index);
      p.attached = true;
    } else if (!wanted && p.attached) {
      detach(index, now);
    } else if (p.attached && actions_.active(index) && rank != 0 &&
               membership_.attached(ranked[0], index)) {
      log_.information("cluster %s node %s: handing partition %u over to its owner %s", spec_.name,
                       spec_.node, index, ranked[0]);
      ++counters_.handovers;
      detach(index, now);
    }
  }
}

// Ends the partition's session: the broker takes back what it held
// unsettled and gives the consumer to the next attached node.
void MembershipLoop::detach(uint32_t partition, SteadyTime now) {
  Partition& p = partitions_[partition];
  if (!p.attached) return;
  p.handing_over = true;
  p.handover_started = now;
  actions_.detach(partition);
  p.attached = false;
}

}  // namespace cepbus::services::cluster
