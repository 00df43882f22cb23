#pragma once

// The AMQP listener's handshake deadline: a connection whose client's AMQP
// open has not arrived within `handshake-timeout` of its accept is ended,
// however far it got — nothing sent, part of a protocol header, the AMQP,
// SASL or TLS header and then nothing, a TLS handshake or a SASL exchange
// left unfinished, SASL done and no AMQP open — and counted.
//
// Proton 0.37 offers no hook for this: its C++ binding passes no event of a
// connection to the listener before the client's AMQP open, its transport's
// idle timeout is not ticked before the AMQP header (c/src/core/transport.c:
// neither the autodetect nor the SASL layer has a tick), and nothing public
// reaches a connection at its accept. So the watch looks at the sockets
// (ListenerSockets), asks which have had their AMQP open (openedSockets():
// the listener's handler records each open), times the others
// (HandshakeDeadlines) and shuts down those past the deadline; Proton then
// ends their connections as if the client had gone.
//
// The watch has a thread of its own, which sleeps while nothing handshakes:
// an accept wakes it, it looks within a quarter of the timeout, and again
// when the first socket it found handshaking is due, until none is.
//
// Thread safety: accepted() may be called from any thread (the container's,
// in listen_handler::on_accept); start() and stop() from one thread.

#include <chrono>
#include <functional>
#include <optional>
#include <thread>

#include "bus/base/mutex.h"

namespace cepbus::services::amqp {

class HandshakeWatch {
 public:
  // `closed(n)`: n connections were just ended (on the watch's thread).
  HandshakeWatch(std::chrono::milliseconds timeout, std::function<void(size_t)> closed);
  ~HandshakeWatch();  // stops
  HandshakeWatch(const HandshakeWatch&) = delete;
  HandshakeWatch& operator=(const HandshakeWatch&) = delete;

  // Watches the connections accepted on `port` (once: a second call does
  // nothing). False if the descriptors it needs could not be had (the watch
  // then does nothing).
  bool start(int port);
  // A connection was accepted: look at the sockets soon.
  void accepted();
  // Idempotent.
  void stop();

 private:
  const std::chrono::milliseconds timeout_;
  const std::function<void(size_t)> closed_;

  Mutex mu_;
  CondVar wake_;
  std::optional<std::chrono::steady_clock::time_point> due_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace cepbus::services::amqp
