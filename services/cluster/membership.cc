#include "services/cluster/membership.h"

#include <algorithm>

#include "services/cluster/fnv1a.h"

namespace cepbus::services::cluster {

std::vector<std::string> rankNodes(uint32_t partition, const std::vector<std::string>& live) {
  std::vector<std::pair<uint64_t, std::string>> scored;
  scored.reserve(live.size());
  for (const std::string& node : live) {
    scored.emplace_back(mix64(fnv1a64(node + "/" + std::to_string(partition))), node);
  }
  // Ties (two nodes hashing alike) break by name, so every node agrees.
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<std::string> out;
  out.reserve(scored.size());
  for (auto& [score, node] : scored) out.push_back(std::move(node));
  return out;
}

Membership::Membership(std::string self, std::chrono::milliseconds idle_timeout)
    : self_(std::move(self)), idle_timeout_(idle_timeout) {}

bool Membership::heard(const Heartbeat& heartbeat, SteadyTime now) {
  if (heartbeat.leaving) return heartbeat.node != self_ && peers_.erase(heartbeat.node) > 0;
  auto [it, added] = peers_.try_emplace(heartbeat.node);
  Peer& peer = it->second;
  const bool restarted = !added && peer.incarnation != heartbeat.incarnation;
  peer.incarnation = heartbeat.incarnation;
  peer.last_heard = now;
  peer.attached = heartbeat.attached;
  std::sort(peer.attached.begin(), peer.attached.end());
  return added || restarted;
}

std::vector<std::string> Membership::expire(SteadyTime now) {
  std::vector<std::string> gone;
  for (auto it = peers_.begin(); it != peers_.end();) {
    if (it->first != self_ && now - it->second.last_heard > idle_timeout_) {
      gone.push_back(it->first);
      it = peers_.erase(it);
    } else {
      ++it;
    }
  }
  return gone;
}

void Membership::forgetPeers() {
  for (auto it = peers_.begin(); it != peers_.end();) {
    it = it->first == self_ ? std::next(it) : peers_.erase(it);
  }
}

std::vector<std::string> Membership::live() const {
  std::vector<std::string> out;
  out.reserve(peers_.size() + 1);
  for (const auto& [node, peer] : peers_) out.push_back(node);
  if (peers_.count(self_) == 0) out.insert(std::lower_bound(out.begin(), out.end(), self_), self_);
  return out;
}

std::string Membership::owner(uint32_t partition) const {
  return rankNodes(partition, live()).front();
}

std::string Membership::standby(uint32_t partition) const {
  const std::vector<std::string> ranked = rankNodes(partition, live());
  return ranked.size() > 1 ? ranked[1] : std::string();
}

bool Membership::attached(const std::string& node, uint32_t partition) const {
  auto it = peers_.find(node);
  return it != peers_.end() &&
         std::binary_search(it->second.attached.begin(), it->second.attached.end(), partition);
}

}  // namespace cepbus::services::cluster
