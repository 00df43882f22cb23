#include "services/http/http_listener_element.h"

#include "services/http/http_listener_config.h"

namespace cepbus::services::http {

std::any HttpListenerElement::parse(const descriptor::Element& e) const {
  using descriptor::kMaxCapacity;
  e.allowAttributes({"host", "port", "token-env", "max-connections", "max-ws-clients",
                     "request-timeout", "max-names"});
  e.noChildren();
  HttpListenerConfig l;
  l.where = e.where();
  e.hostAndPort(l.host, l.port);
  l.max_connections = e.integer("max-connections", 1, kMaxCapacity);
  l.max_ws_clients = e.integer("max-ws-clients", 0, kMaxCapacity);
  l.max_names = e.integer("max-names", 0, UINT32_MAX);
  l.request_timeout_ms = e.integer("request-timeout", 1, descriptor::kMaxTimeoutMs);
  l.token_env =
      e.envName("token-env", " (letters, digits and '_', not starting with a digit)").value_or("");
  return l;
}

}  // namespace cepbus::services::http
