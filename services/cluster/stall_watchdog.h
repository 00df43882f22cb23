#pragma once

// StallWatchdog: fences a cluster node that stopped running.
//
// A node that is stopped (SIGSTOP, a frozen VM) or starved keeps its TCP
// connection open, and RabbitMQ 3.10 keeps delivering its partitions to it
// until the broker's own heartbeat gives up (21-30 s, longer under some
// settings). Nothing inside a stopped process can act, and the broker's
// management API cannot close an AMQP 1.0 connection (it lists only the
// per-session "direct" connections, and refuses to close those). So the node
// runs a small helper process beside it: the node beats (a shared counter)
// on every timer tick and hands the helper a duplicate of its broker
// socket; when the beats stop for longer than the idle timeout, the helper
// shuts that socket down. The broker sees the connection end at once and
// its single active consumer moves the partitions to their standbys. When
// the node runs again, it finds its connection gone, drops every partition
// and rejoins.
//
// The helper is the program itself, started as `PROGRAM __cluster-watchdog
// IDLE_MS` with the shared page on fd 3 and the control socket on fd 4 (see
// runStallWatchdog); it ends when the node ends (PR_SET_PDEATHSIG) or closes
// the control socket.
//
// Thread-safety: beat() and watch() may be called from any one thread at a
// time (the node's container thread).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "bus/core/status.h"

namespace cepbus::services::cluster {

class StallWatchdog {
 public:
  // Starts the helper `program` (normally /proc/self/exe).
  static Result<std::unique_ptr<StallWatchdog>> spawn(const std::string& program,
                                                      std::chrono::milliseconds idle_timeout);
  ~StallWatchdog();
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

  // The node is alive.
  void beat();
  // From now on, the socket to shut down on a stall is `fd` (the helper gets
  // a duplicate; `fd` stays the caller's).
  Status watch(int fd);

 private:
  StallWatchdog(int pid, int control, std::atomic<int64_t>* beat);

  const int pid_;
  const int control_;
  std::atomic<int64_t>* const last_beat_ms_;  // in the shared page
};

// The helper's main loop; returns its exit code. `shared_fd` holds the beat
// counter (CLOCK_MONOTONIC milliseconds), `control_fd` carries sockets.
int runStallWatchdog(int shared_fd, int control_fd, std::chrono::milliseconds idle_timeout);

// The descriptor of this process's TCP socket whose local port is `port`,
// or -1 (found through /proc/self/fd and /proc/self/net/tcp{,6}).
int socketWithLocalPort(uint16_t port);

}  // namespace cepbus::services::cluster
