#pragma once

// How a cluster process (a node, the publisher) opens its AMQP connection to
// one broker of the failover list: the URL and the Proton options for the
// cluster's credentials, heartbeats and TLS, in one place so that every
// connection of a cluster is made the same way.
//
// - Credentials: SASL PLAIN with the cluster's user and password. Without
//   TLS Proton must be allowed to send PLAIN in clear, which the descriptor
//   parser permits only to loopback brokers.
// - TLS (<cluster><tls ca peer-name>): amqps://, the broker's certificate
//   verified against the CA and its DNS name against the peer name (the
//   broker's host when empty; Proton checks DNS names only, so a broker
//   reached by its IP address needs peer-name).
// - Idle timeout: the cluster's idle timeout (at least 2 s), so the broker
//   sees frames often enough to notice a dead process without the
//   watchdog's eviction.

#include <proton/connection_options.hpp>
#include <string>

#include "services/cluster/cluster_spec.h"

namespace cepbus::services::cluster {

struct BrokerDial {
  std::string url;  // amqp://host:port or amqps://host:port
  proton::connection_options options;
};

// The caller adds its handler to `options`.
BrokerDial dialBroker(const ClusterSpec& spec, const ClusterBroker& broker,
                      const std::string& password);

}  // namespace cepbus::services::cluster
