#include "services/amqp/listener/handshake_watch.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "services/amqp/listener/handshake_deadlines.h"
#include "services/protocols/amqp/listener_sockets.h"
#include "services/protocols/amqp/sasl_plugin.h"

namespace cepbus::services::amqp {

using Clock = std::chrono::steady_clock;

HandshakeWatch::HandshakeWatch(std::chrono::milliseconds timeout,
                               std::function<void(size_t)> closed)
    : timeout_(timeout), closed_(std::move(closed)) {}

HandshakeWatch::~HandshakeWatch() { stop(); }

bool HandshakeWatch::start(int port) {
  if (thread_.joinable()) return true;
  auto sockets = std::make_unique<ListenerSockets>(port);
  if (!sockets->valid()) return false;
  thread_ = std::thread([this, port, sockets = std::move(sockets)] {
    HandshakeDeadlines deadlines(timeout_);
    MutexLock lock(mu_);
    while (!stopping_) {
      if (!due_) {
        wake_.wait(mu_);
        continue;
      }
      const Clock::time_point now = Clock::now();
      if (now < *due_) {
        wake_.waitUntil(mu_, *due_);
        continue;
      }
      due_.reset();
      lock.unlock();

      const std::vector<AcceptedSocket> found = sockets->list();
      const std::set<std::string> opened = openedSockets(port);
      std::vector<HandshakeDeadlines::Seen> seen;
      std::map<uint64_t, const AcceptedSocket*> by_id;
      for (const AcceptedSocket& s : found) {
        seen.push_back({s.inode, opened.contains(s.key)});
        by_id[s.inode] = &s;
      }
      size_t closed = 0;
      for (const uint64_t id : deadlines.expired(now, seen)) {
        if (sockets->shutDown(*by_id[id])) ++closed;
      }
      if (closed > 0) closed_(closed);
      const std::optional<Clock::time_point> next = deadlines.nextDue();

      lock.lock();
      if (next && (!due_ || *next < *due_)) due_ = next;
    }
  });
  return true;
}

void HandshakeWatch::accepted() {
  const Clock::time_point soon = Clock::now() + timeout_ / 4;
  MutexLock lock(mu_);
  if (due_ && *due_ <= soon) return;
  due_ = soon;
  wake_.notify_one();
}

void HandshakeWatch::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

}  // namespace cepbus::services::amqp
