#include "router/route_cache.h"

namespace cepbus::router {

RouteCache::Slots::Slots() : chunks_(new std::atomic<Chunk*>[kChunkCount]) {
  for (uint32_t i = 0; i < kChunkCount; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
}

RouteCache::Slots::~Slots() {
  for (uint32_t i = 0; i < kChunkCount; ++i) {
    Chunk* chunk = chunks_[i].load(std::memory_order_relaxed);
    if (chunk == nullptr) continue;
    for (auto& slot : chunk->slots) delete slot.load(std::memory_order_relaxed);
    delete chunk;
  }
}

void RouteCache::Slots::store(uint32_t index, const ResolvedRoute* route,
                              EpochReclaimer& reclaimer) {
  std::atomic<Chunk*>& chunk_slot = chunks_[index >> kChunkBits];
  Chunk* chunk = chunk_slot.load(std::memory_order_relaxed);
  if (chunk == nullptr) {
    chunk = new Chunk();
    chunk_slot.store(chunk, std::memory_order_release);
  }
  const ResolvedRoute* old =
      chunk->slots[index & (kChunkSize - 1)].exchange(route, std::memory_order_acq_rel);
  if (old != nullptr) {
    reclaimer.retire(std::shared_ptr<const ResolvedRoute>(old));
  } else {
    populated_.push_back(index);
  }
}

void RouteCache::Slots::clear(EpochReclaimer& reclaimer) {
  for (uint32_t index : populated_) {
    Chunk* chunk = chunks_[index >> kChunkBits].load(std::memory_order_relaxed);
    const ResolvedRoute* old =
        chunk->slots[index & (kChunkSize - 1)].exchange(nullptr, std::memory_order_acq_rel);
    if (old != nullptr) reclaimer.retire(std::shared_ptr<const ResolvedRoute>(old));
  }
  populated_.clear();
  // The chunks go too (a reader may still be inside one): after a flood of
  // held addresses, their slots would otherwise stay for the process's life.
  for (uint32_t i = 0; i < kChunkCount; ++i) {
    if (Chunk* chunk = chunks_[i].exchange(nullptr, std::memory_order_acq_rel)) {
      reclaimer.retire(std::shared_ptr<const Chunk>(chunk));
    }
  }
}

RouteCache::RouteCache(EpochReclaimer& reclaimer) : reclaimer_(reclaimer) {}

const ResolvedRoute* RouteCache::findHeld(Symbol address) const {
  const ResolvedRoute* route = held_.load(heldIndex(address));
  // Built for the name this id stood for before it was given back: a miss.
  if (route == nullptr || route->incarnation != heldNameIncarnation(address)) return nullptr;
  return route;
}

const ResolvedRoute* RouteCache::install(std::unique_ptr<ResolvedRoute> route) {
  const Symbol address = route->address;
  const ResolvedRoute* installed = route.release();
  if (!address.held()) {
    permanent_.store(address.id(), installed, reclaimer_);
    return installed;
  }
  if (held_.size() >= kMaxHeldRoutes && held_.load(heldIndex(address)) == nullptr) {
    held_.clear(reclaimer_);
  }
  held_.store(heldIndex(address), installed, reclaimer_);
  return installed;
}

void RouteCache::clear() {
  permanent_.clear(reclaimer_);
  held_.clear(reclaimer_);
}

}  // namespace cepbus::router
