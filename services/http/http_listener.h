#pragma once

// HttpListenerService: the admin and monitoring side of the bus over HTTP/1.1
// (Boost.Beast): an Asio io_context on its own thread listens on the
// descriptor's <listeners><http host port token-env>.
//
// - Plain requests are answered by AdminApi (services/http/admin_api.h):
//   /metrics in the Prometheus text format, the REST reads under /api/, and
//   the one state-changing call (POST /api/events/{address}) behind a bearer
//   token. A request that cannot be parsed is answered 400 (413 for a body
//   over max_body_bytes, 431 for a header over max_header_bytes) with a JSON
//   error body, and the connection is closed.
// - GET /ws?address=PATTERN upgrades to a WebSocket live feed: a broker
//   endpoint "<name>:ws/<n>" subscribes to the pattern and each event it gets
//   goes out as one text frame holding its JSON line (bus/core/event_json.h),
//   in the order the endpoint received them. At most `ws_buffer` events wait
//   per connection: one more and the delivery is refused (Unavailable, which
//   the flow counts) and the connection is closed with a "too slow" reason,
//   so a slow client never blocks a flow. Closing the connection removes the
//   endpoint and so its subscription.
// - Limits: beyond `max_connections` open connections (feeds included) a new
//   one is answered 503 and closed at once; beyond `max_ws_clients` open
//   feeds an upgrade is answered 503; a request (header and body) not read
//   within `request_timeout` of the read starting — a slow body, or an idle
//   keep-alive connection — is answered 408 and the connection closed. Each
//   is counted in stats().
// - Registry: the listener's entry `name` (kind service, metadata "type" =
//   "http-listener" and "address"); its counters are in the stats scope
//   "http" {name} (kHttpSchema), the cepbus_http_* families of /metrics.
//
// Threading: sockets are used on the io thread only. A feed's endpoint
// consumer (any flow thread) queues under the feed's mutex and posts to the
// io thread. Thread-safety: the Service life cycle calls are made by one
// thread; port() and stats() may be called from any thread. Ownership: owns the
// io_context, its thread, the connections and the feed endpoints.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bus/base/stats/store.h"
#include "bus/core/wire_names.h"
#include "services/http/http_listener_config.h"
#include "services/service.h"

namespace cepbus::services::http {

struct HttpListenerOptions {
  std::string name = "http";              // the service name, owner of the feed endpoints
  size_t max_header_bytes = 8 * 1024;     // request line and headers
  size_t max_body_bytes = 64 * 1024;      // request body
  size_t ws_buffer = 1000;                // events waiting per WebSocket feed
  std::chrono::seconds idle_timeout{30};  // a connection with no traffic is closed after this
  size_t max_connections = 256;           // open at once, WebSocket feeds included
  size_t max_ws_clients = 64;             // WebSocket feeds open at once
  std::chrono::milliseconds request_timeout{10000};  // to read one request, header and body
  // Names the admin token's events and addresses may hold (wire_names.h),
  // as an AMQP connection's max-names.
  uint32_t max_names = kDefaultWireNameBudget / 10;
};

struct HttpListenerStats {
  uint64_t connections = 0;          // accepted since start (refused ones included)
  uint64_t open_connections = 0;     // open now, WebSocket feeds included
  uint64_t ws_clients = 0;           // WebSocket feeds open now
  uint64_t connections_refused = 0;  // beyond max_connections (503)
  uint64_t ws_refused = 0;           // upgrades beyond max_ws_clients (503)
  uint64_t request_timeouts = 0;     // requests not read within request_timeout (408)
};

namespace http_stats {
using stats::MetricSpec;
inline constexpr MetricSpec kConnections =
    MetricSpec::counter("connections", "HTTP connections accepted, refused ones included.");
inline constexpr MetricSpec kConnectionsRefused = MetricSpec::counter(
    "connections_refused", "HTTP connections answered 503 beyond max-connections.");
inline constexpr MetricSpec kWsRefused =
    MetricSpec::counter("ws_refused", "WebSocket upgrades answered 503 beyond max-ws-clients.");
inline constexpr MetricSpec kRequestTimeouts =
    MetricSpec::counter("request_timeouts", "HTTP requests not read within request-timeout (408).");
inline constexpr MetricSpec kOpenConnections =
    MetricSpec::gauge("open_connections", "HTTP connections open now, WebSocket feeds included.");
inline constexpr MetricSpec kWsClients =
    MetricSpec::gauge("ws_clients", "WebSocket feeds open now.");
inline constexpr MetricSpec kAll[] = {kConnections,     kConnectionsRefused, kWsRefused,
                                      kRequestTimeouts, kOpenConnections,    kWsClients};
}  // namespace http_stats
inline constexpr stats::Schema kHttpSchema{"http", http_stats::kAll};

class HttpListenerService final : public Service {
 public:
  HttpListenerService(HttpListenerConfig listener, HttpListenerOptions options,
                      ServiceContext& context);
  ~HttpListenerService() override;  // stops

  const std::string& name() const override;
  // Reads the token from the environment and listens; an error names the
  // descriptor location and the address.
  Status start() override;
  // Closes every connection and removes the feed endpoints. Idempotent.
  void stop() override;

  // The bound port (the ephemeral one when the descriptor asked for 0); 0
  // before start().
  int port() const;
  HttpListenerStats stats() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// What the Bus calls for <listeners><http>.
std::unique_ptr<Service> makeHttpListener(const HttpListenerConfig& listener,
                                          ServiceContext& context);

}  // namespace cepbus::services::http
