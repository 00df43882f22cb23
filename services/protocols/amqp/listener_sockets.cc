#include "services/protocols/amqp/listener_sockets.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstring>

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer's dynamic annotations (libtsan).
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

namespace cepbus::services::amqp {
namespace {

// ThreadSanitizer takes a descriptor number for one object and reports any
// use of it on one thread (list()'s fstat, shutDown()'s dup3) that a close
// on another (Proton's) may precede. That is this class's premise, not a
// race on memory: the kernel does either call on whatever the number refers
// to at that instant, and shutDown() acts only once the inode has been
// checked on its own duplicate. So, while one of these is alive, TSan does
// not record this thread's uses of descriptors (nor its memory accesses,
// which in these scopes are the watch thread's own: locals and members).
//
// Not a suppression: TSan matches one against the symbolized report, and
// symbolizing opens /proc/self/maps and the executable — which fails with
// EMFILE when the process is out of descriptors, exactly when this class is
// needed. The report then stood unsuppressed and, with halt_on_error=1 (CI),
// ended the bus with exit code 66.
class UntrackedDescriptorUse {
 public:
  UntrackedDescriptorUse() {
#if defined(__SANITIZE_THREAD__)
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
#endif
  }
  ~UntrackedDescriptorUse() {
#if defined(__SANITIZE_THREAD__)
    AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
#endif
  }
  UntrackedDescriptorUse(const UntrackedDescriptorUse&) = delete;
  UntrackedDescriptorUse& operator=(const UntrackedDescriptorUse&) = delete;
};

std::string hostPort(const sockaddr* addr, socklen_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = -1;
  if (addr->sa_family == AF_INET && len >= sizeof(sockaddr_in)) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    ::inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    port = ntohs(in->sin_port);
  } else if (addr->sa_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(addr);
    ::inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    port = ntohs(in6->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
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
    sockaddr_storage local{};
    socklen_t local_len = sizeof local;
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    struct stat st {};
    {
      const UntrackedDescriptorUse untracked;
      // getsockname() fails on anything but a socket; the listening socket
      // itself has no peer.
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
          portOf(local) != port_ ||
          ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 ||
          ::fstat(fd, &st) != 0) {
        continue;
      }
    }
    found.push_back(AcceptedSocket{fd, static_cast<uint64_t>(st.st_ino),
                                   socketKey(reinterpret_cast<const sockaddr*>(&local), local_len,
                                             reinterpret_cast<const sockaddr*>(&peer), peer_len)});
  }
  return found;
}

bool ListenerSockets::shutDown(const AcceptedSocket& socket) {
  if (!valid()) return false;
  const UntrackedDescriptorUse untracked;
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
