#pragma once

// The configuration of an AMQP 1.0 listener of the bus: where it listens,
// TLS, the users who may authenticate with SASL PLAIN and what each may do,
// flow control and per-client limits. Read from the descriptor's
// <listeners><amqp> by services/amqp/listener/amqp_listener_element.h; the
// SASL plugin and access control (this folder) check clients against it.
//
// Thread safety: plain data; share it as const.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <proton/ssl.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/status.h"
#include "bus/host/descriptor/descriptor.h"

namespace cepbus::services::amqp {

// TLS for an AMQP listener: the server's certificate chain and private key
// (PEM files, resolved against the descriptor's folder; the key not
// encrypted). With TLS configured
// the listener accepts TLS connections only.
struct AmqpTls {
  std::filesystem::path cert;
  std::filesystem::path key;
  descriptor::Location where;
};

// The server side of `tls` as Proton loads it: when the listener starts, and
// when the bus is built, so that `cepbus validate` names a certificate or key
// the listener could not load. InvalidArgument "FILE:LINE: <tls>: ..." naming
// the file that cannot be read, or the pair Proton refused, and why.
Result<proton::ssl_server_options> loadServerTls(const AmqpTls& tls);

// What one <permit> lets a user do: publish to addresses matching `publish`,
// subscribe with patterns that `subscribe` covers. Either may be empty.
struct AmqpPermit {
  std::string publish;    // a pattern ('*', '#'); empty: grants no publishing
  std::string subscribe;  // a pattern; empty: grants no subscribing
  descriptor::Location where;
};

// A user that may authenticate with SASL PLAIN. The password is stored only
// as a salted hash: "pbkdf2-sha256:<iterations>:<salt hex>:<hash hex>"
// (services/protocols/amqp/password_hash.h; the parser checks the shape only).
struct AmqpUser {
  std::string name;
  std::string password_hash;
  std::vector<AmqpPermit> permits;  // nothing is allowed unless a permit allows it
  descriptor::Location where;
};

// <listeners><amqp>: the AMQP 1.0 listener (services/amqp/listener/), as
// services/amqp/listener/amqp_listener_element.h reads it.
struct AmqpListenerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 5672;  // 0 asks the system for a free port
  // SASL ANONYMOUS accepted; anonymous clients may publish and subscribe
  // anywhere (development mode).
  bool allow_anonymous = false;
  std::optional<AmqpTls> tls;
  std::vector<AmqpUser> users;  // names unique
  // Flow control and buffering; absent: the listener's defaults
  // (services/amqp/listener/amqp_listener.h, AmqpListenerOptions).
  std::optional<uint32_t> credit_window;                 // credit-window: per publishing link
  std::optional<uint64_t> subscriber_buffer;             // subscriber-buffer: events per subscriber
  std::optional<uint64_t> durable_buffer;                // durable-buffer: kept while away
  std::optional<uint64_t> request_timeout_ms;            // request-timeout (ms)
  std::optional<uint64_t> subscriber_stall_timeout_ms;   // subscriber-stall-timeout (ms)
  std::optional<uint64_t> subscriber_return_timeout_ms;  // subscriber-return-timeout (ms; 0: none)
  std::optional<uint64_t> handshake_timeout_ms;          // handshake-timeout (ms; 0: none)
  // What one client may make it hold (services/amqp/listener/admission.h, AmqpLimits).
  std::optional<uint64_t> max_connections;           // max-connections: all clients together
  std::optional<uint64_t> max_sessions;              // max-sessions: per connection
  std::optional<uint64_t> max_links;                 // max-links: per connection
  std::optional<uint64_t> max_durable;               // max-durable: per user (or container id)
  std::optional<uint64_t> max_pending_requests;      // max-pending-requests: per connection
  std::optional<uint64_t> max_message_size;          // max-message-size: bytes, encoded
  std::optional<uint64_t> max_user_sessions;         // max-user-sessions: per authenticated user
  std::optional<uint64_t> max_user_links;            // max-user-links: per authenticated user
  std::optional<uint64_t> max_names;                 // max-names: new names per connection
  std::optional<uint64_t> max_user_names;            // max-user-names: new names per user
  std::optional<uint64_t> max_unsettled;             // max-unsettled: per connection
  std::optional<uint64_t> max_bytes_in_flight;       // max-bytes-in-flight: per connection
  std::optional<uint64_t> max_user_unsettled;        // max-user-unsettled: per user
  std::optional<uint64_t> max_user_bytes_in_flight;  // max-user-bytes-in-flight: per user
  // threads: the container threads serving the connections; absent: one per
  // core.
  std::optional<unsigned> threads;
  descriptor::Location where;

  const AmqpUser* user(std::string_view name) const;  // nullptr when absent
};

}  // namespace cepbus::services::amqp
