#pragma once

// AccessControl: who may connect to an AMQP listener and what each one may
// do, from the descriptor's <amqp allow-anonymous> and <user>/<permit>.
//
// - Anonymous clients (SASL ANONYMOUS) are let in only with
//   allow-anonymous="true", and then may publish and subscribe anywhere
//   (development mode).
// - A user authenticates with SASL PLAIN against the salted hash of their
//   password. A user may publish to an address when one of their permits'
//   `publish` patterns matches it, and subscribe with a pattern when one of
//   their `subscribe` patterns covers it (every address the subscription
//   could match is matched by the permit: "orders.#" covers "orders.eu.*",
//   not "#").
// - PLAIN sends the password in clear, so it is offered only on TLS
//   connections or when the listener is bound to a loopback address.
//
// Thread safety: immutable after construction; share it as const.

#include <string>
#include <string_view>

#include "services/protocols/amqp/listener_config.h"

namespace cepbus::services::amqp {

// True when every address `pattern` can match is matched by `permit` (both
// valid router patterns). Sound, not complete for contrived patterns: it may
// answer false for a pattern that is in fact covered, never true for one
// that is not.
bool patternCovers(std::string_view permit, std::string_view pattern);

class AccessControl {
 public:
  explicit AccessControl(AmqpListenerConfig config);

  bool allowsAnonymous() const { return config_.allow_anonymous; }
  bool hasUsers() const { return !config_.users.empty(); }
  bool plainWithoutTls() const { return plain_without_tls_; }
  // The SASL mechanisms to offer on a connection, space separated.
  std::string mechanisms(bool encrypted) const;

  // True when `user` is declared and `password` matches its hash. An unknown
  // user costs a hash computation as well, so timing does not tell which
  // names exist.
  bool authenticate(std::string_view user, std::string_view password) const;

  // `user` empty means the anonymous client.
  bool mayPublish(std::string_view user, std::string_view address) const;
  bool maySubscribe(std::string_view user, std::string_view pattern) const;

 private:
  const AmqpListenerConfig config_;
  const bool plain_without_tls_;
  const std::string dummy_hash_;  // verified against for unknown users
};

}  // namespace cepbus::services::amqp
