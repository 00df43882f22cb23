#include "bus/host/detection/composite_id.h"

#include <string>

#include "bus/core/plugin/snapshot.h"

namespace cepbus::detection {

uint64_t compositeId(std::string_view query, std::span<const EventId> constituents) {
  // The bytes hashed, then the SDK's FNV-1a 64 (the snapshots' fingerprint).
  std::string bytes;
  bytes.reserve(query.size() + 1 + 8 * constituents.size());
  bytes.append(query).push_back('\0');
  for (EventId id : constituents) {
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(id >> (8 * i)));
  }
  return plugin::snapshotFingerprint(bytes);
}

}  // namespace cepbus::detection
