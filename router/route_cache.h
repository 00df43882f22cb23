#pragma once

// RouteCache: resolved routes by address, for a publish path that neither
// locks nor hashes a string. An address is an interned Symbol, so its id
// indexes a two-level array of atomic pointers directly (chunks of 1024 slots
// allocated on first use). Writers (serialized by the broker) install or clear
// routes; replaced routes are retired to an EpochReclaimer, so a reader inside
// a guard may keep using the route it loaded.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "bus/core/symbol.h"
#include "router/epoch_reclaimer.h"
#include "router/resolved_route.h"

namespace cepbus::router {

// Thread-safety: find() from any thread inside an EpochReclaimer guard;
// install(), clear() and size() serialized by the caller. Ownership: owns the
// installed routes; retired ones pass to the reclaimer.
class RouteCache {
 public:
  explicit RouteCache(EpochReclaimer& reclaimer);
  ~RouteCache();
  RouteCache(const RouteCache&) = delete;
  RouteCache& operator=(const RouteCache&) = delete;

  // The route of `address`, or null on a miss. Lock-free: two acquire loads.
  const ResolvedRoute* find(Symbol address) const {
    const Chunk* chunk = chunks_[address.id() >> kChunkBits].load(std::memory_order_acquire);
    if (chunk == nullptr) return nullptr;
    return chunk->slots[address.id() & (kChunkSize - 1)].load(std::memory_order_acquire);
  }

  // Installs `route` for its address, retiring any route it replaces.
  const ResolvedRoute* install(std::unique_ptr<ResolvedRoute> route);
  // Retires every route (subscriptions changed).
  void clear();
  size_t size() const { return populated_.size(); }

 private:
  static constexpr uint32_t kChunkBits = 10;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kChunkCount = Symbol::kMaxSymbols >> kChunkBits;

  struct Chunk {
    std::array<std::atomic<const ResolvedRoute*>, kChunkSize> slots{};
  };

  EpochReclaimer& reclaimer_;
  std::unique_ptr<std::atomic<Chunk*>[]> chunks_;
  std::vector<uint32_t> populated_;  // symbol ids with a route; writer only
};

}  // namespace cepbus::router
