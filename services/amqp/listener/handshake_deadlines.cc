#include "services/amqp/listener/handshake_deadlines.h"

#include <algorithm>

namespace cepbus::services::amqp {

HandshakeDeadlines::HandshakeDeadlines(std::chrono::milliseconds timeout) : timeout_(timeout) {}

std::vector<uint64_t> HandshakeDeadlines::expired(Clock::time_point now,
                                                  const std::vector<Seen>& sockets) {
  std::map<uint64_t, Entry> kept;
  std::vector<uint64_t> due;
  for (const Seen& s : sockets) {
    if (s.opened) continue;
    auto found = sockets_.find(s.id);
    Entry entry = found == sockets_.end() ? Entry{now, false} : found->second;
    if (!entry.expired && now - entry.first_seen >= timeout_) {
      entry.expired = true;
      due.push_back(s.id);
    }
    kept.emplace(s.id, entry);
  }
  sockets_.swap(kept);
  return due;
}

std::optional<HandshakeDeadlines::Clock::time_point> HandshakeDeadlines::nextDue() const {
  std::optional<Clock::time_point> next;
  for (const auto& [id, entry] : sockets_) {
    if (entry.expired) continue;
    const Clock::time_point due = entry.first_seen + timeout_;
    next = next ? std::min(*next, due) : due;
  }
  return next;
}

}  // namespace cepbus::services::amqp
