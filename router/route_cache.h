#pragma once

// RouteCache: resolved routes by address, for a publish path that neither
// locks nor hashes a string. An address is an interned Symbol, so its id
// indexes a two-level array of atomic pointers directly (chunks of 1024 slots
// allocated on first use). Writers (serialized by the broker) install or clear
// routes; replaced routes are retired to an EpochReclaimer, so a reader inside
// a guard may keep using the route it loaded.
//
// A client's address that nothing else knows is a held name (wire_names.h):
// its id is given back when the last link, request and exchange holding it
// are gone, and reused for another name. Its routes sit in an array of their
// own, indexed by the held slot, and each remembers the incarnation of the
// name it was built for (heldNameIncarnation()): a route found for a reused
// id is a miss, never a route to the name the id stood for before. Held
// routes are bounded (kMaxHeldRoutes): a flood of new addresses does not
// keep the routes of names given back; reaching the bound drops them all,
// and the addresses still in use resolve again on their next publish.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "bus/core/symbol.h"
#include "bus/core/wire_names.h"
#include "router/epoch_reclaimer.h"
#include "router/resolved_route.h"

namespace cepbus::router {

// Thread-safety: find() from any thread inside an EpochReclaimer guard (for a
// held address, while the caller holds it); install(), clear() and size()
// serialized by the caller. Ownership: owns the installed routes; retired
// ones pass to the reclaimer.
class RouteCache {
 public:
  // Routes of held addresses kept at most.
  static constexpr size_t kMaxHeldRoutes = 4096;

  explicit RouteCache(EpochReclaimer& reclaimer);
  RouteCache(const RouteCache&) = delete;
  RouteCache& operator=(const RouteCache&) = delete;

  // The route of `address`, or null on a miss. Lock-free: two acquire loads
  // (and, for a held address, its incarnation).
  const ResolvedRoute* find(Symbol address) const {
    if (address.held()) return findHeld(address);
    return permanent_.load(address.id());
  }

  // Installs `route` for its address, retiring any route it replaces.
  const ResolvedRoute* install(std::unique_ptr<ResolvedRoute> route);
  // Retires every route (subscriptions changed).
  void clear();
  size_t size() const { return permanent_.size() + held_.size(); }
  size_t heldSize() const { return held_.size(); }

 private:
  // Routes by an index below Symbol::kMaxSymbols.
  class Slots {
   public:
    Slots();
    ~Slots();
    Slots(const Slots&) = delete;
    Slots& operator=(const Slots&) = delete;

    const ResolvedRoute* load(uint32_t index) const {
      const Chunk* chunk = chunks_[index >> kChunkBits].load(std::memory_order_acquire);
      if (chunk == nullptr) return nullptr;
      return chunk->slots[index & (kChunkSize - 1)].load(std::memory_order_acquire);
    }
    // Stores `route` at `index`, retiring the one it replaces.
    void store(uint32_t index, const ResolvedRoute* route, EpochReclaimer& reclaimer);
    // Retires every route, and the chunks that held them.
    void clear(EpochReclaimer& reclaimer);
    size_t size() const { return populated_.size(); }

   private:
    static constexpr uint32_t kChunkBits = 10;
    static constexpr uint32_t kChunkSize = 1u << kChunkBits;
    static constexpr uint32_t kChunkCount = Symbol::kMaxSymbols >> kChunkBits;

    struct Chunk {
      std::array<std::atomic<const ResolvedRoute*>, kChunkSize> slots{};
    };

    std::unique_ptr<std::atomic<Chunk*>[]> chunks_;
    std::vector<uint32_t> populated_;  // indexes with a route; writer only
  };

  static uint32_t heldIndex(Symbol address) { return address.id() & ~Symbol::kHeldBit; }
  const ResolvedRoute* findHeld(Symbol address) const;

  EpochReclaimer& reclaimer_;
  Slots permanent_;  // by symbol id
  Slots held_;       // by held slot (heldIndex())
};

}  // namespace cepbus::router
