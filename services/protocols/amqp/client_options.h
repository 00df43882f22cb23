#pragma once

// AmqpPeer: how an AMQP 1.0 client of the bus's own reaches its peer — the
// amqp-bridge service (services/amqp/bridge/) and the `cepbus publish` and
// `cepbus subscribe` commands (bus/app/). One place decides what the
// listener (services/amqp/listener/) will take from them: SASL ANONYMOUS
// without a user, PLAIN with one; TLS for amqps:// URLs, checked against a
// CA and the peer's name; and a password only over TLS or to a loopback
// host, which is also the only way the listener offers PLAIN.
//
// Thread-safety: plain data and free functions over values.

#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/error_condition.hpp>
#include <string>
#include <string_view>

#include "bus/core/status.h"

namespace cepbus::services::amqp {

struct AmqpPeer {
  std::string url;       // "host:port", "amqp://host:port" or "amqps://host:port"
  std::string user;      // empty: SASL ANONYMOUS
  std::string password;  // SASL PLAIN, with `user`
  // amqps: the PEM file of the CA the peer's certificate must chain to;
  // empty: the system's trust store.
  std::string ca;
  // amqps: the name the peer's certificate must carry (Proton checks DNS
  // names only, so an IP address in `url` needs one); empty: the url's host.
  std::string peer_name;

  bool tls() const { return url.starts_with("amqps://"); }
};

// The host part of "host:port", "amqp://user@host:port" or "amqp://[::1]:port".
std::string hostOf(std::string_view url);

// InvalidArgument when the listener would refuse `peer`, or the password
// would cross the network in clear: a user without a password, or a user
// over amqp:// to a host that is not a loopback one.
Status checkPeer(const AmqpPeer& peer);

// The SASL and TLS options that reach `peer` (checkPeer() first).
proton::connection_options connectionOptions(const AmqpPeer& peer);

// Closes `c`, and has the close sent now even when called outside the
// connection's own events (from a container::schedule() task): Proton sends
// what such a task does to a connection only at that connection's next
// event, so a close for an idle link would wait for the peer's heartbeat.
void closeConnection(proton::connection& c);

// "name: description" of what a peer said closing a link or connection, or
// `when_empty` when it said nothing.
std::string describeCondition(const proton::error_condition& e, std::string_view when_empty);

}  // namespace cepbus::services::amqp
