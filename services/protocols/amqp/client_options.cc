#include "services/protocols/amqp/client_options.h"

#include <proton/ssl.hpp>
#include <proton/work_queue.hpp>

#include "bus/host/descriptor/address.h"

namespace cepbus::services::amqp {

std::string hostOf(std::string_view url) {
  if (auto scheme = url.find("://"); scheme != std::string_view::npos) {
    url.remove_prefix(scheme + 3);
  }
  if (auto at = url.rfind('@'); at != std::string_view::npos) url.remove_prefix(at + 1);
  if (!url.empty() && url.front() == '[') return std::string(url.substr(1, url.find(']') - 1));
  return std::string(url.substr(0, url.find_first_of(":/")));
}

Status checkPeer(const AmqpPeer& peer) {
  if (peer.user.empty()) return Status::ok();
  if (peer.password.empty()) {
    return Status::invalidArgument("user \"" + peer.user + "\" has no password");
  }
  if (!peer.tls() && !descriptor::isLoopbackHost(hostOf(peer.url))) {
    return Status::invalidArgument(
        "a user's password goes only over amqps:// (or to a loopback host), not to " + peer.url);
  }
  return Status::ok();
}

proton::connection_options connectionOptions(const AmqpPeer& peer) {
  proton::connection_options options;
  if (peer.user.empty()) {
    options.sasl_allowed_mechs("ANONYMOUS");
  } else {
    options.user(peer.user).password(peer.password).sasl_allowed_mechs("PLAIN");
    // checkPeer() allows a user without TLS only to a loopback host.
    options.sasl_allow_insecure_mechs(!peer.tls());
  }
  if (peer.tls()) {
    options.ssl_client_options(
        peer.ca.empty() ? proton::ssl_client_options()
                        : proton::ssl_client_options(peer.ca, proton::ssl::VERIFY_PEER_NAME));
    // Proton checks the certificate's DNS names only: a peer reached by its
    // IP address is verified against the name it was given.
    if (!peer.peer_name.empty()) options.virtual_host(peer.peer_name);
  }
  return options;
}

void closeConnection(proton::connection& c) {
  c.close();
  // An empty task wakes the connection, which then writes its close.
  c.work_queue().add([] {});
}

std::string describeCondition(const proton::error_condition& e, std::string_view when_empty) {
  if (!e) return std::string(when_empty);
  return e.description().empty() ? e.name() : e.name() + ": " + e.description();
}

}  // namespace cepbus::services::amqp
