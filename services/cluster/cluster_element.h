#pragma once

// The descriptor element of a scale-out cluster node, <cluster> with its
// <broker>s, optional <tls> and <query>s (docs/cluster.md). Registered with
// the descriptor parser by the bus (descriptor::ElementParsers); read into
// ClusterSpec.
//
// Thread safety: immutable; parse() is reentrant.

#include <any>
#include <string_view>

#include "bus/host/descriptor/element_parser.h"

namespace cepbus::services::cluster {

class ClusterElement final : public descriptor::ElementParser {
 public:
  std::string_view parent() const override { return descriptor::kRootElement; }
  std::string_view tag() const override { return "cluster"; }
  // A ClusterSpec.
  std::any parse(const descriptor::Element& element) const override;
};

}  // namespace cepbus::services::cluster
