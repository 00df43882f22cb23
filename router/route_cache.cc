#include "router/route_cache.h"

namespace cepbus::router {

namespace {

std::shared_ptr<const void> owning(const ResolvedRoute* route) {
  return std::shared_ptr<const ResolvedRoute>(route);
}

}  // namespace

RouteCache::RouteCache(EpochReclaimer& reclaimer)
    : reclaimer_(reclaimer), chunks_(new std::atomic<Chunk*>[kChunkCount]) {
  for (uint32_t i = 0; i < kChunkCount; ++i) chunks_[i].store(nullptr, std::memory_order_relaxed);
}

RouteCache::~RouteCache() {
  for (uint32_t i = 0; i < kChunkCount; ++i) {
    Chunk* chunk = chunks_[i].load(std::memory_order_relaxed);
    if (chunk == nullptr) continue;
    for (auto& slot : chunk->slots) delete slot.load(std::memory_order_relaxed);
    delete chunk;
  }
}

const ResolvedRoute* RouteCache::install(std::unique_ptr<ResolvedRoute> route) {
  const uint32_t id = route->address.id();
  std::atomic<Chunk*>& chunk_slot = chunks_[id >> kChunkBits];
  Chunk* chunk = chunk_slot.load(std::memory_order_relaxed);
  if (chunk == nullptr) {
    chunk = new Chunk();
    chunk_slot.store(chunk, std::memory_order_release);
  }
  const ResolvedRoute* installed = route.release();
  const ResolvedRoute* old =
      chunk->slots[id & (kChunkSize - 1)].exchange(installed, std::memory_order_acq_rel);
  if (old != nullptr) {
    reclaimer_.retire(owning(old));
  } else {
    populated_.push_back(id);
  }
  return installed;
}

void RouteCache::clear() {
  for (uint32_t id : populated_) {
    Chunk* chunk = chunks_[id >> kChunkBits].load(std::memory_order_relaxed);
    const ResolvedRoute* old =
        chunk->slots[id & (kChunkSize - 1)].exchange(nullptr, std::memory_order_acq_rel);
    if (old != nullptr) reclaimer_.retire(owning(old));
  }
  populated_.clear();
}

}  // namespace cepbus::router
