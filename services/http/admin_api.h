#pragma once

// AdminApi: what the admin HTTP listener answers, apart from the transport
// (services/http/http_listener.h does the HTTP and hands requests here).
//
//   GET  /metrics                   Prometheus text (services/http/prometheus.h)
//   GET  /api/components            {"components":[component...]}, sorted by name
//   GET  /api/components/{name}     one component; the name is percent-decoded
//   GET  /api/routes                {"routes":[{route, flow, default, counters...}]}
//   GET  /api/flows                 {"flows":[{name, counters...}]}
//   POST /api/events/{address}      publishes the body (one JSON-lines event)
//                                   to the address; answers the send outcome
//
// Reads are open. A state-changing request needs `Authorization: Bearer
// <token>`, the token being the value of the environment variable the
// descriptor names in <listeners><http token-env="...">: without a token
// configured such requests are refused with 403 (saying how to configure
// one), with a missing or wrong token with 401. Every error is a JSON body
// {"error":"..."}: 404 for an unknown path, 405 (with Allow) for a method the
// path does not take.
//
// Thread-safety: handle() may be called from any thread, concurrently; the
// api is immutable after construction. Ownership: refers to the broker and
// registry, which must outlive it.

#include <optional>
#include <string>
#include <string_view>

#include "router/broker.h"
#include "router/registry.h"

namespace cepbus::services::http {

struct AdminRequest {
  std::string_view method;         // as sent, e.g. "GET"
  std::string_view target;         // origin form, query included: "/api/components?x=1"
  std::string_view authorization;  // the Authorization header; empty when absent
  std::string_view body;
};

struct AdminResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string allow;              // for 405: the methods the path takes
  bool bearer_challenge = false;  // for 401: send WWW-Authenticate: Bearer
};

// A JSON error body: {"error": message}.
AdminResponse adminError(int status, std::string_view message);

// Decodes %XX escapes; nullopt when an escape is malformed.
std::optional<std::string> percentDecode(std::string_view text);

class AdminApi {
 public:
  // `token` empty: no token configured, state-changing requests are refused.
  // `token_env` is only used to say how to configure one.
  AdminApi(router::Broker& broker, router::Registry& registry, std::string token,
           std::string token_env);

  AdminResponse handle(const AdminRequest& request) const;

 private:
  // Empty when the request may change state; otherwise the refusal.
  std::optional<AdminResponse> authorize(std::string_view authorization) const;
  AdminResponse publish(std::string_view address, std::string_view body) const;

  router::Broker& broker_;
  router::Registry& registry_;
  const std::string token_;
  const std::string token_env_;
};

}  // namespace cepbus::services::http
