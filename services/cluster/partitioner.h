#pragma once

// Which partition of a cluster an event belongs to (the contract every
// publisher follows, whatever its language):
//
//   text      = the key attributes' values in the cluster's `key` order, each
//               rendered canonically and joined by the byte 0x1F; a number
//               that is integral (10 and 10.0 alike) renders as its decimal
//               integer, any other number as the shortest decimal that reads
//               back as the same double, a string as itself, a bool as
//               true/false
//   partition = FNV-1a 64 of text, modulo the partition count
//
// Numbers that compare equal in a query render equally, so events that an
// equality predicate over the key may join always share a partition.
//
// Thread-safety: pure functions.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "bus/core/event.h"
#include "bus/core/status.h"
#include "services/cluster/fnv1a.h"

namespace cepbus::services::cluster {

// The canonical key text of `event`; InvalidArgument naming the first key
// attribute the event lacks (or holds as null).
Result<std::string> partitionKeyText(const Event& event, std::span<const Symbol> key);

inline uint32_t partitionOfKey(std::string_view key_text, uint32_t partitions) {
  return static_cast<uint32_t>(fnv1a64(key_text) % partitions);
}

}  // namespace cepbus::services::cluster
