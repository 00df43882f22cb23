#pragma once

// The descriptor element of the admin and monitoring listener,
// <listeners><http host port token-env max-connections max-ws-clients
// request-timeout max-names> (docs/descriptors.md). Registered with the descriptor
// parser by the bus (descriptor::ElementParsers); read into
// HttpListenerConfig.
//
// Thread safety: immutable; parse() is reentrant.

#include <any>
#include <string_view>

#include "bus/host/descriptor/element_parser.h"

namespace cepbus::services::http {

class HttpListenerElement final : public descriptor::ElementParser {
 public:
  std::string_view parent() const override { return descriptor::kListenersElement; }
  std::string_view tag() const override { return "http"; }
  // An HttpListenerConfig.
  std::any parse(const descriptor::Element& element) const override;
};

}  // namespace cepbus::services::http
