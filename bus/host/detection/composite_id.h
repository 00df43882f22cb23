#pragma once

// The deterministic id of a composite event: the same query over the same
// constituent events gives the same id on whichever node or run, however
// often the events are replayed, so a replayed composite is recognised as
// the duplicate it is — by a cluster's consumers (it travels as the AMQP
// message-id, services/cluster) and by a checkpointed CEP query on the bus,
// which drops one it published before a crash (services/cep).
//
//   id = FNV-1a 64 over the query name, a 0 byte, then each constituent's
//        event id as 8 little-endian bytes, in pattern order
//
// Thread-safety: a pure function.

#include <cstdint>
#include <span>
#include <string_view>

#include "bus/core/event.h"

namespace cepbus::detection {

uint64_t compositeId(std::string_view query, std::span<const EventId> constituents);

}  // namespace cepbus::detection
