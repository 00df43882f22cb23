#pragma once

// ManagementClient: the few synchronous HTTP/1.1 calls cepbus makes to the
// RabbitMQ management API (the rabbitmq_management plugin): declaring and
// inspecting the cluster's topology and closing the connections of a node
// that went silent. Control plane only: a call blocks for at most
// `timeout` per broker tried, so it never runs on an AMQP callback or a
// stage thread.
//
// Failover: every broker of the cluster answers for the whole cluster, so a
// request goes to the brokers in the descriptor's order and the first
// answer wins. A broker that cannot be reached (refused, timed out, cut
// short) or answers 5xx (a node that is starting, stopping or cut off from
// the others) is skipped; a 2xx-4xx answer is the cluster's answer.
//
// Errors name the URL, the HTTP status and the reason the broker gave
// ({"error":..,"reason":..} bodies), e.g.
//   "PUT http://127.0.0.1:15672/api/queues/%2F/s.p0: HTTP 400: inequivalent arg ..."
//
// Thread-safety: const methods may be called from several threads; each
// request opens its own connection (Connection: close). Ownership: holds
// copies of the endpoints and credentials.

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/status.h"
#include "services/cluster/cluster_spec.h"

namespace cepbus::services::cluster {

struct ManagementEndpoint {
  std::string host;
  uint16_t port = 0;
};

struct ManagementOptions {
  std::string user = "guest";
  std::string password = "guest";
  // Bounds one request on one broker: resolve, connect, write and read.
  std::chrono::milliseconds timeout{5000};
  size_t max_body_bytes = 64 * 1024 * 1024;  // /api/queues of a big vhost is large
  // HTTPS, verifying each broker's certificate against the CA and the peer
  // name (the broker's host when empty); absent: plain HTTP.
  std::optional<ClusterTls> tls;
};

enum class HttpMethod { kGet, kPut, kPost, kDelete };

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string url;  // of the broker that answered, for messages
};

// "http://host:port" (or "https://") + target.
std::string urlOf(const ManagementEndpoint& broker, std::string_view target, bool tls = false);
// Percent-encodes one path segment or query value (RFC 3986 unreserved
// characters stay): the default vhost "/" is "%2F".
std::string percentEncode(std::string_view s);
// The "Basic ..." value of an Authorization header.
std::string basicAuthorization(std::string_view user, std::string_view password);
// The reason of a management error body ({"error":"bad_request","reason":"..."}
// gives the reason, else the error); a body that is not such JSON comes back
// trimmed to a line of at most 200 characters.
std::string errorReason(std::string_view body);
// "GET http://...: HTTP 404: Object Not Found", the message of every error
// about an answer.
std::string describeAnswer(HttpMethod method, const HttpResponse& response);
const char* methodName(HttpMethod method);

class ManagementClient {
 public:
  // With options.tls, a CA file that cannot be loaded makes every request
  // fail naming the file and why.
  ManagementClient(std::vector<ManagementEndpoint> brokers, ManagementOptions options);
  // The cluster's failover list (each broker's host and management port) and
  // its user, with `password`.
  static ManagementClient forCluster(const ClusterSpec& spec, std::string password);

  // One request, with failover (see the file comment). The error, when no
  // broker answered, names every URL tried and why it failed.
  Result<HttpResponse> request(HttpMethod method, std::string_view target,
                               std::string_view json_body = {},
                               std::string_view reason_header = {}) const;

  // GET, 200 expected, body parsed. An answer that is not a success maps to
  // NotFound (404), InvalidArgument (400, 405, 409: the request conflicts
  // with what exists), Rejected (401, 403: credentials or permissions) or
  // IoError, each message naming the URL, the status and the reason.
  Result<nlohmann::json> getJson(std::string_view target) const;
  // POST with a JSON body whose answer is JSON (HTTP 200), such as
  // /api/exchanges/VHOST/NAME/publish; errors map as for getJson().
  Result<nlohmann::json> postJson(std::string_view target, const nlohmann::json& body) const;
  // PUT or POST a JSON body; 200, 201 and 204 are success, other answers
  // map as for getJson().
  Status sendJson(HttpMethod method, std::string_view target, const nlohmann::json& body) const;
  // DELETE; 200 and 204 are success, 404 NotFound. `reason` goes in the
  // X-Reason header (RabbitMQ hands it to a closed connection's client).
  Status remove(std::string_view target, std::string_view reason = {}) const;

  const std::vector<ManagementEndpoint>& brokers() const { return brokers_; }

 private:
  Result<HttpResponse> requestOne(const ManagementEndpoint& broker, HttpMethod method,
                                  std::string_view target, std::string_view json_body,
                                  std::string_view reason_header) const;

  class TlsContext;

  const std::vector<ManagementEndpoint> brokers_;
  const ManagementOptions options_;
  const std::string authorization_;
  std::shared_ptr<const TlsContext> tls_;  // null for plain HTTP; shared by copies
};

}  // namespace cepbus::services::cluster
