#include "services/amqp/listener/admission.h"

#include <algorithm>
#include <utility>

namespace cepbus::services::amqp {

std::optional<std::string> AmqpAdmission::admit(size_t& count, size_t max, const std::string& what,
                                                const char* attribute,
                                                std::atomic<uint64_t>& refused) {
  if (count < max) {
    ++count;
    return std::nullopt;
  }
  bump(refused);
  return std::string("too many ") + what + ": " + attribute + "=" + std::to_string(max);
}

std::optional<std::string> AmqpAdmission::admitConnection(uint64_t connection,
                                                          const std::string& user) {
  size_t open = connections_.size();
  auto refusal = admit(open, limits_.max_connections, "connections to this listener",
                       "max-connections", connections_refused_);
  if (refusal) return refusal;
  PerConnection& c = connections_[connection];
  std::shared_ptr<WireNameQuota> user_names;
  if (!user.empty()) {
    PerUser& u = users_[user];
    if (!u.names) {
      u.names = std::make_shared<WireNameQuota>(limits_.max_user_names, "max-user-names",
                                                user_names_refused_);
      u.unsettled = std::make_shared<UserUnsettledBudget>(limits_.max_user_unsettled,
                                                          limits_.max_user_bytes_in_flight);
    }
    c.user = &u;
    user_names = u.names;
  }
  c.names = std::make_shared<WireNameQuota>(limits_.max_names, "max-names", names_refused_,
                                            std::move(user_names));
  return std::nullopt;
}

void AmqpAdmission::connectionClosed(uint64_t connection) {
  auto it = connections_.find(connection);
  if (it == connections_.end()) return;
  if (PerUser* u = it->second.user) {
    u->sessions -= std::min(u->sessions, it->second.sessions);
    u->links -= std::min(u->links, it->second.links);
  }
  connections_.erase(it);
}

std::shared_ptr<WireNameQuota> AmqpAdmission::names(uint64_t connection) {
  PerConnection* c = find(connection);
  return c == nullptr ? nullptr : c->names;
}

std::shared_ptr<UserUnsettledBudget> AmqpAdmission::userUnsettled(uint64_t connection) {
  PerConnection* c = find(connection);
  return c == nullptr || c->user == nullptr ? nullptr : c->user->unsettled;
}

AmqpAdmission::PerConnection* AmqpAdmission::find(uint64_t connection) {
  auto it = connections_.find(connection);
  return it == connections_.end() ? nullptr : &it->second;
}

std::optional<std::string> AmqpAdmission::admitShared(
    uint64_t connection, size_t PerConnection::*count, size_t max, const char* what,
    const char* attribute, std::atomic<uint64_t>& refused, size_t PerUser::*user_count,
    size_t user_max, const char* user_attribute, std::atomic<uint64_t>& user_refused) {
  PerConnection* c = find(connection);
  if (c == nullptr) return "the connection is not open";
  if (auto refusal =
          admit(c->*count, max, std::string(what) + " on this connection", attribute, refused)) {
    return refusal;
  }
  if (c->user == nullptr) return std::nullopt;
  auto refusal = admit(c->user->*user_count, user_max,
                       std::string(what) + " for this user (over its connections)", user_attribute,
                       user_refused);
  if (refusal) release(c->*count);
  return refusal;
}

void AmqpAdmission::releaseShared(uint64_t connection, size_t PerConnection::*count,
                                  size_t PerUser::*user_count) {
  PerConnection* c = find(connection);
  if (c == nullptr) return;
  release(c->*count);
  if (c->user != nullptr) release(c->user->*user_count);
}

std::optional<std::string> AmqpAdmission::admitSession(uint64_t connection) {
  return admitShared(connection, &PerConnection::sessions, limits_.max_sessions, "sessions",
                     "max-sessions", sessions_refused_, &PerUser::sessions,
                     limits_.max_user_sessions, "max-user-sessions", user_sessions_refused_);
}

void AmqpAdmission::sessionClosed(uint64_t connection) {
  releaseShared(connection, &PerConnection::sessions, &PerUser::sessions);
}

std::optional<std::string> AmqpAdmission::admitLink(uint64_t connection) {
  return admitShared(connection, &PerConnection::links, limits_.max_links, "links", "max-links",
                     links_refused_, &PerUser::links, limits_.max_user_links, "max-user-links",
                     user_links_refused_);
}

void AmqpAdmission::linkClosed(uint64_t connection) {
  releaseShared(connection, &PerConnection::links, &PerUser::links);
}

std::optional<std::string> AmqpAdmission::admitRequest(uint64_t connection) {
  PerConnection* c = find(connection);
  if (c == nullptr) return "the connection is not open";
  return admit(c->requests, limits_.max_pending_requests,
               "requests waiting for their answer on this connection", "max-pending-requests",
               requests_refused_);
}

void AmqpAdmission::requestEnded(uint64_t connection) {
  if (PerConnection* c = find(connection)) release(c->requests);
}

std::optional<std::string> AmqpAdmission::admitDurable(const std::string& owner) {
  size_t& count = durable_[owner];
  auto refusal = admit(count, limits_.max_durable, "durable subscriptions for this user",
                       "max-durable", durable_refused_);
  if (count == 0) durable_.erase(owner);
  return refusal;
}

void AmqpAdmission::durableEnded(const std::string& owner) {
  auto it = durable_.find(owner);
  if (it == durable_.end()) return;
  release(it->second);
  if (it->second == 0) durable_.erase(it);
}

std::optional<std::string> AmqpAdmission::admitMessage(uint64_t bytes) {
  if (bytes <= limits_.max_message_size) return std::nullopt;
  bump(messages_too_large_);
  return "message of " + std::to_string(bytes) +
         " bytes exceeds max-message-size=" + std::to_string(limits_.max_message_size);
}

AmqpRefusals AmqpAdmission::refusals() const {
  auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  AmqpRefusals r;
  r.connections = get(connections_refused_);
  r.sessions = get(sessions_refused_);
  r.links = get(links_refused_);
  r.durable = get(durable_refused_);
  r.requests = get(requests_refused_);
  r.messages_too_large = get(messages_too_large_);
  r.user_sessions = get(user_sessions_refused_);
  r.user_links = get(user_links_refused_);
  r.names = get(*names_refused_);
  r.user_names = get(*user_names_refused_);
  return r;
}

}  // namespace cepbus::services::amqp
