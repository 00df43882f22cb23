#include "services/amqp/listener_sockets.h"

#include <dirent.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstring>

namespace cepbus::services::amqp {
namespace {

std::string hostPort(const sockaddr* addr, socklen_t len) {
  char host[NI_MAXHOST];
  char port[NI_MAXSERV];
  if (::getnameinfo(addr, len, host, sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "?";
  }
  return std::string(host) + ":" + port;
}

int portOf(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  }
  if (addr.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  }
  return -1;
}

}  // namespace

std::string socketKey(const sockaddr* local, socklen_t local_len, const sockaddr* peer,
                      socklen_t peer_len) {
  return hostPort(local, local_len) + ">" + hostPort(peer, peer_len);
}

ListenerSockets::ListenerSockets(int port) : port_(port) {
  dir_ = ::opendir("/proc/self/fd");
  null_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  spare_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
}

ListenerSockets::~ListenerSockets() {
  if (dir_ != nullptr) ::closedir(dir_);
  if (null_ >= 0) ::close(null_);
  if (spare_ >= 0) ::close(spare_);
}

bool ListenerSockets::valid() const { return dir_ != nullptr && null_ >= 0 && spare_ >= 0; }

std::vector<AcceptedSocket> ListenerSockets::list() {
  std::vector<AcceptedSocket> found;
  if (!valid()) return found;
  // Reading the directory from its start again lists the descriptors open now.
  ::rewinddir(dir_);
  const int own = ::dirfd(dir_);
  while (const dirent* entry = ::readdir(dir_)) {
    int fd = -1;
    const char* name = entry->d_name;
    if (std::from_chars(name, name + std::strlen(name), fd).ec != std::errc() || fd == own ||
        fd == null_ || fd == spare_) {
      continue;
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{};
    socklen_t local_len = sizeof local;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
        portOf(local) != port_) {
      continue;
    }
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    // The listening socket itself has no peer.
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;
    found.push_back(AcceptedSocket{fd, static_cast<uint64_t>(st.st_ino),
                                   socketKey(reinterpret_cast<const sockaddr*>(&local), local_len,
                                             reinterpret_cast<const sockaddr*>(&peer), peer_len)});
  }
  return found;
}

bool ListenerSockets::shutDown(const AcceptedSocket& socket) {
  if (!valid()) return false;
  // dup3() onto a descriptor already held needs no free one, and gives us
  // our own reference to whatever the descriptor refers to now.
  if (::dup3(socket.fd, spare_, O_CLOEXEC) < 0) return false;
  struct stat st {};
  const bool same = ::fstat(spare_, &st) == 0 && S_ISSOCK(st.st_mode) &&
                    static_cast<uint64_t>(st.st_ino) == socket.inode;
  const bool shut = same && ::shutdown(spare_, SHUT_RDWR) == 0;
  // Lets go of the socket: Proton's descriptor is the last one.
  ::dup3(null_, spare_, O_CLOEXEC);
  return shut;
}

}  // namespace cepbus::services::amqp
