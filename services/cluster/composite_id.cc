#include "services/cluster/composite_id.h"

#include "services/cluster/fnv1a.h"

namespace cepbus::services::cluster {

uint64_t compositeId(std::string_view query, std::span<const EventId> constituents) {
  Fnv1a64 h;
  h.add(query).addByte(0);
  for (EventId id : constituents) h.addU64(id);
  return h.value();
}

}  // namespace cepbus::services::cluster
