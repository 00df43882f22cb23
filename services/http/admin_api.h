#pragma once

// AdminApi: what the admin HTTP listener answers, apart from the transport
// (services/http/http_listener.h does the HTTP and hands requests here).
//
//   GET  /health                    liveness: 200 {"status":"ok"} while the
//                                   process answers
//   GET  /ready                     readiness: 200 {"status":"ready"} when every
//                                   service is started and no route is paused;
//                                   else 503 {"status":"not ready","not_ready":
//                                   [{service|route, state, reason}...]}
//   GET  /metrics                   Prometheus text (services/http/prometheus.h)
//   GET  /api/ (and /api)           the index: {"resources":[{path, methods,
//                                   description}...], "auth"}
//   GET  /api/components            {"components":[component...]}, sorted by name
//   GET  /api/components/{name}     one component; the name is percent-decoded
//   GET  /api/routes                {"routes":[{route, flow, default, counters...}]}
//   GET  /api/flows                 {"flows":[{name, counters..., journal}]};
//                                   "journal" only for a reliable flow: its
//                                   journal's counters and gauges
//   POST /api/events/{address}      publishes the body (one JSON-lines event)
//                                   to the address; answers the send outcome
//   GET  /api/services/{name}       one service, as in /api/services
//   GET  /api/queries/{service}/{query}   one query, as in /api/queries
//   GET  /api/queries/{query}       the query of that name in whichever
//                                   service runs it (409 when several do)
//   GET  /api/services | /api/endpoints | /api/stages | /api/queries |
//        /api/plugins | /api/assemblies           the lists (docs/operations.md);
//        /api/plugins: the descriptor's <plugins> (their registry entries)
//        and those loaded on demand since (a query's engine), on_demand true
//   POST   /api/assemblies                  deploys the body (a descriptor
//                                           fragment: one <service-assembly>)
//   PUT    /api/assemblies/{name}           redeploys it from the body (one
//                                           <service-assembly> of that name)
//                                           without stopping its units: its
//                                           queries kept, replaced, added or
//                                           removed (services/redeploy_plan.h);
//                                           201 when it deployed it anew
//   DELETE /api/assemblies/{name}           undeploys it
//   POST   /api/queries/{service}           adds the body (one <query>) to a
//                                           running CEP service unit
//   PUT    /api/queries/{service}/{query}   replaces it by the body (one
//                                           <query> of that name), an edit
//                                           taking over its state when it
//                                           can; answers what was carried
//                                           over: {"carried_over", "why_not",
//                                           "from", "at"}
//   DELETE /api/queries/{service}/{query}   removes it
//   GET    /api/queries/{service}/{query}/model?format=json|dot   the
//          detector's model (the Petri net of an engine "petri" query)
//   POST   /api/routes/{pattern}/pause | /resume   ("(default)" = default route)
//   GET  / (and /dashboard.js, /dashboard.css)    the dashboard page
//
// Reads are open, the probes and /metrics included: a Kubernetes probe or a
// Prometheus scrape carries no secret, and a read changes nothing. A
// state-changing request needs `Authorization: Bearer <token>`, the token
// being the value of the environment variable the descriptor names in
// <listeners><http token-env="...">: without a token configured such
// requests are refused with 403 (saying how to configure one), with a
// missing or wrong token with 401. Every error is a JSON body
// {"error":"..."}: 404 for an unknown path, 405 (with Allow) for a method the
// path does not take.
//
// Every request that needs the token (every state change: deploy,
// undeploy, add, edit or remove a query, pause or resume a route, publish) is
// logged once, at notice level, to the logger kAuditLogger: method and
// target, who — the token's name, which is the token-env variable's, or
// "anonymous" for a request without the token — and the status, with the
// error's text when refused or failed:
//   POST /api/routes/slow.%23/pause by CEPBUS_TOKEN: 200
//   DELETE /api/assemblies/x by anonymous: 401 (this request needs ...)
//
// Status codes of the state changes: 200/201 done; 400 a bad body (the
// message names the fragment's line); 401/403 token; 404 unknown assembly,
// service, query or route; 409 already exists, or a change that does not
// fit what runs (a query that cannot be replaced in place: the message says why); 503 the bus is
// starting or stopping, or no deployer (services outside a bus).
//
// Thread-safety: handle() may be called from any thread, concurrently; the
// api is immutable after construction. Ownership: refers to the broker,
// registry and deployer, which must outlive it.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "bus/core/wire_names.h"
#include "bus/host/loader/plugin_loader.h"
#include "router/broker.h"
#include "router/registry.h"
#include "services/deployer.h"
#include "services/query_host.h"

namespace Poco {
class Logger;
}

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

// The Poco logger the state changes are logged to.
inline constexpr std::string_view kAuditLogger = "cepbus.http.audit";

class AdminApi {
 public:
  // `token` empty: no token configured, state-changing requests are refused.
  // `token_env` is only used to say how to configure one.
  // `deployer` may be null (no bus): the deployment calls then answer 503.
  // `plugins` may be null: /api/plugins then lists only the descriptor's.
  // `max_names`: the names the token's published events and addresses may
  // hold (wire_names.h), its share of the process-wide budget.
  AdminApi(router::Broker& broker, router::Registry& registry, std::string token,
           std::string token_env, Deployer* deployer = nullptr,
           const plugin::PluginLoader* plugins = nullptr,
           uint32_t max_names = kDefaultWireNameBudget / 10);

  AdminResponse handle(const AdminRequest& request) const;

 private:
  // Authorizes, runs `action` (AdminResponse()) and logs the change.
  template <typename Action>
  AdminResponse change(const AdminRequest& request, Action&& action) const;
  // Empty when the request may change state; otherwise the refusal.
  std::optional<AdminResponse> authorize(std::string_view authorization) const;
  AdminResponse publish(std::string_view address, std::string_view body) const;
  AdminResponse handleApi(const AdminRequest& request, std::string_view path) const;
  AdminResponse queryOf(std::string_view service, std::string_view query) const;
  // The query of that name, whichever service runs it (409 when several do).
  AdminResponse queryNamed(std::string_view query) const;
  AdminResponse deploy(std::string_view body) const;
  AdminResponse undeploy(std::string_view name) const;
  AdminResponse redeploy(std::string_view name, std::string_view body) const;
  // What a query's POST or PUT names: the CEP unit (held while the change
  // runs) and the one <query> of the body.
  struct QueryChange {
    std::shared_ptr<Service> host;
    QueryHost* cep = nullptr;
    descriptor::QuerySpec spec;
  };
  // The refusal when there is no such unit (404) or the body is no one
  // <query> (400, naming its line).
  std::variant<QueryChange, AdminResponse> queryChange(std::string_view service,
                                                       std::string_view body) const;
  AdminResponse addQuery(std::string_view service, std::string_view body) const;
  AdminResponse replaceQuery(std::string_view service, std::string_view query,
                             std::string_view body) const;
  AdminResponse removeQuery(std::string_view service, std::string_view query) const;
  AdminResponse queryModel(std::string_view service, std::string_view query,
                           std::string_view format) const;
  AdminResponse pauseRoute(std::string_view route, std::string_view action) const;

  router::Broker& broker_;
  router::Registry& registry_;
  const std::string token_;
  const std::string token_env_;
  Deployer* const deployer_;
  const plugin::PluginLoader* const plugins_;
  // The token's quota of names held (max-names): one token, one client.
  const std::shared_ptr<WireNameQuota> names_;
  Poco::Logger& audit_;
};

}  // namespace cepbus::services::http
