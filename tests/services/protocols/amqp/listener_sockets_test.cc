#include "services/protocols/amqp/listener_sockets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace cepbus::services::amqp {
namespace {

sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  return addr;
}

// A listening socket on an ephemeral loopback port, and connections to it.
class ListenerSocketsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(listener_, 0);
    sockaddr_in addr = loopback(0);
    ASSERT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::listen(listener_, 16), 0);
    socklen_t len = sizeof addr;
    ASSERT_EQ(::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  void TearDown() override {
    for (const int fd : fds_) ::close(fd);
    ::close(listener_);
  }

  // A client connection; *accepted is the listener's side of it.
  int connectOne(int* accepted) {
    const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = loopback(port_);
    EXPECT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    *accepted = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    EXPECT_GE(*accepted, 0);
    fds_.push_back(client);
    fds_.push_back(*accepted);
    return client;
  }

  static std::string keyOf(int fd) {
    sockaddr_storage local{};
    sockaddr_storage peer{};
    socklen_t local_len = sizeof local;
    socklen_t peer_len = sizeof peer;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len);
    ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len);
    return socketKey(reinterpret_cast<sockaddr*>(&local), local_len,
                     reinterpret_cast<sockaddr*>(&peer), peer_len);
  }

  int listener_ = -1;
  int port_ = 0;
  std::vector<int> fds_;
};

TEST_F(ListenerSocketsTest, ListsTheAcceptedSocketsOnly) {
  int a1 = -1;
  int a2 = -1;
  connectOne(&a1);
  connectOne(&a2);
  ListenerSockets sockets(port_);
  ASSERT_TRUE(sockets.valid());
  const std::vector<AcceptedSocket> found = sockets.list();
  // Neither the listening socket nor the clients' ends (another local port).
  ASSERT_EQ(found.size(), 2u);
  for (const AcceptedSocket& s : found) {
    EXPECT_TRUE(s.fd == a1 || s.fd == a2) << s.fd;
    EXPECT_EQ(s.key, keyOf(s.fd));
    EXPECT_NE(s.inode, 0u);
  }
  EXPECT_EQ(keyOf(a1).rfind("127.0.0.1:" + std::to_string(port_) + ">127.0.0.1:", 0), 0u)
      << keyOf(a1);
}

TEST_F(ListenerSocketsTest, ShuttingDownEndsTheStreamAndLeavesTheDescriptorOpen) {
  int accepted = -1;
  const int client = connectOne(&accepted);
  ListenerSockets sockets(port_);
  const std::vector<AcceptedSocket> found = sockets.list();
  ASSERT_EQ(found.size(), 1u);
  EXPECT_TRUE(sockets.shutDown(found[0]));
  char c;
  EXPECT_EQ(::recv(client, &c, 1, 0), 0);    // the client sees the end
  EXPECT_EQ(::recv(accepted, &c, 1, 0), 0);  // and so does the owner, on its descriptor
  EXPECT_EQ(::fcntl(accepted, F_GETFD), FD_CLOEXEC);
}

TEST_F(ListenerSocketsTest, ADescriptorReusedSinceTheListingIsNotTouched) {
  int accepted = -1;
  connectOne(&accepted);
  ListenerSockets sockets(port_);
  const std::vector<AcceptedSocket> found = sockets.list();
  ASSERT_EQ(found.size(), 1u);
  // The socket goes and another connection gets its descriptor number.
  int next = -1;
  const int client = connectOne(&next);
  ASSERT_EQ(::dup2(next, accepted), accepted);
  EXPECT_FALSE(sockets.shutDown(found[0]));
  ASSERT_EQ(::send(client, "x", 1, 0), 1);
  char c;
  EXPECT_EQ(::recv(accepted, &c, 1, 0), 1);
}

TEST_F(ListenerSocketsTest, WorksWhenTheProcessHasNoDescriptorLeft) {
  int accepted = -1;
  const int client = connectOne(&accepted);
  ListenerSockets sockets(port_);
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &old), 0);
  // The limit just above the highest descriptor held, every one below taken.
  int highest = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    highest = std::max(highest, std::stoi(entry.path().filename().string()));
  }
  std::vector<int> filler;
  const rlimit low{static_cast<rlim_t>(highest + 1), old.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  for (int fd; (fd = ::dup(0)) >= 0;) filler.push_back(fd);
  std::vector<AcceptedSocket> found = sockets.list();
  const bool shut = found.size() == 1 && sockets.shutDown(found[0]);
  for (const int fd : filler) ::close(fd);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &old), 0);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_TRUE(shut);
  char c;
  EXPECT_EQ(::recv(client, &c, 1, 0), 0);
}

}  // namespace
}  // namespace cepbus::services::amqp
