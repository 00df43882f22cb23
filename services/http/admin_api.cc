#include "services/http/admin_api.h"

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "bus/core/event_json.h"
#include "flows/exchange.h"
#include "router/topic.h"
#include "services/http/prometheus.h"

namespace cepbus::services::http {
namespace {

using nlohmann::json;

constexpr std::string_view kComponentsPrefix = "/api/components/";
constexpr std::string_view kEventsPrefix = "/api/events/";

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

json componentJson(const router::ComponentSnapshot& c) {
  json metadata = json::object();
  for (const auto& [key, value] : c.metadata) metadata[key] = value;
  return json{{"name", c.name},
              {"kind", router::componentKindName(c.kind)},
              {"owner", c.owner},
              {"state", router::componentStateName(c.state)},
              {"reason", c.reason},
              {"metadata", std::move(metadata)},
              {"queue_length", c.queue_length},
              {"delivered", c.delivered},
              {"failed", c.failed},
              {"rejected", c.rejected},
              {"throughput_per_second", c.throughput_per_s}};
}

json routesJson(const router::Broker& broker) {
  json routes = json::array();
  for (const router::RouteStatsSnapshot& r : broker.routeStats()) {
    routes.push_back(json{{"route", r.pattern.empty() ? kDefaultRouteLabel : r.pattern},
                          {"default", r.pattern.empty()},
                          {"flow", r.flow},
                          {"published", r.published},
                          {"delivered", r.delivered},
                          {"queued", r.queued},
                          {"rejected", r.rejected},
                          {"failed", r.failed},
                          {"unrouted", r.unrouted}});
  }
  return json{{"routes", std::move(routes)}};
}

json flowsJson(const router::Broker& broker) {
  json flows = json::array();
  for (const auto& flow : broker.policy().flows()) {
    const flows::FlowMetricsSnapshot m = flow->metrics();
    flows.push_back(json{{"name", m.name},
                         {"sent", m.sent},
                         {"delivered", m.delivered},
                         {"failed", m.failed},
                         {"rejected", m.rejected},
                         {"degraded", m.degraded},
                         {"invalid", m.invalid},
                         {"duplicates", m.duplicates},
                         {"listener_errors", m.listener_errors}});
  }
  return json{{"flows", std::move(flows)}};
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
                   std::string token_env)
    : broker_(broker),
      registry_(registry),
      token_(std::move(token)),
      token_env_(std::move(token_env)) {}

AdminResponse AdminApi::handle(const AdminRequest& request) const {
  std::string_view path = request.target.substr(0, request.target.find('?'));
  const bool get = request.method == "GET";

  if (path == "/metrics") {
    if (!get) return methodNotAllowed(request.method, "GET");
    AdminResponse response;
    response.content_type = std::string(kPrometheusContentType);
    response.body = renderMetrics(broker_, registry_);
    return response;
  }
  if (path == "/api/components") {
    if (!get) return methodNotAllowed(request.method, "GET");
    json components = json::array();
    for (const router::ComponentSnapshot& c : registry_.snapshot()) {
      components.push_back(componentJson(c));
    }
    return jsonResponse(200, json{{"components", std::move(components)}});
  }
  if (path.starts_with(kComponentsPrefix) && path.size() > kComponentsPrefix.size()) {
    if (!get) return methodNotAllowed(request.method, "GET");
    const std::optional<std::string> name = percentDecode(path.substr(kComponentsPrefix.size()));
    if (!name) return adminError(400, "malformed percent escape in the component name");
    const std::optional<router::ComponentSnapshot> c = registry_.snapshotOf(*name);
    if (!c) return adminError(404, "no component named '" + *name + "'");
    return jsonResponse(200, componentJson(*c));
  }
  if (path == "/api/routes") {
    if (!get) return methodNotAllowed(request.method, "GET");
    return jsonResponse(200, routesJson(broker_));
  }
  if (path == "/api/flows") {
    if (!get) return methodNotAllowed(request.method, "GET");
    return jsonResponse(200, flowsJson(broker_));
  }
  if (path.starts_with(kEventsPrefix) && path.size() > kEventsPrefix.size()) {
    if (request.method != "POST") return methodNotAllowed(request.method, "POST");
    if (std::optional<AdminResponse> refused = authorize(request.authorization)) {
      return std::move(*refused);
    }
    const std::optional<std::string> address = percentDecode(path.substr(kEventsPrefix.size()));
    if (!address) return adminError(400, "malformed percent escape in the address");
    return publish(*address, request.body);
  }
  return adminError(404, "no such resource: " + std::string(path));
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
  Result<EventPtr> event = decodeEvent(body);
  if (!event) return adminError(400, "bad event: " + event.status().message());
  flows::Exchange exchange;
  exchange.event = std::move(event).value();
  exchange.address = Symbol::intern(address);
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
