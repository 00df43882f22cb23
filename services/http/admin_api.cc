#include "services/http/admin_api.h"

#include <Poco/Logger.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "bus/core/event_json.h"
#include "bus/core/wire_names.h"
#include "bus/host/descriptor/parser.h"
#include "flows/exchange.h"
#include "router/topic.h"
#include "services/http/dashboard/dashboard.h"
#include "services/http/prometheus.h"
#include "services/http/registry_json.h"
#include "services/query_host.h"
#include "services/service.h"

namespace cepbus::services::http {
namespace {

using nlohmann::json;

// The queries `service` runs; nullptr for none, or for a service that runs none.
QueryHost* queryHostOf(Service* service) {
  return service != nullptr ? service->queryHost() : nullptr;
}

constexpr std::string_view kEventsPrefix = "/api/events/";
constexpr std::string_view kApiPrefix = "/api/";

// One row of the /api/ index.
struct ApiResource {
  std::string_view path;
  std::string_view methods;  // comma-separated
  std::string_view description;
};

// What the listener serves, for GET /api/ (docs/operations.md has the bodies).
constexpr ApiResource kApiIndex[] = {
    {"/health", "GET", "liveness: 200 while the process answers"},
    {"/ready", "GET", "readiness: 200 when every service is started and no route paused, else 503"},
    {"/metrics", "GET", "every counter and gauge in the Prometheus text format"},
    {"/ws?address={pattern}", "GET", "WebSocket feed of the events published to the pattern"},
    {"/api/", "GET", "this index"},
    {"/api/components", "GET", "every registry component with its state and numbers"},
    {"/api/components/{name}", "GET", "one component (percent-encode the name)"},
    {"/api/endpoints", "GET", "the components that are endpoints"},
    {"/api/services", "GET", "the running services with their assembly, type and state"},
    {"/api/services/{name}", "GET", "one service"},
    {"/api/assemblies", "GET, POST", "the deployed assemblies; POST deploys a <service-assembly>"},
    {"/api/assemblies/{name}", "PUT, DELETE",
     "PUT redeploys an assembly, changing only its queries; DELETE undeploys it"},
    {"/api/queries", "GET", "every query with its engine and numbers"},
    {"/api/queries/{service}", "POST", "adds a <query> to a running CEP service"},
    {"/api/queries/{query}", "GET", "one query, whichever service runs it"},
    {"/api/queries/{service}/{query}", "GET, PUT, DELETE",
     "one query; PUT replaces it by an edit (a <query> of that name), DELETE removes it"},
    {"/api/queries/{service}/{query}/model?format=json|dot", "GET",
     "the query's detector model (petri)"},
    {"/api/routes", "GET", "the delivery-policy routes with their numbers"},
    {"/api/routes/{pattern}/pause", "POST", "pauses a route: it refuses new events"},
    {"/api/routes/{pattern}/resume", "POST", "resumes a paused route"},
    {"/api/flows", "GET", "the flows with their numbers and journals"},
    {"/api/stages", "GET", "the SEDA stages with their queues and latencies"},
    {"/api/plugins", "GET", "the detector plugins loaded"},
    {"/api/cluster", "GET", "the cluster nodes this bus runs"},
    {"/api/events/{address}", "POST", "publishes one JSON-lines event to the address"},
};

json apiIndex() {
  json resources = json::array();
  for (const ApiResource& r : kApiIndex) {
    json methods = json::array();
    for (std::string_view rest = r.methods; !rest.empty();) {
      const size_t comma = rest.find(", ");
      methods.push_back(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 2);
    }
    resources.push_back(
        json{{"path", r.path}, {"methods", std::move(methods)}, {"description", r.description}});
  }
  return json{{"resources", std::move(resources)},
              {"auth", "reads are open; other methods need Authorization: Bearer <token>"}};
}

// Names and event text come from clients: invalid UTF-8 is replaced rather
// than thrown on.
std::string dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

AdminResponse jsonResponse(int status, const json& value) {
  AdminResponse response;
  response.status = status;
  response.body = dump(value);
  return response;
}

// An HTTP status for a control-plane Status.
int httpStatus(const Status& status) {
  switch (status.code()) {
    case Status::Code::kOk:
      return 200;
    case Status::Code::kInvalidArgument:
      return 400;
    case Status::Code::kNotFound:
      return 404;
    case Status::Code::kAlreadyExists:
    case Status::Code::kRejected:  // the change does not fit what runs (the message says why)
      return 409;
    case Status::Code::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

// The path's segments after a prefix, each percent-decoded; nullopt when an
// escape is malformed.
std::optional<std::vector<std::string>> segments(std::string_view rest) {
  std::vector<std::string> out;
  while (true) {
    const size_t slash = rest.find('/');
    std::optional<std::string> decoded = percentDecode(rest.substr(0, slash));
    if (!decoded) return std::nullopt;
    out.push_back(std::move(*decoded));
    if (slash == std::string_view::npos) return out;
    rest.remove_prefix(slash + 1);
  }
}

std::string queryParam(std::string_view target, std::string_view key) {
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return {};
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    if (pair.starts_with(key) && pair.size() > key.size() && pair[key.size()] == '=') {
      return percentDecode(pair.substr(key.size() + 1)).value_or("");
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return {};
}

// What keeps the bus from being ready, one object per part: a service
// (plugins, listeners, bridges, CEP services and their queries: every
// registry entry of kind service) that is not started, and a paused route.
json notReady(router::Registry& registry) {
  json out = json::array();
  for (const router::ComponentSnapshot& c : registry.snapshot()) {
    if (c.kind != router::ComponentKind::kService || c.state == router::ComponentState::kStarted) {
      continue;
    }
    std::string reason = c.reason;
    if (reason.empty()) {
      reason = c.state == router::ComponentState::kRegistered
                   ? "not started yet"
                   : "the bus is stopping, or the service ended";
    }
    out.push_back(json{{"service", c.name},
                       {"state", router::componentStateName(c.state)},
                       {"reason", std::move(reason)}});
  }
  const json routes = routesJson(registry.stats());
  for (const json& route : routes.at("routes")) {
    if (!route.at("paused").get<bool>()) continue;
    out.push_back(json{{"route", route.at("route")},
                       {"state", "paused"},
                       {"reason", "paused over the admin API; POST /api/routes/" +
                                      route.at("route").get<std::string>() + "/resume"}});
  }
  return out;
}

AdminResponse methodNotAllowed(std::string_view method, std::string allow) {
  AdminResponse response =
      adminError(405, "method " + std::string(method) + " not allowed here; allowed: " + allow);
  response.allow = std::move(allow);
  return response;
}

// Compares without stopping at the first difference, so the time taken does
// not tell a client how much of a guessed token was right.
bool sameToken(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

AdminResponse adminError(int status, std::string_view message) {
  return jsonResponse(status, json{{"error", message}});
}

std::optional<std::string> percentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    if (i + 2 >= text.size()) return std::nullopt;
    const int high = hexDigit(text[i + 1]);
    const int low = hexDigit(text[i + 2]);
    if (high < 0 || low < 0) return std::nullopt;
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

AdminApi::AdminApi(router::Broker& broker, router::Registry& registry, std::string token,
                   std::string token_env, Deployer* deployer, const plugin::PluginLoader* plugins,
                   uint32_t max_names)
    : broker_(broker),
      registry_(registry),
      token_(std::move(token)),
      token_env_(std::move(token_env)),
      deployer_(deployer),
      plugins_(plugins),
      names_(std::make_shared<WireNameQuota>(max_names, "max-names",
                                             std::make_shared<std::atomic<uint64_t>>(0))),
      audit_(Poco::Logger::get(std::string(kAuditLogger))) {}

AdminResponse AdminApi::handle(const AdminRequest& request) const {
  std::string_view path = request.target.substr(0, request.target.find('?'));
  const bool get = request.method == "GET";

  // Probes (liveness, readiness) are reads: open, like /metrics.
  if (path == "/health") {
    if (!get) return methodNotAllowed(request.method, "GET");
    return jsonResponse(200, json{{"status", "ok"}});
  }
  if (path == "/ready") {
    if (!get) return methodNotAllowed(request.method, "GET");
    json waiting = notReady(registry_);
    if (waiting.empty()) return jsonResponse(200, json{{"status", "ready"}});
    return jsonResponse(503, json{{"status", "not ready"}, {"not_ready", std::move(waiting)}});
  }
  if (path == "/" || path == "/index.html" || path == "/dashboard.js" || path == "/dashboard.css") {
    if (!get) return methodNotAllowed(request.method, "GET");
    const DashboardAsset asset = dashboardAsset(path == "/index.html" ? "/" : path);
    AdminResponse response;
    response.content_type = std::string(asset.content_type);
    response.body = std::string(asset.body);
    return response;
  }
  if (path == "/metrics") {
    if (!get) return methodNotAllowed(request.method, "GET");
    AdminResponse response;
    response.content_type = std::string(kPrometheusContentType);
    response.body = renderMetrics(registry_);
    return response;
  }
  if (path.starts_with(kEventsPrefix) && path.size() > kEventsPrefix.size()) {
    if (request.method != "POST") return methodNotAllowed(request.method, "POST");
    return change(request, [&] {
      const std::optional<std::string> address = percentDecode(path.substr(kEventsPrefix.size()));
      if (!address) return adminError(400, "malformed percent escape in the address");
      return publish(*address, request.body);
    });
  }
  if (path == "/api" || path == kApiPrefix) {
    if (!get) return methodNotAllowed(request.method, "GET");
    return jsonResponse(200, apiIndex());
  }
  if (path.starts_with(kApiPrefix)) return handleApi(request, path);
  return adminError(404, "no such resource: " + std::string(path));
}

AdminResponse AdminApi::handleApi(const AdminRequest& request, std::string_view path) const {
  const std::optional<std::vector<std::string>> parts = segments(path.substr(kApiPrefix.size()));
  if (!parts) return adminError(400, "malformed percent escape in " + std::string(path));
  const std::vector<std::string>& p = *parts;
  const std::string_view method = request.method;
  const bool get = method == "GET";
  auto changes = [&](auto&& action) { return change(request, action); };
  auto needsDeployer = [&]() -> std::optional<AdminResponse> {
    if (deployer_ == nullptr) {
      return adminError(503, "deployment is not available: these services run outside a bus");
    }
    return std::nullopt;
  };
  const std::string& resource = p[0];

  if (resource == "components" && p.size() == 1) {
    if (!get) return methodNotAllowed(method, "GET");
    const auto stats = componentStats(registry_.stats());
    json components = json::array();
    for (const router::ComponentSnapshot& c : registry_.snapshot()) {
      components.push_back(componentJson(c, stats));
    }
    return jsonResponse(200, json{{"components", std::move(components)}});
  }
  if (resource == "components" && p.size() >= 2 && !p[1].empty()) {
    if (!get) return methodNotAllowed(method, "GET");
    // Endpoint names hold slashes ("amqp:c/l"): the name is the whole rest.
    constexpr std::string_view kComponentsPrefix = "/api/components/";
    const std::optional<std::string> name = percentDecode(path.substr(kComponentsPrefix.size()));
    if (!name) return adminError(400, "malformed percent escape in the component name");
    const std::optional<router::ComponentSnapshot> c = registry_.snapshotOf(*name);
    if (!c) return adminError(404, "no component named '" + *name + "'");
    return jsonResponse(200, componentJson(*c, componentStats(registry_.stats())));
  }
  if (resource == "endpoints" && p.size() == 1) {
    if (!get) return methodNotAllowed(method, "GET");
    const auto stats = componentStats(registry_.stats());
    json endpoints = json::array();
    for (const router::ComponentSnapshot& c : registry_.snapshot()) {
      if (c.kind == router::ComponentKind::kEndpoint) endpoints.push_back(componentJson(c, stats));
    }
    return jsonResponse(200, json{{"endpoints", std::move(endpoints)}});
  }
  if (resource == "plugins" && p.size() == 1) {
    if (!get) return methodNotAllowed(method, "GET");
    return jsonResponse(200, pluginsJson(registry_, plugins_));
  }
  if (resource == "cluster" && p.size() == 1) {
    if (!get) return methodNotAllowed(method, "GET");
    if (auto refused = needsDeployer()) return std::move(*refused);
    return jsonResponse(200, clusterJson(*deployer_, registry_));
  }
  if (resource == "stages" && p.size() == 1) {
    if (!get) return methodNotAllowed(method, "GET");
    return jsonResponse(200, stagesJson(registry_.stats()));
  }
  if (resource == "flows" && p.size() == 1) {
    if (!get) return methodNotAllowed(method, "GET");
    return jsonResponse(200, flowsJson(registry_.stats()));
  }
  if (resource == "routes" && p.size() == 1) {
    if (!get) return methodNotAllowed(method, "GET");
    return jsonResponse(200, routesJson(registry_.stats()));
  }
  if (resource == "routes" && p.size() == 3 && (p[2] == "pause" || p[2] == "resume")) {
    if (method != "POST") return methodNotAllowed(method, "POST");
    return changes([&] { return pauseRoute(p[1], p[2]); });
  }
  if (resource == "services" && p.size() == 1) {
    if (!get) return methodNotAllowed(method, "GET");
    if (auto refused = needsDeployer()) return std::move(*refused);
    json services = json::array();
    for (const DeployedServiceInfo& s : deployer_->deployedServices()) {
      services.push_back(serviceJson(registry_, s));
    }
    return jsonResponse(200, json{{"services", std::move(services)}});
  }
  if (resource == "services" && p.size() == 2 && !p[1].empty()) {
    if (!get) return methodNotAllowed(method, "GET");
    if (auto refused = needsDeployer()) return std::move(*refused);
    for (const DeployedServiceInfo& s : deployer_->deployedServices()) {
      if (s.name == p[1]) return jsonResponse(200, serviceJson(registry_, s));
    }
    return adminError(404, "no service named '" + p[1] + "'");
  }
  if (resource == "assemblies" && p.size() == 1) {
    if (auto refused = needsDeployer()) return std::move(*refused);
    if (method == "POST") return changes([&] { return deploy(request.body); });
    if (!get) return methodNotAllowed(method, "GET, POST");
    json assemblies = json::array();
    for (const AssemblyInfo& a : deployer_->assemblies()) {
      assemblies.push_back(
          json{{"name", a.name}, {"services", a.services}, {"runtime", a.runtime}});
    }
    return jsonResponse(200, json{{"assemblies", std::move(assemblies)}});
  }
  if (resource == "assemblies" && p.size() == 2 && !p[1].empty()) {
    if (method != "DELETE" && method != "PUT") return methodNotAllowed(method, "PUT, DELETE");
    if (auto refused = needsDeployer()) return std::move(*refused);
    if (method == "PUT") return changes([&] { return redeploy(p[1], request.body); });
    return changes([&] { return undeploy(p[1]); });
  }
  if (resource == "queries" && p.size() == 1) {
    if (!get) return methodNotAllowed(method, "GET");
    if (auto refused = needsDeployer()) return std::move(*refused);
    json queries = json::array();
    for (const DeployedServiceInfo& info : deployer_->deployedServices()) {
      const std::shared_ptr<Service> service = deployer_->findService(info.name);
      QueryHost* cep = queryHostOf(service.get());
      if (cep == nullptr) continue;
      for (const std::string& q : cep->queries()) {
        if (std::optional<json> entry = queryJson(registry_, info.name, q, *cep)) {
          queries.push_back(std::move(*entry));
        }
      }
    }
    return jsonResponse(200, json{{"queries", std::move(queries)}});
  }
  if (resource == "queries" && p.size() == 2 && !p[1].empty()) {
    if (auto refused = needsDeployer()) return std::move(*refused);
    if (get) return queryNamed(p[1]);
    if (method != "POST") return methodNotAllowed(method, "GET, POST");
    return changes([&] { return addQuery(p[1], request.body); });
  }
  if (resource == "queries" && p.size() == 4 && p[3] == "model") {
    if (!get) return methodNotAllowed(method, "GET");
    if (auto refused = needsDeployer()) return std::move(*refused);
    std::string format = queryParam(request.target, "format");
    return queryModel(p[1], p[2], format.empty() ? "json" : format);
  }
  if (resource == "queries" && p.size() == 3 && !p[1].empty() && !p[2].empty()) {
    if (auto refused = needsDeployer()) return std::move(*refused);
    if (get) return queryOf(p[1], p[2]);
    if (method == "PUT") return changes([&] { return replaceQuery(p[1], p[2], request.body); });
    if (method != "DELETE") return methodNotAllowed(method, "GET, PUT, DELETE");
    return changes([&] { return removeQuery(p[1], p[2]); });
  }
  return adminError(404, "no such resource: " + std::string(path));
}

AdminResponse AdminApi::queryOf(std::string_view service, std::string_view query) const {
  const std::shared_ptr<Service> host = deployer_->findService(service);
  const QueryHost* cep = queryHostOf(host.get());
  if (cep == nullptr) {
    return adminError(404, "no running CEP service unit named '" + std::string(service) + "'");
  }
  if (std::optional<json> entry =
          queryJson(registry_, std::string(service), std::string(query), *cep)) {
    return jsonResponse(200, *entry);
  }
  return adminError(404, "service '" + std::string(service) + "' runs no query named '" +
                             std::string(query) + "'");
}

AdminResponse AdminApi::queryNamed(std::string_view query) const {
  std::vector<std::string> hosts;
  for (const DeployedServiceInfo& info : deployer_->deployedServices()) {
    const std::shared_ptr<Service> host = deployer_->findService(info.name);
    const QueryHost* cep = queryHostOf(host.get());
    if (cep == nullptr) continue;
    const std::vector<std::string> names = cep->queries();
    if (std::find(names.begin(), names.end(), query) != names.end()) hosts.push_back(info.name);
  }
  if (hosts.empty()) return adminError(404, "no query named '" + std::string(query) + "'");
  if (hosts.size() > 1) {
    std::string services;
    for (const std::string& h : hosts) services += (services.empty() ? "" : ", ") + h;
    return adminError(409, "several services run a query named '" + std::string(query) + "' (" +
                               services + "): ask /api/queries/{service}/" + std::string(query));
  }
  return queryOf(hosts.front(), query);
}

namespace {

// The one <service-assembly> of a request body, or the 400 refusal naming
// its line.
std::variant<descriptor::ServiceAssembly, AdminResponse> assemblyOfBody(std::string_view body) {
  if (body.empty()) {
    return adminError(400, "empty body: expected a descriptor fragment, one <service-assembly>");
  }
  descriptor::ParseReport report;
  Result<descriptor::ServiceAssembly> assembly =
      descriptor::parseServiceAssembly(body, "request body", &report);
  if (!assembly) {
    return adminError(400, report.errors.empty() ? assembly.status().message() : report.toString());
  }
  return std::move(assembly).value();
}

}  // namespace

AdminResponse AdminApi::deploy(std::string_view body) const {
  auto read = assemblyOfBody(body);
  if (auto* refused = std::get_if<AdminResponse>(&read)) return std::move(*refused);
  const auto assembly = &std::get<descriptor::ServiceAssembly>(read);
  if (Status s = deployer_->deploy(*assembly); !s) return adminError(httpStatus(s), s.message());
  json services = json::array();
  for (const AssemblyInfo& a : deployer_->assemblies()) {
    if (a.name == assembly->name) services = a.services;
  }
  return jsonResponse(201, json{{"deployed", assembly->name}, {"services", std::move(services)}});
}

AdminResponse AdminApi::redeploy(std::string_view name, std::string_view body) const {
  auto read = assemblyOfBody(body);
  if (auto* refused = std::get_if<AdminResponse>(&read)) return std::move(*refused);
  const auto assembly = &std::get<descriptor::ServiceAssembly>(read);
  if (assembly->name != name) {
    return adminError(400, assembly->where
                               .error("<service-assembly name=\"" + assembly->name +
                                      "\">: a PUT on assembly '" + std::string(name) +
                                      "' redeploys it from a <service-assembly> of the same name")
                               .toString());
  }
  Result<Redeployed> done = deployer_->redeploy(*assembly);
  if (!done) return adminError(httpStatus(done.status()), done.status().message());
  json changed = json::array();
  for (const RedeployedQuery& q : done->changed) {
    json entry{{"service", q.service}, {"query", q.query}, {"change", queryStepName(q.change)}};
    if (q.edit) entry["edit"] = editJson(*q.edit);
    changed.push_back(std::move(entry));
  }
  return jsonResponse(done->deployed ? 201 : 200, json{{"redeployed", name},
                                                       {"deployed", done->deployed},
                                                       {"changed", std::move(changed)},
                                                       {"kept", done->kept}});
}

AdminResponse AdminApi::undeploy(std::string_view name) const {
  if (Status s = deployer_->undeploy(name); !s) return adminError(httpStatus(s), s.message());
  return jsonResponse(200, json{{"undeployed", name}});
}

namespace {

// The one <query> of a request body, or the 400 refusal naming its line.
std::variant<descriptor::QuerySpec, AdminResponse> queryOfBody(std::string_view body) {
  if (body.empty()) return adminError(400, "empty body: expected one <query> element");
  // The query is parsed as the one query of a CEP unit; the wrapper starts on
  // the body's first line, so the parser's line numbers are the body's.
  const std::string fragment =
      "<service-assembly name=\"admin\"><service-unit name=\"query\" type=\"cep\">" +
      std::string(body) + "</service-unit></service-assembly>";
  descriptor::ParseReport report;
  Result<descriptor::ServiceAssembly> parsed =
      descriptor::parseServiceAssembly(fragment, "request body", &report);
  if (!parsed) {
    return adminError(400, report.errors.empty() ? parsed.status().message() : report.toString());
  }
  if (parsed->units.size() != 1 || parsed->units[0].queries.size() != 1) {
    return adminError(400, "expected exactly one <query> element in the body");
  }
  return parsed->units[0].queries[0];
}

}  // namespace

std::variant<AdminApi::QueryChange, AdminResponse> AdminApi::queryChange(
    std::string_view service, std::string_view body) const {
  QueryChange change;
  change.host = deployer_->findService(service);
  change.cep = queryHostOf(change.host.get());
  if (change.cep == nullptr) {
    return adminError(404, "no running CEP service unit named '" + std::string(service) + "'");
  }
  auto read = queryOfBody(body);
  if (auto* refused = std::get_if<AdminResponse>(&read)) return std::move(*refused);
  change.spec = std::get<descriptor::QuerySpec>(std::move(read));
  return change;
}

AdminResponse AdminApi::addQuery(std::string_view service, std::string_view body) const {
  auto change = queryChange(service, body);
  if (auto* refused = std::get_if<AdminResponse>(&change)) return std::move(*refused);
  const auto& [host, cep, spec] = std::get<QueryChange>(change);
  if (Status s = cep->addQuery(spec); !s) return adminError(httpStatus(s), s.message());
  return jsonResponse(
      201,
      json{{"service", service}, {"query", spec.name}, {"endpoint", cep->endpointName(spec.name)}});
}

AdminResponse AdminApi::replaceQuery(std::string_view service, std::string_view query,
                                     std::string_view body) const {
  auto change = queryChange(service, body);
  if (auto* refused = std::get_if<AdminResponse>(&change)) return std::move(*refused);
  const auto& [host, cep, spec] = std::get<QueryChange>(change);
  if (spec.name != query) {
    return adminError(400, spec.where
                               .error("<query name=\"" + spec.name + "\">: a PUT on query '" +
                                      std::string(query) +
                                      "' replaces it by a <query> of the same name (POST "
                                      "/api/queries/" +
                                      std::string(service) + " adds another)")
                               .toString());
  }
  Result<QueryEdit> edit = cep->replaceQuery(spec);
  if (!edit) return adminError(httpStatus(edit.status()), edit.status().message());
  json out = editJson(*edit);
  out["service"] = service;
  out["query"] = query;
  return jsonResponse(200, out);
}

AdminResponse AdminApi::removeQuery(std::string_view service, std::string_view query) const {
  const std::shared_ptr<Service> host = deployer_->findService(service);
  QueryHost* cep = queryHostOf(host.get());
  if (cep == nullptr) {
    return adminError(404, "no running CEP service unit named '" + std::string(service) + "'");
  }
  if (Status s = cep->removeQuery(query); !s) return adminError(httpStatus(s), s.message());
  return jsonResponse(200, json{{"service", service}, {"removed", query}});
}

AdminResponse AdminApi::queryModel(std::string_view service, std::string_view query,
                                   std::string_view format) const {
  if (format != "json" && format != "dot") {
    return adminError(400, "format must be json or dot, not '" + std::string(format) + "'");
  }
  const std::shared_ptr<Service> host = deployer_->findService(service);
  QueryHost* cep = queryHostOf(host.get());
  if (cep == nullptr) {
    return adminError(404, "no running CEP service unit named '" + std::string(service) + "'");
  }
  Result<std::string> model = cep->exportModel(query, format);
  if (!model) return adminError(httpStatus(model.status()), model.status().message());
  AdminResponse response;
  response.content_type =
      format == "json" ? "application/json" : "text/vnd.graphviz; charset=utf-8";
  response.body = std::move(*model);
  return response;
}

AdminResponse AdminApi::pauseRoute(std::string_view route, std::string_view action) const {
  const bool pause = action == "pause";
  const std::string_view pattern = route == router::kDefaultRouteLabel ? std::string_view() : route;
  if (Status s = broker_.setRoutePaused(pattern, pause); !s) {
    return adminError(httpStatus(s), s.message());
  }
  return jsonResponse(200, json{{"route", route}, {"paused", pause}});
}

template <typename Action>
AdminResponse AdminApi::change(const AdminRequest& request, Action&& action) const {
  std::optional<AdminResponse> response = authorize(request.authorization);
  const std::string_view who = response ? std::string_view("anonymous") : token_env_;
  if (!response) response = action();
  // Only the error's text: a success's body may be large (a deployed
  // assembly's services) and says nothing the path does not.
  std::string outcome = std::to_string(response->status);
  if (response->status >= 400) {
    const json body = json::parse(response->body, nullptr, false);
    if (body.is_object() && body.contains("error")) {
      outcome += " (" + body.at("error").get<std::string>() + ")";
    }
  }
  audit_.notice("%s %s by %s: %s", std::string(request.method), std::string(request.target),
                std::string(who), outcome);
  return std::move(*response);
}

std::optional<AdminResponse> AdminApi::authorize(std::string_view authorization) const {
  if (token_.empty()) {
    return adminError(403,
                      token_env_.empty()
                          ? "state-changing requests are disabled: name an environment variable in "
                            "<listeners><http token-env=\"NAME\"> and set NAME to a secret token"
                          : "state-changing requests are disabled: set the environment variable " +
                                token_env_ + " (named by token-env) to a secret token");
  }
  constexpr std::string_view kBearer = "Bearer ";
  AdminResponse refused = adminError(401, "this request needs Authorization: Bearer <token>");
  refused.bearer_challenge = true;
  if (!authorization.starts_with(kBearer)) return refused;
  if (!sameToken(authorization.substr(kBearer.size()), token_)) return refused;
  return std::nullopt;
}

AdminResponse AdminApi::publish(std::string_view address, std::string_view body) const {
  if (Status valid = router::validateAddress(address); !valid) {
    return adminError(400, valid.message());
  }
  // The token is one client: a new address and the names only the event
  // carries are held while the request and what it queued live, charged to
  // its max-names (bus/core/wire_names.h) meanwhile, so publishing here
  // cannot spend the process-wide budget the AMQP clients share.
  std::optional<NameHold> symbol = holdWireName(address, names_.get());
  if (!symbol) return adminError(400, wireNameRefusal("address", address, names_.get()));
  Result<EventPtr> event = decodeEvent(body, names_.get());
  if (!event) return adminError(400, "bad event: " + event.status().message());
  flows::Exchange exchange;
  exchange.event = std::move(event).value();
  exchange.address = SharedName(std::move(*symbol));
  const flows::SendOutcome outcome = broker_.publish(exchange);
  json answer{{"targets", outcome.targets},      {"delivered", outcome.delivered},
              {"queued", outcome.queued},        {"degraded", outcome.degraded},
              {"rejected", outcome.rejected},    {"failed", outcome.failed},
              {"duplicates", outcome.duplicates}};
  if (!outcome.status) {
    answer["error"] = outcome.status.message();
    return jsonResponse(outcome.status.code() == Status::Code::kInvalidArgument ? 400 : 503,
                        answer);
  }
  return jsonResponse(200, answer);
}

}  // namespace cepbus::services::http
