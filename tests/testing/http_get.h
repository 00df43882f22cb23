#pragma once

// httpGet: the smallest HTTP client the end-to-end tests need to read the
// admin listener of a `cepbus` they started (/metrics, /api/...).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace cepbus::testing {

// One HTTP/1.1 GET of `target` on 127.0.0.1:`port` with Connection: close.
// Returns the whole response as the server sent it (status line, headers and
// body, so a test can look at the status and the body in one string), or ""
// when nothing accepts the connection: one attempt, callers wait for the
// listener first (waitListening()).
inline std::string httpGet(int port, const std::string& target) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string response;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request =
        "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) {
        response.append(buf, static_cast<size_t>(n));
      }
    }
  }
  ::close(fd);
  return response;
}

}  // namespace cepbus::testing
