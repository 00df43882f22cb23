#pragma once

// Relays: components that publish, on an output address, events they derive
// from what they consume on input patterns — a CEP query with
// input="sensors.#" and output="alerts.overheat". A relay says so in its
// registry entry (metadata kRelayInputs, its patterns comma-separated, and
// kRelayOutput), so that whoever paces a publisher by how fast its events are
// taken downstream (the AMQP listener's credit, services/amqp/
// publisher_credit.h) can follow the events through relays to the
// subscribers of what they become.
//
// Thread-safety: free functions on values; relaysIn() reads the registry as
// its members allow (any thread).

#include <string>
#include <string_view>
#include <vector>

#include "router/registry.h"

namespace cepbus::router {

inline constexpr std::string_view kRelayInputs = "input";
inline constexpr std::string_view kRelayOutput = "output";

struct Relay {
  std::vector<std::string> inputs;  // topic patterns
  std::string output;               // an address
};

// The relays registered now: the entries with both metadata.
std::vector<Relay> relaysIn(const Registry& registry);

// The addresses events published to `address` reach through `relays`,
// transitively, each once, in the order they are reached. `address` itself
// is not one of them unless relays lead back to it.
std::vector<std::string> derivedAddresses(const std::vector<Relay>& relays,
                                          std::string_view address);

}  // namespace cepbus::router
