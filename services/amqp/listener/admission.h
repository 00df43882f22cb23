#pragma once

// AmqpAdmission: what one AMQP client may make the listener hold, and the
// count of what it was refused. The listener asks it before it opens a
// connection, a session, a link, a durable subscription or an in-out
// request, and tells it when each ends; it also holds every message a
// client publishes against max-message-size. A refusal is the description
// the listener sends with amqp:resource-limit-exceeded (a message too large:
// amqp:link:message-size-exceeded), naming the limit (its descriptor
// attribute) and its value, so a client's operator can tell which knob it
// ran into.
//
// Connections are counted by the listener's connection number, durable
// subscriptions by their owner: the user, or the client's container id for
// an anonymous client. An authenticated user's connections together are
// also held to the per-user limits (max-user-sessions, max-user-links,
// max-user-names); the anonymous client counts as one user per connection,
// so it meets the per-connection limits only: anonymous clients cannot be
// told apart (a peer address may be shared by many behind one NAT), and
// max-connections bounds how many of them there are.
//
// New names a client creates (event types, attribute names, addresses:
// bus/core/wire_names.h) are charged to its connection's WireNameQuota
// (max-names), whose parent is its user's (max-user-names). A user's quota
// lives as long as the listener, as the names it paid for do: they are not
// given back yet.
//
// Thread-safety: not thread-safe; the listener guards it with its control
// lock (amqp_listener.cc). admitMessage() (the limits are fixed) and
// refusals() may be called from any thread without it.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "bus/core/wire_names.h"
#include "services/amqp/listener/unsettled_budget.h"

namespace cepbus::services::amqp {

// The defaults are far above what a well-behaved client needs and low
// enough that a client reaching all of them at once holds a few tens of MB.
struct AmqpLimits {
  size_t max_connections = 1000;        // max-connections: open, all clients together
  size_t max_sessions = 64;             // max-sessions: per connection
  size_t max_links = 1000;              // max-links: per connection
  size_t max_durable = 100;             // max-durable: per user (or container id)
  size_t max_pending_requests = 1000;   // max-pending-requests: per connection
  uint64_t max_message_size = 1048576;  // max-message-size: bytes of one encoded message
  size_t max_user_sessions = 256;       // max-user-sessions: per authenticated user
  size_t max_user_links = 4000;         // max-user-links: per authenticated user
  // New names (bus/core/wire_names.h): a tenth of the process-wide budget
  // per connection, a quarter per user.
  uint32_t max_names = kDefaultWireNameBudget / 10;      // max-names: per connection
  uint32_t max_user_names = kDefaultWireNameBudget / 4;  // max-user-names: per user
  // What a connection's unsettled publishes may make the listener hold
  // (services/amqp/listener/unsettled_budget.h).
  uint64_t max_unsettled = 10000;           // max-unsettled: deliveries, per connection
  uint64_t max_bytes_in_flight = 64 << 20;  // max-bytes-in-flight: per connection
  // The same over all the connections of one authenticated user: four
  // connections' worth, as for sessions and links.
  uint64_t max_user_unsettled = 40000;                      // max-user-unsettled
  uint64_t max_user_bytes_in_flight = uint64_t{256} << 20;  // max-user-bytes-in-flight
};

// Refusals so far, by limit.
struct AmqpRefusals {
  uint64_t connections = 0;
  uint64_t sessions = 0;
  uint64_t links = 0;
  uint64_t durable = 0;
  uint64_t requests = 0;
  uint64_t messages_too_large = 0;
  uint64_t user_sessions = 0;
  uint64_t user_links = 0;
  uint64_t names = 0;  // new names beyond max-names
  uint64_t user_names = 0;
};

class AmqpAdmission {
 public:
  explicit AmqpAdmission(AmqpLimits limits) : limits_(limits) {}

  const AmqpLimits& limits() const { return limits_; }

