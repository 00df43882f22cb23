#pragma once

// The deterministic id of a cluster's composite event: the same query over
// the same constituent events gives the same id on whichever node, however
// often the events are replayed, so a consumer recognises a replayed
// composite as the duplicate it is (it travels as the AMQP message-id).
//
//   id = FNV-1a 64 over the query name, a 0 byte, then each constituent's
//        event id as 8 little-endian bytes, in pattern order

#include <cstdint>
#include <span>
#include <string_view>

#include "bus/core/event.h"

namespace cepbus::services::cluster {

uint64_t compositeId(std::string_view query, std::span<const EventId> constituents);

}  // namespace cepbus::services::cluster
