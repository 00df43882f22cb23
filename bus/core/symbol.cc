#include "bus/core/symbol.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "bus/core/wire_names.h"

namespace cepbus {
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

  // Like intern(), but a new name counts against the wire budget (wire_names.h):
  // nullopt once it is spent.
  std::optional<uint32_t> internWire(std::string_view name) {
    std::lock_guard lock(mu_);
    if (auto it = ids_.find(name); it != ids_.end()) return it->second;
    if (wire_created_ >= wire_budget_) {
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

std::optional<Symbol> internWireName(std::string_view name) {
  const std::optional<uint32_t> id = table().internWire(name);
  if (!id) return std::nullopt;
  return Symbol::find(name);  // the id is only constructible inside Symbol
}

void setWireNameBudget(uint32_t budget) { table().setWireBudget(budget); }

WireNameStats wireNameStats() { return table().wireStats(); }

std::string wireNameRefusal(std::string_view what, std::string_view name) {
  const WireNameStats stats = wireNameStats();
  constexpr size_t kShown = 64;  // the name is the client's: do not echo a megabyte of it
  return std::string(what) + " '" + std::string(name.substr(0, kShown)) +
         (name.size() > kShown ? "...'" : "'") + " refused: clients already created " +
         std::to_string(stats.created) + " distinct names, the budget of new names (" +
         std::to_string(stats.budget) + ") is spent";
}
Symbol Symbol::find(std::string_view name) { return Symbol(table().find(name)); }
std::string_view Symbol::name() const { return table().name(id_); }

}  // namespace cepbus
