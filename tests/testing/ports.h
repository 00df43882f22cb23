#pragma once

// Loopback ports for tests and benchmarks that start the real `cepbus` (or a
// reference broker) as a separate process.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>

namespace cepbus::testing {

// A TCP connection to `port` on loopback, or -1 when connect() fails (or
// takes longer than `timeout`, when one is given).
inline int connectLoopback(int port, std::optional<timeval> timeout = std::nullopt) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (timeout) ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &*timeout, sizeof *timeout);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Binds `fd` to a port of the kernel's choice on 127.0.0.1 and returns it.
inline int bindAnyLoopbackPort(int fd) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

// A port nobody listens on right now. Another process may take it before the
// caller binds it (tests running in parallel have: use reservedPort() there).
inline int freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int port = bindAnyLoopbackPort(fd);
  ::close(fd);
  return port;
}

// A loopback port reserved for the rest of this process: a socket stays
// bound to it (SO_REUSEADDR, never listening), so the kernel gives it to no
// other bind(0) or outgoing connection and a plain bind() elsewhere fails,
// while a server told to listen there with SO_REUSEADDR — cepbus's AMQP and
// admin listeners — still can, again after a restart. Tests that start
// processes side by side (ctest -j) thus never share a port.
inline int reservedPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  return bindAnyLoopbackPort(fd);  // `fd` stays open until the process exits
}

// True when something accepts TCP connections on 127.0.0.1:`port`.
inline bool canConnect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// Polls canConnect() until a process just started listens on `port` or
// `limit` passed (generous: a loaded CI box starts the bus slowly).
inline bool waitListening(int port, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!canConnect(port)) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace cepbus::testing
