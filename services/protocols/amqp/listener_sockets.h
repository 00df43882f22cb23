#pragma once

// The connections a listener accepted, seen from the process's descriptor
// table rather than from Proton, and a way to end one of them.
//
// Proton 0.37 shows the AMQP listener nothing of a connection until the
// client's open has arrived (docs/operations.md, "Limits against hostile
// clients"), and its own idle timeout does not run before the AMQP header:
// a client that connects and stalls would keep its socket for good. The
// handshake deadline (handshake_watch.h) therefore looks at the sockets
// themselves: every socket of this process whose local port is the
// listener's and that has a peer. Ending one is a shutdown(2) of the socket,
// not a close(2) of Proton's descriptor: Proton then reads the end of the
// stream, ends the connection as if the client had gone, and closes its
// descriptor itself.
//
// A look costs a few system calls per descriptor of the process (about
// 4 ms with 1,000 connections, 35 ms with 4,000, on a loaded 2-core box);
// HandshakeWatch looks only while connections handshake.
//
// The descriptors it needs to look and to end one are taken once, at
// construction, so that it still works when the process has run out of
// descriptors — which is when it is needed most.
//
// Thread safety: one thread at a time (HandshakeWatch's); socketKey() may be
// called from any thread.

#include <dirent.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

namespace cepbus::services::amqp {

struct AcceptedSocket {
  int fd = -1;         // the descriptor it had when it was listed
  uint64_t inode = 0;  // the socket itself: a descriptor number may be reused
  std::string key;     // socketKey() of its local and peer addresses
};

// "local host:port>peer host:port", numeric: what the SASL plugin records of
// an opened transport (Proton reads its addresses with the same
// getsockname/getpeername), so that the two can be matched.
std::string socketKey(const sockaddr* local, socklen_t local_len, const sockaddr* peer,
                      socklen_t peer_len);

class ListenerSockets {
 public:
  // Holds three descriptors until destroyed: /proc/self/fd, and two for
  // shutDown(). valid() is false when they could not be had.
  explicit ListenerSockets(int port);
  ~ListenerSockets();
  ListenerSockets(const ListenerSockets&) = delete;
  ListenerSockets& operator=(const ListenerSockets&) = delete;

  bool valid() const;

  // The connected TCP sockets of this process whose local port is the port.
  std::vector<AcceptedSocket> list();

  // Shuts `socket` down both ways if its descriptor still refers to the same
  // socket: the descriptor is duplicated onto a reserved one, checked, then
  // shut down, so a descriptor closed and reused meanwhile is never touched.
  // False when it is gone.
  bool shutDown(const AcceptedSocket& socket);

 private:
  const int port_;
  DIR* dir_ = nullptr;  // /proc/self/fd, read again by each list()
  int null_ = -1;       // /dev/null
  int spare_ = -1;      // /dev/null, or for a moment the socket being shut down
};

}  // namespace cepbus::services::amqp
