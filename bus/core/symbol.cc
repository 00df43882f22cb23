#include "bus/core/symbol.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "bus/core/wire_names.h"

namespace cepbus {

// What the symbol table does to a quota, under its lock.
class WireNameCharge {
 public:
  // Charges a new name to the quota and its parents; false (and the
  // refusal counted by the quota that is spent) when one has no room.
  static bool tryCharge(WireNameQuota& quota) {
    if (const WireNameQuota* spent = quota.spent()) {
      spent->refused_->fetch_add(1, std::memory_order_relaxed);
      return false;
    }
    for (WireNameQuota* q = &quota; q != nullptr; q = q->parent_.get()) {
      q->created_.fetch_add(1, std::memory_order_relaxed);
    }
    return true;
  }
  // Takes back a charge whose name was not created after all.
  static void refund(WireNameQuota& quota) {
    for (WireNameQuota* q = &quota; q != nullptr; q = q->parent_.get()) {
      q->created_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
};

namespace {

// Names live in fixed-size chunks that never move, so name() can read them
// without a lock: a reader only dereferences ids it was handed, and an id is
// published (release) after its string is written.
class SymbolTable {
 public:
  static constexpr uint32_t kChunkBits = 12;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kChunks = Symbol::kMaxSymbols / kChunkSize;

  SymbolTable() { insertLocked(""); }

  uint32_t intern(std::string_view name) {
    std::lock_guard lock(mu_);
    if (auto it = ids_.find(name); it != ids_.end()) return it->second;
    return insertLocked(name);
  }

  // Like intern(), but a new name counts against the wire budget (wire_names.h)
  // and `quota`: nullopt once either is spent. The quota is charged under
  // the lock, so two connections of one user never both take its last name.
  std::optional<uint32_t> internWire(std::string_view name, WireNameQuota* quota) {
    std::lock_guard lock(mu_);
    if (auto it = ids_.find(name); it != ids_.end()) return it->second;
    if (quota != nullptr && !WireNameCharge::tryCharge(*quota)) return std::nullopt;
    if (wire_created_ >= wire_budget_) {
      if (quota != nullptr) WireNameCharge::refund(*quota);
      ++wire_refused_;
      return std::nullopt;
    }
    const uint32_t id = insertLocked(name);
    ++wire_created_;
    return id;
  }

  void setWireBudget(uint32_t budget) {
    std::lock_guard lock(mu_);
    wire_budget_ = budget;
  }

  WireNameStats wireStats() {
    std::lock_guard lock(mu_);
    return WireNameStats{wire_budget_, wire_created_, wire_refused_};
  }

  uint32_t find(std::string_view name) {
    std::lock_guard lock(mu_);
    auto it = ids_.find(name);
    return it == ids_.end() ? 0 : it->second;
  }

  std::string_view name(uint32_t id) const {
    const std::string* chunk = chunks_[id >> kChunkBits].load(std::memory_order_acquire);
    return chunk[id & (kChunkSize - 1)];
  }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

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

  // A plain std::mutex with the rule in comments: bus/core is the plugin SDK
  // and includes nothing of the tree, so bus/base's annotated Mutex is not
  // available here.
  std::mutex mu_;
  std::unordered_map<std::string_view, uint32_t, Hash, std::equal_to<>> ids_;
  uint32_t size_ = 0;
  uint32_t wire_budget_ = kDefaultWireNameBudget;  // guarded by mu_, as are the two below
  uint32_t wire_created_ = 0;
  uint64_t wire_refused_ = 0;
  std::array<std::atomic<std::string*>, kChunks> chunks_{};
  std::array<std::unique_ptr<std::string[]>, kChunks> owned_;
};

SymbolTable& table() {
  static SymbolTable* t = new SymbolTable();  // never destroyed: symbols outlive statics
  return *t;
}

}  // namespace

Symbol Symbol::intern(std::string_view name) { return Symbol(table().intern(name)); }

WireNameQuota::WireNameQuota(uint32_t limit, std::string setting,
                             std::shared_ptr<std::atomic<uint64_t>> refused,
                             std::shared_ptr<WireNameQuota> parent)
    : limit_(limit),
      setting_(std::move(setting)),
      refused_(std::move(refused)),
      parent_(std::move(parent)) {}

const WireNameQuota* WireNameQuota::spent() const {
  for (const WireNameQuota* q = this; q != nullptr; q = q->parent_.get()) {
    if (q->created() >= q->limit_) return q;
  }
  return nullptr;
}

std::optional<Symbol> internWireName(std::string_view name, WireNameQuota* quota) {
  const std::optional<uint32_t> id = table().internWire(name, quota);
  if (!id) return std::nullopt;
  return Symbol::find(name);  // the id is only constructible inside Symbol
}

void setWireNameBudget(uint32_t budget) { table().setWireBudget(budget); }

WireNameStats wireNameStats() { return table().wireStats(); }

std::string wireNameRefusal(std::string_view what, std::string_view name,
                            const WireNameQuota* quota) {
  constexpr size_t kShown = 64;  // the name is the client's: do not echo a megabyte of it
  std::string refused = std::string(what) + " '" + std::string(name.substr(0, kShown)) +
                        (name.size() > kShown ? "...'" : "'") + " refused: ";
  if (const WireNameQuota* spent = quota == nullptr ? nullptr : quota->spent()) {
    return refused + "new names per client (" + spent->setting() +
           "): " + std::to_string(spent->limit()) + " reached";
  }
  const WireNameStats stats = wireNameStats();
  return refused + "clients already created " + std::to_string(stats.created) +
         " distinct names, the budget of new names (" + std::to_string(stats.budget) + ") is spent";
}
Symbol Symbol::find(std::string_view name) { return Symbol(table().find(name)); }
std::string_view Symbol::name() const { return table().name(id_); }

}  // namespace cepbus
