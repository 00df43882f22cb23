#include "services/amqp/listener/admission.h"

namespace cepbus::services::amqp {

std::optional<std::string> AmqpAdmission::admit(size_t& count, size_t max, const char* what,
                                                const char* attribute,
                                                std::atomic<uint64_t>& refused) {
  if (count < max) {
    ++count;
    return std::nullopt;
  }
  bump(refused);
  return std::string("too many ") + what + ": " + attribute + "=" + std::to_string(max);
}

std::optional<std::string> AmqpAdmission::admitConnection(uint64_t connection) {
  size_t open = connections_.size();
  auto refusal = admit(open, limits_.max_connections, "connections to this listener",
                       "max-connections", connections_refused_);
  if (!refusal) connections_.try_emplace(connection);
  return refusal;
}

void AmqpAdmission::connectionClosed(uint64_t connection) { connections_.erase(connection); }

AmqpAdmission::PerConnection* AmqpAdmission::find(uint64_t connection) {
  auto it = connections_.find(connection);
  return it == connections_.end() ? nullptr : &it->second;
}

std::optional<std::string> AmqpAdmission::admitSession(uint64_t connection) {
  PerConnection* c = find(connection);
  if (c == nullptr) return "the connection is not open";
  return admit(c->sessions, limits_.max_sessions, "sessions on this connection", "max-sessions",
               sessions_refused_);
}

void AmqpAdmission::sessionClosed(uint64_t connection) {
  if (PerConnection* c = find(connection)) release(c->sessions);
}

std::optional<std::string> AmqpAdmission::admitLink(uint64_t connection) {
  PerConnection* c = find(connection);
  if (c == nullptr) return "the connection is not open";
  return admit(c->links, limits_.max_links, "links on this connection", "max-links",
               links_refused_);
}

void AmqpAdmission::linkClosed(uint64_t connection) {
  if (PerConnection* c = find(connection)) release(c->links);
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
  return r;
}

}  // namespace cepbus::services::amqp
