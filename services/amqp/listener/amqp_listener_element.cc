#include "services/amqp/listener/amqp_listener_element.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bus/core/wire_names.h"
#include "services/protocols/amqp/listener_config.h"

namespace cepbus::services::amqp {
namespace {

using descriptor::Element;

// Container threads of the AMQP listener: far more than cores buys nothing.
constexpr uint64_t kMaxAmqpThreads = 256;

// The shape of "pbkdf2-sha256:<iterations>:<salt hex>:<hash hex>"; the
// listener does the arithmetic (services/protocols/amqp/password_hash.h).
bool isPasswordHash(std::string_view s) {
  constexpr std::string_view kScheme = "pbkdf2-sha256:";
  if (s.substr(0, kScheme.size()) != kScheme) return false;
  s.remove_prefix(kScheme.size());
  std::vector<std::string_view> parts;
  for (size_t at = 0;;) {
    const size_t colon = s.find(':', at);
    parts.push_back(s.substr(at, colon == std::string_view::npos ? colon : colon - at));
    if (colon == std::string_view::npos) break;
    at = colon + 1;
  }
  if (parts.size() != 3) return false;
  uint64_t iterations = 0;
  auto [end, ec] = std::from_chars(parts[0].data(), parts[0].data() + parts[0].size(), iterations);
  if (ec != std::errc() || end != parts[0].data() + parts[0].size() || iterations < 1000) {
    return false;
  }
  auto isHex = [](std::string_view h, size_t min_bytes) {
    return h.size() >= 2 * min_bytes && h.size() % 2 == 0 &&
           std::all_of(h.begin(), h.end(), [](char c) {
             return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
           });
  };
  return isHex(parts[1], 8) && isHex(parts[2], 32);
}

// What a <permit> lets its user do; nullopt when it is unusable (reported).
std::optional<AmqpPermit> permit(const Element& e) {
  e.allowAttributes({"publish", "subscribe"});
  e.noChildren();
  AmqpPermit p;
  p.where = e.where();
  if (!e.has("publish") && !e.has("subscribe")) {
    e.report("needs a \"publish\" or a \"subscribe\" pattern (or both)");
    return std::nullopt;
  }
  auto publish = e.address("publish", descriptor::AddressUse::kPattern, false);
  auto subscribe = e.address("subscribe", descriptor::AddressUse::kPattern, false);
  if ((e.has("publish") && !publish) || (e.has("subscribe") && !subscribe)) return std::nullopt;
  p.publish = publish.value_or("");
  p.subscribe = subscribe.value_or("");
  return p;
}

// A <user>; nullopt without a usable name or hash (reported).
std::optional<AmqpUser> user(const Element& e) {
  e.allowAttributes({"name", "password-hash"});
  AmqpUser u;
  u.where = e.where();
  auto user_name = e.name("name", true);
  auto hash = e.string("password-hash", true);
  if (hash && !isPasswordHash(*hash)) {
    e.reportAttribute("password-hash",
                      "must be \"pbkdf2-sha256:<iterations>:<salt hex>:<hash hex>\" (a salted "
                      "hash, never the password itself; see `cepbus-amqp-passwd`), got " +
                          descriptor::quote(hash->substr(0, std::min<size_t>(hash->size(), 16))));
    hash.reset();
  }
  e.children({{"permit"}}, [&](const Element& child) {
    if (auto p = permit(child)) u.permits.push_back(std::move(*p));
  });
  if (!user_name || !hash) return std::nullopt;
  u.name = *user_name;
  u.password_hash = *hash;
  return u;
}

}  // namespace

std::any AmqpListenerElement::parse(const Element& e) const {
  using descriptor::kMaxCapacity;
  using descriptor::kMaxTimeoutMs;
  e.allowAttributes({"host",
                     "port",
                     "allow-anonymous",
                     "credit-window",
                     "subscriber-buffer",
                     "durable-buffer",
                     "request-timeout",
                     "subscriber-stall-timeout",
                     "subscriber-return-timeout",
                     "handshake-timeout",
                     "max-connections",
                     "max-sessions",
                     "max-links",
                     "max-durable",
                     "max-pending-requests",
                     "max-message-size",
                     "max-user-sessions",
                     "max-user-links",
                     "max-names",
                     "max-user-names",
                     "max-unsettled",
                     "max-bytes-in-flight",
                     "max-user-unsettled",
                     "max-user-bytes-in-flight",
                     "threads"});
  AmqpListenerConfig l;
  l.where = e.where();
  e.hostAndPort(l.host, l.port);
  l.allow_anonymous = e.boolean("allow-anonymous").value_or(l.allow_anonymous);
  if (auto window = e.integer("credit-window", 1, descriptor::kMaxCreditWindow)) {
    l.credit_window = static_cast<uint32_t>(*window);
  }
  l.subscriber_buffer = e.integer("subscriber-buffer", 1, kMaxCapacity);
  // 0: an away durable subscription keeps nothing (it still exists).
  l.durable_buffer = e.integer("durable-buffer", 0, kMaxCapacity);
  l.request_timeout_ms = e.integer("request-timeout", 1, kMaxTimeoutMs);
  l.subscriber_stall_timeout_ms = e.integer("subscriber-stall-timeout", 1, kMaxTimeoutMs);
  // 0: what a subscriber that went away left unsettled does not wait for it.
  l.subscriber_return_timeout_ms = e.integer("subscriber-return-timeout", 0, kMaxTimeoutMs);
  // 0: no deadline for a client to authenticate.
  l.handshake_timeout_ms = e.integer("handshake-timeout", 0, kMaxTimeoutMs);
  l.max_connections = e.integer("max-connections", 1, kMaxCapacity);
  l.max_sessions = e.integer("max-sessions", 1, kMaxCapacity);
  l.max_links = e.integer("max-links", 1, kMaxCapacity);
  // 0: no durable subscriptions at all.
  l.max_durable = e.integer("max-durable", 0, kMaxCapacity);
  l.max_pending_requests = e.integer("max-pending-requests", 1, kMaxCapacity);
  l.max_message_size = e.integer("max-message-size", 1, kMaxCapacity);
  l.max_user_sessions = e.integer("max-user-sessions", 1, kMaxCapacity);
  l.max_user_links = e.integer("max-user-links", 1, kMaxCapacity);
  // 0: a client may use only the names the bus already knows. At most the
  // process-wide budget's default, whatever --wire-name-budget says.
  l.max_names = e.integer("max-names", 0, kDefaultWireNameBudget);
  l.max_user_names = e.integer("max-user-names", 0, kDefaultWireNameBudget);
  l.max_unsettled = e.integer("max-unsettled", 1, kMaxCapacity);
  l.max_bytes_in_flight = e.integer("max-bytes-in-flight", 1, kMaxCapacity);
  l.max_user_unsettled = e.integer("max-user-unsettled", 1, kMaxCapacity);
  l.max_user_bytes_in_flight = e.integer("max-user-bytes-in-flight", 1, kMaxCapacity);
  if (auto threads = e.integer("threads", 1, kMaxAmqpThreads)) {
    l.threads = static_cast<unsigned>(*threads);
  }
  descriptor::NameScope users;
  e.children({{"tls", true}, {"user"}}, [&](const Element& child) {
    if (child.tag() == "tls") {
      child.allowAttributes({"cert", "key"});
      child.noChildren();
      AmqpTls& tls = l.tls.emplace();
      tls.where = child.where();
      if (auto cert = child.string("cert", true)) tls.cert = child.path(*cert);
      if (auto key = child.string("key", true)) tls.key = child.path(*key);
      return;
    }
    if (auto u = user(child)) {
      child.unique(users, "user", u->name);
      l.users.push_back(std::move(*u));
    }
  });
  return l;
}

}  // namespace cepbus::services::amqp