  // Each admit*() returns nullopt and counts the new thing in, or returns the
  // refusal's description and counts the refusal.
  // `user`: the authenticated user, empty for the anonymous client.
  std::optional<std::string> admitConnection(uint64_t connection, const std::string& user = {});
  // Forgets the connection and what it held (sessions, links, requests).
  void connectionClosed(uint64_t connection);
  // The quota new names from the connection are charged to; null when it is
  // not open. Shared: a decoder may hold it past the connection's close.
  std::shared_ptr<WireNameQuota> names(uint64_t connection);
  // What the connection's user's connections may hold unsettled together
  // (unsettled_budget.h); null for the anonymous client or a connection
  // that is not open. Shared with the connections' handlers.
  std::shared_ptr<UserUnsettledBudget> userUnsettled(uint64_t connection);

  std::optional<std::string> admitSession(uint64_t connection);
  void sessionClosed(uint64_t connection);

  std::optional<std::string> admitLink(uint64_t connection);
  void linkClosed(uint64_t connection);

  std::optional<std::string> admitRequest(uint64_t connection);
  void requestEnded(uint64_t connection);

  std::optional<std::string> admitDurable(const std::string& owner);
  void durableEnded(const std::string& owner);

  // A message of `bytes` (encoded) beyond max-message-size: the refusal
  // goes with amqp:link:message-size-exceeded, not amqp:resource-limit-exceeded.
  std::optional<std::string> admitMessage(uint64_t bytes);

  AmqpRefusals refusals() const;

 private:
  struct PerUser {
    size_t sessions = 0;
    size_t links = 0;
    std::shared_ptr<WireNameQuota> names;
    std::shared_ptr<UserUnsettledBudget> unsettled;
  };
  struct PerConnection {
    size_t sessions = 0;
    size_t links = 0;
    size_t requests = 0;
    PerUser* user = nullptr;  // null for the anonymous client
    std::shared_ptr<WireNameQuota> names;
  };

  // Admits one more of `count` (a field of a connection's record, or a
  // durable count) unless it is at `max`.
  static std::optional<std::string> admit(size_t& count, size_t max, const std::string& what,
                                          const char* attribute, std::atomic<uint64_t>& refused);
  static void release(size_t& count) {
    if (count > 0) --count;
  }
  static void bump(std::atomic<uint64_t>& counter) {
    counter.fetch_add(1, std::memory_order_relaxed);
  }
  PerConnection* find(uint64_t connection);
  // Admits one more session or link (`count` a field of PerConnection and
  // PerUser) on the connection, then for its user.
  std::optional<std::string> admitShared(uint64_t connection, size_t PerConnection::*count,
                                         size_t max, const char* what, const char* attribute,
                                         std::atomic<uint64_t>& refused,
                                         size_t PerUser::*user_count, size_t user_max,
                                         const char* user_attribute,
                                         std::atomic<uint64_t>& user_refused);
  void releaseShared(uint64_t connection, size_t PerConnection::*count,
                     size_t PerUser::*user_count);

  const AmqpLimits limits_;
  std::map<uint64_t, PerConnection> connections_;
  std::map<std::string, size_t> durable_;  // by owner
  std::map<std::string, PerUser> users_;   // every user seen, for its names quota
  std::atomic<uint64_t> connections_refused_{0};
  std::atomic<uint64_t> sessions_refused_{0};
  std::atomic<uint64_t> links_refused_{0};
  std::atomic<uint64_t> durable_refused_{0};
  std::atomic<uint64_t> requests_refused_{0};
  std::atomic<uint64_t> messages_too_large_{0};
  std::atomic<uint64_t> user_sessions_refused_{0};
  std::atomic<uint64_t> user_links_refused_{0};
  // Shared with the quotas, which count their refusals there.
  const std::shared_ptr<std::atomic<uint64_t>> names_refused_ =
      std::make_shared<std::atomic<uint64_t>>(0);
  const std::shared_ptr<std::atomic<uint64_t>> user_names_refused_ =
      std::make_shared<std::atomic<uint64_t>>(0);
};

}  // namespace cepbus::services::amqp
