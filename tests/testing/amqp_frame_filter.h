#pragma once

// A loopback TCP proxy in front of an AMQP 1.0 peer that can drop chosen
// frames the peer sends back: how a test makes a real broker "forget" to
// answer (an END that never arrives, say) without patching the broker.
//
// Client bytes go to the upstream unchanged. Upstream bytes are cut into
// AMQP frames (protocol headers "AMQP x 1 0 0" pass as they are; a frame is
// its 4-byte big-endian size and that many bytes, the performative's
// descriptor code right after the extended header) and a frame whose AMQP
// performative code the filter names is not forwarded while dropping is on.
//
// Thread-safety: setDropping() and dropped() from any thread; the proxy runs
// on its own thread until destruction.

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/testing/ports.h"

namespace cepbus::testing {

class AmqpFrameFilter {
 public:
  // Performative descriptor codes (AMQP 1.0, part 2.7).
  static constexpr uint8_t kDisposition = 0x15;
  static constexpr uint8_t kEnd = 0x17;

  AmqpFrameFilter(int upstream_port, uint8_t performative)
      : upstream_port_(upstream_port), performative_(performative) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    port_ = bindAnyLoopbackPort(listen_fd_);
    ::listen(listen_fd_, 16);
    thread_ = std::thread([this] { run(); });
  }
  ~AmqpFrameFilter() {
    stop_ = true;
    thread_.join();
    for (Link& l : links_) {
      ::close(l.client);
      ::close(l.upstream);
    }
    ::close(listen_fd_);
  }
  AmqpFrameFilter(const AmqpFrameFilter&) = delete;
  AmqpFrameFilter& operator=(const AmqpFrameFilter&) = delete;

  int port() const { return port_; }
  void setDropping(bool on) { dropping_ = on; }
  uint64_t dropped() const { return dropped_; }

 private:
  struct Link {
    int client = -1;
    int upstream = -1;
    std::vector<uint8_t> pending;  // upstream bytes not yet a whole frame
    bool open = true;
  };

  void run() {
    while (!stop_) {
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      for (const Link& l : links_) {
        fds.push_back({l.open ? l.client : -1, POLLIN, 0});
        fds.push_back({l.open ? l.upstream : -1, POLLIN, 0});
      }
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) accept();
      for (size_t i = 0; i + 1 < fds.size() && i / 2 < links_.size(); i += 2) {
        Link& l = links_[i / 2];
        if (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) fromClient(l);
        if (l.open && (fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR))) fromUpstream(l);
      }
    }
  }

  void accept() {
    const int client = ::accept(listen_fd_, nullptr, nullptr);
    if (client < 0) return;
    const int upstream = connectLoopback(upstream_port_);
    if (upstream < 0) {
      ::close(client);
      return;
    }
    links_.push_back(Link{client, upstream, {}, true});
  }

  // Either side's end ends both: the peers see the connection drop.
  void close(Link& l) {
    ::shutdown(l.client, SHUT_RDWR);
    ::shutdown(l.upstream, SHUT_RDWR);
    l.open = false;
  }

  static bool sendAll(int fd, const uint8_t* data, size_t n) {
    while (n > 0) {
      const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
      if (w <= 0) return false;
      data += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }

  void fromClient(Link& l) {
    uint8_t buf[16384];
    const ssize_t r = ::recv(l.client, buf, sizeof buf, 0);
    if (r <= 0 || !sendAll(l.upstream, buf, static_cast<size_t>(r))) close(l);
  }

  void fromUpstream(Link& l) {
    uint8_t buf[16384];
    const ssize_t r = ::recv(l.upstream, buf, sizeof buf, 0);
    if (r <= 0) return close(l);
    l.pending.insert(l.pending.end(), buf, buf + r);
    size_t at = 0;
    while (l.pending.size() - at >= 8) {
      const uint8_t* p = l.pending.data() + at;
      size_t size = 8;  // a protocol header
      if (std::memcmp(p, "AMQP", 4) != 0) {
        size = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
        if (size < 8) return close(l);
      }
      if (l.pending.size() - at < size) break;
      if (!(dropping_ && isDropped(p, size)) && !sendAll(l.client, p, size)) return close(l);
      at += size;
    }
    l.pending.erase(l.pending.begin(), l.pending.begin() + static_cast<std::ptrdiff_t>(at));
  }

  // An AMQP frame (type 0) whose body starts with the described list of
  // `performative_`: 0x00, 0x53 (smallulong), code.
  bool isDropped(const uint8_t* frame, size_t size) {
    if (std::memcmp(frame, "AMQP", 4) == 0 || frame[5] != 0) return false;
    const size_t body = size_t{frame[4]} * 4;
    if (size < body + 3) return false;
    if (frame[body] != 0x00 || frame[body + 1] != 0x53 || frame[body + 2] != performative_) {
      return false;
    }
    ++dropped_;
    return true;
  }

  const int upstream_port_;
  const uint8_t performative_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::vector<Link> links_;  // the proxy thread's own
  std::atomic<bool> stop_{false};
  std::atomic<bool> dropping_{false};
  std::atomic<uint64_t> dropped_{0};
  std::thread thread_;
};

}  // namespace cepbus::testing
