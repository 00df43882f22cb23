#pragma once

// The configuration of the bus's admin and monitoring listener (REST API,
// Prometheus metrics, WebSocket feed, dashboard): where it listens, the
// admin token's variable, its limits. Read from the descriptor's
// <listeners><http> by services/http/http_listener_element.h.
//
// Thread safety: plain data; share it as const.

#include <cstdint>
#include <optional>
#include <string>

#include "bus/host/descriptor/descriptor.h"

namespace cepbus::services::http {

// <listeners><http>: the admin and monitoring listener (services/http/), as
// services/http/http_listener_element.h reads it.
struct HttpListenerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0 asks the system for a free port
  // Name of the environment variable holding the admin API's bearer token;
  // empty when none was named.
  std::string token_env;
  // Limits; absent: the listener's defaults (services/http/http_listener.h).
  std::optional<uint64_t> max_connections;     // max-connections: open at once, feeds included
  std::optional<uint64_t> max_ws_clients;      // max-ws-clients: WebSocket feeds open at once
  std::optional<uint64_t> request_timeout_ms;  // request-timeout (ms): to read one request
  std::optional<uint64_t> max_names;  // max-names: names POST /api/events holds (the token's)
  descriptor::Location where;
};

}  // namespace cepbus::services::http
