#pragma once

// httpRequest, httpGet: the smallest HTTP client the end-to-end tests need
// to use the admin listener of a `cepbus` they started (/metrics, /api/...).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace cepbus::testing {

// One HTTP/1.1 request with Connection: close (`headers`: more header
// lines, each ending in "\r\n"). Returns the whole response as the server
// sent it (status line, headers and body, so a test can look at the status
// and the body in one string), or "" when nothing accepts the connection:
// one attempt, callers wait for the listener first (waitListening()).
inline std::string httpRequest(int port, const std::string& method, const std::string& target,
                               const std::string& headers = "", const std::string& body = "") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  std::string response;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const std::string request =
        method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + headers +
        "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
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

// One GET of `target` (httpRequest()).
inline std::string httpGet(int port, const std::string& target) {
  return httpRequest(port, "GET", target);
}

}  // namespace cepbus::testing
