#include "services/amqp/listener/client_connections.h"

#include <utility>

namespace cepbus::services::amqp {

Waker::Waker(proton::work_queue* queue)
    : work_([target = target_](std::function<void()> fn) {
        MutexLock lock(target->mu);
        return target->queue != nullptr && target->queue->add(std::move(fn));
      }) {
  target_->queue = queue;
}

void Waker::close() {
  work_.close();
  MutexLock lock(target_->mu);
  target_->queue = nullptr;
}

Result<std::string> authenticatedUser(const std::string& mechanism, const std::string& user,
                                      bool allow_anonymous) {
  if (mechanism == "ANONYMOUS" && allow_anonymous) return std::string();
  if (mechanism == "PLAIN" && !user.empty()) return user;
  return Status::rejected("authenticate with SASL PLAIN" +
                          std::string(allow_anonymous ? " or ANONYMOUS" : "") + " (got " +
                          (mechanism.empty() ? std::string("none") : mechanism) + ")");
}

ClientConnections::ClientConnections(std::shared_ptr<AmqpAdmission> admission,
                                     std::shared_ptr<ListenerCounters> counters)
    : admission_(std::move(admission)), counters_(std::move(counters)) {}

std::optional<std::string> ClientConnections::open(const proton::connection& c, uint64_t id,
                                                   std::string user) {
  if (auto refusal = admission_->admitConnection(id, user)) return refusal;
  ClientConnection& conn = connections_[c];
  conn.id = id;
  conn.user = std::move(user);
  conn.names = admission_->names(id);
  conn.user_unsettled = admission_->userUnsettled(id);
  conn.container_id = c.container_id();
  conn.waker = std::make_shared<Waker>(&c.work_queue());
  counters_->connections.inc();
  return std::nullopt;
}

const ClientConnection* ClientConnections::find(const proton::connection& c) const {
  auto it = connections_.find(c);
  return it == connections_.end() ? nullptr : &it->second;
}

std::shared_ptr<Waker> ClientConnections::wakerOf(const proton::connection& c) const {
  const ClientConnection* conn = find(c);
  return conn == nullptr ? nullptr : conn->waker;
}

SessionAdmission ClientConnections::openSession(const proton::session& s) {
  const ClientConnection* conn = find(s.connection());
  if (conn == nullptr) return {SessionAdmission::Verdict::kUnknownConnection, {}};
  if (auto refusal = admission_->admitSession(conn->id)) {
    return {SessionAdmission::Verdict::kRefused, std::move(*refusal)};
  }
  sessions_[s] = conn->id;
  return {};
}

void ClientConnections::sessionClosed(const proton::session& s) {
  auto it = sessions_.find(s);
  if (it == sessions_.end()) return;
  admission_->sessionClosed(it->second);
  sessions_.erase(it);
}

std::optional<uint64_t> ClientConnections::close(const proton::connection& c) {
  auto conn = connections_.find(c);
  if (conn == connections_.end()) return std::nullopt;
  const uint64_t number = conn->second.id;
  conn->second.waker->close();
  connections_.erase(conn);
  admission_->connectionClosed(number);
  std::erase_if(sessions_, [number](const auto& entry) { return entry.second == number; });
  return number;
}

std::vector<proton::connection> ClientConnections::all() const {
  std::vector<proton::connection> out;
  for (const auto& [c, conn] : connections_) out.push_back(c);
  return out;
}

void ClientConnections::clear() {
  connections_.clear();
  sessions_.clear();
}

}  // namespace cepbus::services::amqp
