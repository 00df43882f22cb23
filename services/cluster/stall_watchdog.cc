#include "services/cluster/stall_watchdog.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

extern char** environ;

namespace cepbus::services::cluster {
namespace {

constexpr int kSharedFd = 3;
constexpr int kControlFd = 4;

int64_t monotonicMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

std::string errnoText(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// The inode of the TCP socket listed in a /proc/net/tcp{,6} file with local
// port `port`, or 0.
uint64_t inodeOfLocalPort(const char* table, uint16_t port) {
  std::ifstream in(table);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
    uint64_t inode = 0;
    fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
        timeout >> inode;
    const size_t colon = local.rfind(':');
    if (colon == std::string::npos) continue;
    if (std::stoul(local.substr(colon + 1), nullptr, 16) == port) return inode;
  }
  return 0;
}

// One byte and room for one descriptor: the message that carries a socket
// from the node to its watchdog (SCM_RIGHTS), both ways.
struct FdMessage {
  FdMessage() {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;

  char byte = 'w';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
};

}  // namespace

int socketWithLocalPort(uint16_t port) {
  uint64_t inode = inodeOfLocalPort("/proc/self/net/tcp", port);
  if (inode == 0) inode = inodeOfLocalPort("/proc/self/net/tcp6", port);
  if (inode == 0) return -1;
  const std::string wanted = "socket:[" + std::to_string(inode) + "]";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::error_code link_ec;
    const auto target = std::filesystem::read_symlink(entry.path(), link_ec);
    if (!link_ec && target.string() == wanted) {
      return std::stoi(entry.path().filename().string());
    }
  }
  return -1;
}

Result<std::unique_ptr<StallWatchdog>> StallWatchdog::spawn(
    const std::string& program, std::chrono::milliseconds idle_timeout) {
  const int shared = memfd_create("cepbus-watchdog", MFD_CLOEXEC);
  if (shared < 0) return Status::ioError(errnoText("memfd_create"));
  if (ftruncate(shared, sizeof(std::atomic<int64_t>)) != 0) {
    close(shared);
    return Status::ioError(errnoText("ftruncate"));
  }
  void* page =
      mmap(nullptr, sizeof(std::atomic<int64_t>), PROT_READ | PROT_WRITE, MAP_SHARED, shared, 0);
  if (page == MAP_FAILED) {
    close(shared);
    return Status::ioError(errnoText("mmap"));
  }
  auto* beat = new (page) std::atomic<int64_t>(monotonicMs());
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    munmap(page, sizeof(std::atomic<int64_t>));
    close(shared);
    return Status::ioError(errnoText("socketpair"));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, shared, kSharedFd);  // dup2 clears CLOEXEC
  posix_spawn_file_actions_adddup2(&actions, pair[1], kControlFd);
  std::string arg0 = program, command = "__cluster-watchdog",
              timeout = std::to_string(idle_timeout.count());
  char* argv[] = {arg0.data(), command.data(), timeout.data(), nullptr};
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(shared);
  close(pair[1]);
  if (spawned != 0) {
    close(pair[0]);
    munmap(page, sizeof(std::atomic<int64_t>));
    return Status::ioError("cannot start the stall watchdog " + program + ": " +
                           std::strerror(spawned));
  }
  return std::unique_ptr<StallWatchdog>(new StallWatchdog(pid, pair[0], beat));
}

StallWatchdog::StallWatchdog(int pid, int control, std::atomic<int64_t>* beat)
    : pid_(pid), control_(control), last_beat_ms_(beat) {}

StallWatchdog::~StallWatchdog() {
  close(control_);  // the helper's end of the socket sees EOF and exits
  int status = 0;
  for (int i = 0; i < 100 && waitpid(pid_, &status, WNOHANG) == 0; ++i) usleep(10'000);
  if (waitpid(pid_, &status, WNOHANG) == 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }
  munmap(last_beat_ms_, sizeof(std::atomic<int64_t>));
}

void StallWatchdog::beat() { last_beat_ms_->store(monotonicMs(), std::memory_order_relaxed); }

Status StallWatchdog::watch(int fd) {
  FdMessage m;
  cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  if (sendmsg(control_, &m.msg, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
    return Status::ioError(errnoText("handing the broker socket to the stall watchdog"));
  }
  return Status::ok();
}

int runStallWatchdog(int shared_fd, int control_fd, std::chrono::milliseconds idle_timeout) {
  // The helper dies with the node.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  void* page = mmap(nullptr, sizeof(std::atomic<int64_t>), PROT_READ, MAP_SHARED, shared_fd, 0);
  if (page == MAP_FAILED) {
    std::perror("cepbus cluster watchdog: mmap");
    return 1;
  }
  const auto* beat = static_cast<const std::atomic<int64_t>*>(page);
  int watched = -1;
  bool fenced = false;
  for (;;) {
    pollfd p{control_fd, POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      FdMessage m;
      const ssize_t n = recvmsg(control_fd, &m.msg, 0);
      if (n <= 0) return 0;  // the node closed its end: it is stopping
      cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
      if (c != nullptr && c->cmsg_type == SCM_RIGHTS) {
        if (watched >= 0) close(watched);
        std::memcpy(&watched, CMSG_DATA(c), sizeof(int));
        fenced = false;
      }
    }
    const int64_t silent = monotonicMs() - beat->load(std::memory_order_relaxed);
    if (silent <= idle_timeout.count()) {
      fenced = false;
    } else if (!fenced && watched >= 0) {
      // Ends the TCP connection for the node too: the socket is shared.
      shutdown(watched, SHUT_RDWR);
      fenced = true;
      std::fprintf(stderr,
                   "cepbus cluster watchdog: the node has not run for %lld ms (idle timeout "
                   "%lld ms): closed its broker connection so its partitions move\n",
                   static_cast<long long>(silent), static_cast<long long>(idle_timeout.count()));
    }
  }
}

}  // namespace cepbus::services::cluster
