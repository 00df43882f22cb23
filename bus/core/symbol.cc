#include "bus/core/symbol.h"

#include <array>
#include <atomic>
#include <cassert>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "bus/core/wire_names.h"

namespace cepbus {

// What the symbol table does to a quota, under its lock.
class WireNameCharge {
 public:
  // Charges a name to the quota and its parents; false (and the refusal
  // counted by the quota that is spent) when one has no room.
  static bool tryCharge(WireNameQuota& quota) {
    if (const WireNameQuota* spent = quota.spent()) {
      spent->refused_->fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    for (WireNameQuota* q = &quota; q != nullptr; q = q->parent_.get()) {
      q->held_.fetch_add(1, std::memory_order_relaxed);
    }
    return true;
  }
  // Takes back a charge: the name was not created after all, or is given back.
  static void refund(WireNameQuota& quota) {
    for (WireNameQuota* q = &quota; q != nullptr; q = q->parent_.get()) {
      q->held_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
};

// Makes holds from ids: only the table below knows which ids exist.
class SymbolIds {
 public:
  static NameHold adopt(uint32_t id) { return NameHold(Symbol(id)); }
};

namespace {

constexpr uint32_t kChunkBits = 12;
constexpr uint32_t kChunkSize = 1u << kChunkBits;
constexpr uint32_t kChunks = Symbol::kMaxSymbols / kChunkSize;

// A name from the wire and who holds it. `holds` and `permanent` are read
// and counted without the lock by holders; everything else is guarded by
// the table's lock.
struct HeldSlot {
  std::string name;
  std::atomic<uint32_t> holds{0};
  std::atomic<bool> permanent{false};    // interned since: never given back
  std::atomic<uint64_t> incarnation{0};  // set when the slot takes a name; read by holders
  bool in_use = false;                   // names a held name (else free)
  bool given_back = false;               // no holds since the last one ended
  bool idle = false;                     // in the table's idle queue
  std::shared_ptr<WireNameQuota> quota;  // charged while holds > 0
};

// Names live in fixed-size chunks that never move while a name in them is
// alive, so name() reads them without a lock: a reader only dereferences ids
// it was handed (and, for a held name, holds), and an id is published
// (release) after its string is written.
//
// Permanent names take ids from 1 up and are never freed. Held names take
// the lowest free slot of their own chunks (id = kHeldBit | slot), so after
// a flood the names still held gather in the first chunks; a chunk whose
// names were all given back is freed, which is how the memory goes back.
class SymbolTable {
 public:
  SymbolTable() { insertLocked(""); }

  uint32_t intern(std::string_view name) {
    std::lock_guard lock(mu_);
    if (auto it = ids_.find(name); it != ids_.end()) return it->second;
    if (auto it = held_ids_.find(name); it != held_ids_.end()) return promoteLocked(it);
    return insertLocked(name);
  }

  uint32_t find(std::string_view name) {
    std::lock_guard lock(mu_);
    auto it = ids_.find(name);
    return it == ids_.end() ? 0 : it->second;
  }

  // One more hold on `name` (holdWireName); the caller adopts it.
  std::optional<uint32_t> holdWire(std::string_view name, WireNameQuota* quota) {
    std::lock_guard lock(mu_);
    if (auto it = ids_.find(name); it != ids_.end()) return it->second;
    if (auto it = held_ids_.find(name); it != held_ids_.end()) {
      HeldSlot& slot = heldSlot(it->second);
      // Held by someone: free, as a known name. Given back (idle, or about to
      // be: its last holder let go and waits for this lock): charged anew to
      // the quota, not to the budget, which it never left.
      if (slot.holds.fetch_add(1, std::memory_order_relaxed) > 0) return it->second;
      std::shared_ptr<WireNameQuota> owner = ownerOf(quota);
      if (std::exchange(slot.given_back, false)) --given_back_now_;
      if (slot.quota != nullptr) WireNameCharge::refund(*std::exchange(slot.quota, nullptr));
      if (owner != nullptr && !WireNameCharge::tryCharge(*owner)) {
        slot.holds.fetch_sub(1, std::memory_order_relaxed);
        givenBackLocked(it->second);
        return std::nullopt;
      }
      slot.quota = std::move(owner);
      return it->second;
    }
    std::shared_ptr<WireNameQuota> owner = ownerOf(quota);
    if (owner != nullptr && !WireNameCharge::tryCharge(*owner)) return std::nullopt;
    std::optional<uint32_t> id = roomLocked() ? allocateLocked() : std::nullopt;
    if (!id) {
      if (owner != nullptr) WireNameCharge::refund(*owner);
      ++wire_refused_;
      return std::nullopt;
    }
    HeldSlot& slot = heldSlot(*id);
    slot.name.assign(name);
    slot.incarnation.store(++incarnations_, std::memory_order_relaxed);
    slot.in_use = true;
    slot.holds.store(1, std::memory_order_relaxed);
    slot.quota = std::move(owner);
    held_ids_.emplace(std::string_view(slot.name), *id);
    ++held_;
    return id;
  }

  // Another hold on a held name the caller keeps alive: no lock.
  void acquire(uint32_t id) {
    HeldSlot& slot = heldSlot(id);
    if (slot.permanent.load(std::memory_order_relaxed)) return;
    slot.holds.fetch_add(1, std::memory_order_relaxed);
  }

  // Lets go of a hold; the last one takes the lock to give the name back.
  void release(uint32_t id) {
    HeldSlot& slot = heldSlot(id);
    if (slot.permanent.load(std::memory_order_relaxed)) return;
    if (slot.holds.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    std::lock_guard lock(mu_);
    givenBackLocked(id);
  }

  void setWireBudget(uint32_t budget) {
    std::lock_guard lock(mu_);
    wire_budget_ = budget;
  }

  WireNameStats wireStats() {
    std::lock_guard lock(mu_);
    return WireNameStats{wire_budget_, held_ - given_back_now_, given_back_now_, wire_refused_,
                         given_back_};
  }

  uint64_t incarnation(uint32_t id) const {
    return heldSlot(id).incarnation.load(std::memory_order_relaxed);
  }

  std::string_view name(uint32_t id) const {
    if ((id & Symbol::kHeldBit) != 0) return heldSlot(id).name;
    const std::string* chunk = chunks_[id >> kChunkBits].load(std::memory_order_acquire);
    return chunk[id & (kChunkSize - 1)];
  }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using NameMap = std::unordered_map<std::string_view, uint32_t, Hash, std::equal_to<>>;

  // A held name keeps the quota it is charged to, so that it can be refunded
  // after its client is gone.
  static std::shared_ptr<WireNameQuota> ownerOf(WireNameQuota* quota) {
    if (quota == nullptr) return nullptr;
    std::shared_ptr<WireNameQuota> owner = quota->weak_from_this().lock();
    assert(owner != nullptr && "a WireNameQuota is owned by a shared_ptr");
    return owner;
  }

  HeldSlot& heldSlot(uint32_t id) const {
    const uint32_t slot = id & ~Symbol::kHeldBit;
    return held_chunks_[slot >> kChunkBits].load(
        std::memory_order_acquire)[slot & (kChunkSize - 1)];
  }

  uint32_t insertLocked(std::string_view name) {
    const uint32_t id = size_;
    if (id >= Symbol::kMaxSymbols) throw std::length_error("symbol table is full");
    auto& slot = chunks_[id >> kChunkBits];
    std::string* chunk = slot.load(std::memory_order_relaxed);
    if (chunk == nullptr) {
      owned_[id >> kChunkBits] = std::make_unique<std::string[]>(kChunkSize);
      chunk = owned_[id >> kChunkBits].get();
    }
    chunk[id & (kChunkSize - 1)] = std::string(name);
    slot.store(chunk, std::memory_order_release);
    ids_.emplace(std::string_view(chunk[id & (kChunkSize - 1)]), id);
    ++size_;
    return id;
  }

  // A held name interned: it keeps its id and is the bus's from now on, so
  // its client's quota and the budget get it back.
  uint32_t promoteLocked(NameMap::iterator it) {
    const uint32_t id = it->second;
    HeldSlot& slot = heldSlot(id);
    slot.permanent.store(true, std::memory_order_relaxed);
    if (std::exchange(slot.given_back, false)) --given_back_now_;
    if (slot.quota != nullptr) WireNameCharge::refund(*std::exchange(slot.quota, nullptr));
    held_ids_.erase(it);
    ids_.emplace(std::string_view(slot.name), id);
    --held_;
    return id;
  }

  // The budget counts the names held, not the idle ones: those are
  // at most kIdleHeldNames more, and re-holding one creates nothing.
  bool roomLocked() const { return held_ - given_back_now_ < wire_budget_; }

  // The last hold on `id` ended: refund its charge and queue it as idle,
  // freeing the oldest idle name beyond kIdleHeldNames.
  void givenBackLocked(uint32_t id) {
    const uint32_t index = id & ~Symbol::kHeldBit;
    if (held_chunks_[index >> kChunkBits].load(std::memory_order_relaxed) == nullptr) {
      return;  // held again, given back and freed while this caller waited for the lock
    }
    HeldSlot& slot = heldSlot(id);
    if (!slot.in_use || slot.permanent.load(std::memory_order_relaxed) ||
        slot.holds.load(std::memory_order_relaxed) != 0) {
      return;  // freed, interned or held again since the last hold ended
    }
    if (slot.quota != nullptr) WireNameCharge::refund(*std::exchange(slot.quota, nullptr));
    if (!std::exchange(slot.given_back, true)) ++given_back_now_;
    if (!slot.idle) {
      slot.idle = true;
      idle_.push_back(id);
    }
    while (idle_.size() > kIdleHeldNames) evictIdleLocked();
  }

  // Frees the oldest idle name if nothing holds it again.
  void evictIdleLocked() {
    const uint32_t id = idle_.front();
    idle_.pop_front();
    HeldSlot& slot = heldSlot(id);
    slot.idle = false;
    if (!slot.permanent.load(std::memory_order_relaxed) &&
        slot.holds.load(std::memory_order_relaxed) == 0) {
      freeLocked(id);
    }
  }

  void freeLocked(uint32_t id) {
    HeldSlot& slot = heldSlot(id);
    held_ids_.erase(std::string_view(slot.name));
    std::string().swap(slot.name);
    slot.in_use = false;
    if (std::exchange(slot.given_back, false)) --given_back_now_;
    --held_;
    ++given_back_;
    const uint32_t index = id & ~Symbol::kHeldBit;
    const uint32_t chunk = index >> kChunkBits;
    if (--held_live_[chunk] == 0) {
      free_.erase(free_.lower_bound(chunk << kChunkBits),
                  free_.lower_bound((chunk + 1) << kChunkBits));
      held_chunks_[chunk].store(nullptr, std::memory_order_relaxed);
      held_owned_[chunk].reset();
    } else {
      free_.insert(index);
    }
    // Erasing never shrinks a hash map's buckets: after a flood, do.
    if (held_ids_.bucket_count() > 8 * (held_ids_.size() + kChunkSize)) held_ids_.rehash(0);
  }

  // The lowest free held id; nullopt when every held chunk is full.
  std::optional<uint32_t> allocateLocked() {
    uint32_t index = 0;
    if (!free_.empty()) {
      index = *free_.begin();
      free_.erase(free_.begin());
    } else {
      uint32_t chunk = 0;
      while (chunk < kChunks && held_owned_[chunk] != nullptr) ++chunk;
      if (chunk == kChunks) return std::nullopt;
      held_owned_[chunk] = std::make_unique<HeldSlot[]>(kChunkSize);
      held_chunks_[chunk].store(held_owned_[chunk].get(), std::memory_order_release);
      index = chunk << kChunkBits;
      for (uint32_t i = 1; i < kChunkSize; ++i) free_.insert(free_.end(), index + i);
    }
    ++held_live_[index >> kChunkBits];
    return Symbol::kHeldBit | index;
  }

  // A plain std::mutex with the rule in comments: bus/core is the plugin SDK
  // and includes nothing of the tree, so bus/base's annotated Mutex is not
  // available here. Everything below is guarded by mu_ but the chunk
  // pointers (atomic) and what HeldSlot says is lock-free.
  std::mutex mu_;
  NameMap ids_;       // permanent names, promoted held ones included
  NameMap held_ids_;  // held names not permanent, idle ones included
  uint32_t size_ = 0;
  uint32_t wire_budget_ = kDefaultWireNameBudget;
  uint32_t held_ = 0;          // entries of held_ids_, given back ones included
  uint64_t incarnations_ = 0;  // the last incarnation given to a held slot
  uint64_t wire_refused_ = 0;
  uint64_t given_back_ = 0;      // names freed since the start
  uint32_t given_back_now_ = 0;  // names in held_ids_ that nothing holds
  std::deque<uint32_t> idle_;
  std::set<uint32_t> free_;  // free slots of the held chunks allocated
  std::array<uint32_t, kChunks> held_live_{};
  std::array<std::atomic<std::string*>, kChunks> chunks_{};
  std::array<std::unique_ptr<std::string[]>, kChunks> owned_;
  std::array<std::atomic<HeldSlot*>, kChunks> held_chunks_{};
  std::array<std::unique_ptr<HeldSlot[]>, kChunks> held_owned_;
};

SymbolTable& table() {
  static SymbolTable* t = new SymbolTable();  // never destroyed: symbols outlive statics
  return *t;
}

}  // namespace

Symbol Symbol::intern(std::string_view name) { return Symbol(table().intern(name)); }
Symbol Symbol::find(std::string_view name) { return Symbol(table().find(name)); }
std::string_view Symbol::name() const { return table().name(id_); }

WireNameQuota::WireNameQuota(uint32_t limit, std::string setting,
                             std::shared_ptr<std::atomic<uint64_t>> refused,
                             std::shared_ptr<WireNameQuota> parent)
    : limit_(limit),
      setting_(std::move(setting)),
      refused_(std::move(refused)),
      parent_(std::move(parent)) {}

const WireNameQuota* WireNameQuota::spent() const {
  for (const WireNameQuota* q = this; q != nullptr; q = q->parent_.get()) {
    if (q->held() >= q->limit_) return q;
  }
  return nullptr;
}

NameHold& NameHold::operator=(NameHold&& other) noexcept {
  if (this != &other) {
    releaseHeldName(symbol_);
    symbol_ = std::exchange(other.symbol_, Symbol());
  }
  return *this;
}

Symbol NameHold::release() { return std::exchange(symbol_, Symbol()); }

void wire_names_detail::acquire(Symbol held) { table().acquire(held.id()); }
void wire_names_detail::release(Symbol held) { table().release(held.id()); }

std::optional<NameHold> holdWireName(std::string_view name, WireNameQuota* quota) {
  const std::optional<uint32_t> id = table().holdWire(name, quota);
  if (!id) return std::nullopt;
  return SymbolIds::adopt(*id);
}

uint64_t heldNameIncarnation(Symbol symbol) {
  return symbol.held() ? table().incarnation(symbol.id()) : 0;
}

void setWireNameBudget(uint32_t budget) { table().setWireBudget(budget); }

WireNameStats wireNameStats() { return table().wireStats(); }

std::string wireNameRefusal(std::string_view what, std::string_view name,
                            const WireNameQuota* quota) {
  constexpr size_t kShown = 64;  // the name is the client's: do not echo a megabyte of it
  std::string refused = std::string(what) + " '" + std::string(name.substr(0, kShown)) +
                        (name.size() > kShown ? "...'" : "'") + " refused: ";
  if (const WireNameQuota* spent = quota == nullptr ? nullptr : quota->spent()) {
    return refused + "names held per client (" + spent->setting() +
           "): " + std::to_string(spent->limit()) + " reached";
  }
  const WireNameStats stats = wireNameStats();
  return refused + "clients hold " + std::to_string(stats.held) +
         " distinct names, the budget of names held (" + std::to_string(stats.budget) +
         ") is spent";
}

}  // namespace cepbus
