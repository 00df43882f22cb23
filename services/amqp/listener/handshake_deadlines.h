#pragma once

// Which of a listener's sockets have been handshaking for longer than the
// handshake timeout: seen for at least that long without their client's
// AMQP open (HandshakeWatch looks at the sockets and asks which have
// opened).
//
// A socket's time starts when a look first finds it, not at its accept,
// which the listener cannot tie to a socket: HandshakeWatch looks within a
// quarter of the timeout of every accept, so a socket is due between the
// timeout and a quarter more after it was accepted.
//
// Thread safety: none; one thread calls it (HandshakeWatch's).

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace cepbus::services::amqp {

class HandshakeDeadlines {
 public:
  using Clock = std::chrono::steady_clock;

  // A socket found by a look, by its inode (ListenerSockets).
  struct Seen {
    uint64_t id = 0;
    bool opened = false;
  };

  explicit HandshakeDeadlines(std::chrono::milliseconds timeout);

  // One look at the sockets the listener holds at `now`: the ids of those
  // that have not opened and were first found at least the timeout before,
  // each returned once (its end is under way). Sockets no longer there, or
  // opened, are forgotten.
  std::vector<uint64_t> expired(Clock::time_point now, const std::vector<Seen>& sockets);

  // When the first socket still handshaking is due; none: nothing waits.
  std::optional<Clock::time_point> nextDue() const;

 private:
  struct Entry {
    Clock::time_point first_seen;
    bool expired = false;
  };

  const std::chrono::milliseconds timeout_;
  std::map<uint64_t, Entry> sockets_;
};

}  // namespace cepbus::services::amqp
