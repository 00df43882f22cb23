#pragma once

// The descriptor element of the AMQP listener, <listeners><amqp>: where it
// listens, TLS, users with their permits, flow control and per-client
// limits (docs/descriptors.md). Registered with the descriptor parser by the
// bus (descriptor::ElementParsers); read into AmqpListenerConfig.
//
//   <amqp host="0.0.0.0" port="5671" allow-anonymous="false" threads="2">
//     <tls cert="server.pem" key="server.key"/>
//     <user name="plant" password-hash="pbkdf2-sha256:...">
//       <permit publish="plant.#" subscribe="alerts.#"/>
//     </user>
//   </amqp>
//
// Thread safety: immutable; parse() is reentrant.

#include <any>
#include <string_view>

#include "bus/host/descriptor/element_parser.h"

namespace cepbus::services::amqp {

class AmqpListenerElement final : public descriptor::ElementParser {
 public:
  std::string_view parent() const override { return descriptor::kListenersElement; }
  std::string_view tag() const override { return "amqp"; }
  // An AmqpListenerConfig.
  std::any parse(const descriptor::Element& element) const override;
};

}  // namespace cepbus::services::amqp
