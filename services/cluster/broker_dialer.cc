#include "services/cluster/broker_dialer.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <proton/ssl.hpp>

namespace cepbus::services::cluster {

BrokerDial dialBroker(const ClusterSpec& spec, const ClusterBroker& broker,
                      const std::string& password) {
  BrokerDial c;
  const bool tls = spec.tls.has_value();
  c.url = (tls ? "amqps://" : "amqp://") + broker.host + ":" + std::to_string(broker.port);
  c.options.user(spec.user).password(password).sasl_allowed_mechs("PLAIN");
  c.options.sasl_allow_insecure_mechs(!tls);
  c.options.idle_timeout(proton::duration(std::max<uint64_t>(spec.idle_timeout_ms, 2000)));
  if (tls) {
    c.options.ssl_client_options(
        proton::ssl_client_options(spec.tls->ca.string(), proton::ssl::VERIFY_PEER_NAME));
    c.options.virtual_host(spec.tls->peer_name.empty() ? broker.host : spec.tls->peer_name);
  }
  return c;
}

}  // namespace cepbus::services::cluster
