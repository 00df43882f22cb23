#pragma once

// keepName(): a name a flow keeps for something it cannot drop, such as a
// delivery target's stage or a journaled record's address.
//
// The name may come from a client (an AMQP subscribing link's, a WebSocket
// feed's), so it is held (wire_names.h) and given back once nothing keeps it.
// The budget of names from clients guards against what clients send; a name
// it cannot take here becomes the bus's for good instead: refusing it would
// lose a record or keep a target from attaching.

#include <optional>
#include <string_view>

#include "bus/core/symbol.h"
#include "bus/core/wire_names.h"

namespace cepbus::flows {

inline SharedName keepName(std::string_view name) {
  if (std::optional<NameHold> hold = holdWireName(name)) return SharedName(std::move(*hold));
  return Symbol::intern(name);
}

}  // namespace cepbus::flows
