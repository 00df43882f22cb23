#pragma once

// Names from clients: held while in use, given back after, within budgets.
//
// Event types and attribute names come from clients, so a client sending
// millions of distinct names must not grow the bus for ever nor shut other
// clients out. Decoders of client input (the JSON-lines codec, the AMQP
// mapping) therefore take names through holdWireName(): a permanent name
// (one a query, descriptor or the bus interned) is returned as it is, free
// of charge; any other becomes a held name (symbol.h) that lives while the
// events carrying it do and is given back after. The decoder hands the hold
// to EventBuilder, the event keeps it, and the last holder to let go frees
// the name; the last kIdleHeldNames names given back are kept a while, so a
// client repeating a name no query knows does not re-create it per event.
// The fast JSON decoder's cache holds the last 4096 names it met, per
// decoder (fast_event_decoder.h): a bounded few more.
//
// Two limits bound what clients hold: the process-wide budget (a safety cap
// on names held; the idle ones come on top) and a WireNameQuota per client (the
// AMQP listener charges a connection and its user). A quota counts the names
// its client created and something still holds; a name given back is
// refunded to the quota it was charged to, so a client that leaves gets its
// share back once its events are gone, and nobody spends the budget for good.
// A name refused by either limit is counted, and the decoder refuses the
// event with an error that says which limit.
//
// Addresses from clients (a publishing link's target, the address of
// POST /api/events/ADDRESS) are held the same way: by the link or request
// that named them, and by every exchange addressed to one (SharedName, copied
// into queues, journal records and request tables), and given back after.
// A held id is reused once its name is freed; heldNameIncarnation() tells
// which name an id stood for, so a cache keyed by id (the router's route
// cache) does not take a reused id for the name it had before.
//
// Thread safety: every function is safe to call from any thread.

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "bus/core/api.h"
#include "bus/core/symbol.h"

namespace cepbus {

// A quarter of the table: clients can never take the rest from queries.
inline constexpr uint32_t kDefaultWireNameBudget = Symbol::kMaxSymbols / 4;

// One client's share of the names client input holds: at most `limit` names
// it created and something still holds, and at most what its parent (the
// quota of the client's user, shared by its connections) still allows. `setting` names the limit
// in refusals ("max-names"). Each refusal it makes is counted in `refused`
// too, which the owner of the quotas sums (e.g. over connections).
// Thread safety: charged and refunded under the symbol table's lock;
// its counts may be read from any thread. Ownership: shares its parent and
// its refusal tally; each name charged to it shares it too, so the quota
// outlives its client until the client's names are given back.
class CEPBUS_API WireNameQuota : public std::enable_shared_from_this<WireNameQuota> {
 public:
  WireNameQuota(uint32_t limit, std::string setting, std::shared_ptr<std::atomic<uint64_t>> refused,
                std::shared_ptr<WireNameQuota> parent = nullptr);

  uint32_t limit() const { return limit_; }
  const std::string& setting() const { return setting_; }
  // Names charged to it that are not given back yet.
  uint32_t held() const { return held_.load(std::memory_order_relaxed); }

  // The quota of this chain (itself, then its parents) that is spent;
  // nullptr while every one has room.
  const WireNameQuota* spent() const;

 private:
  friend class WireNameCharge;

  const uint32_t limit_;
  const std::string setting_;
  const std::shared_ptr<std::atomic<uint64_t>> refused_;
  const std::shared_ptr<WireNameQuota> parent_;
  std::atomic<uint32_t> held_{0};
};

namespace wire_names_detail {
CEPBUS_API void acquire(Symbol held);
CEPBUS_API void release(Symbol held);
}  // namespace wire_names_detail

// The raw counting behind NameHold and Event: each does nothing for a
// permanent symbol (inline, so a permanent name costs a test of its id).
// acquireHeldName() needs a reference held meanwhile.
inline void acquireHeldName(Symbol symbol) {
  if (symbol.held()) wire_names_detail::acquire(symbol);
}
inline void releaseHeldName(Symbol symbol) {
  if (symbol.held()) wire_names_detail::release(symbol);
}

// One reference to a held name, or a permanent symbol (which needs none).
// Moving hands the reference on; destroying it lets go.
// Thread safety: a value; one thread at a time.
class CEPBUS_API NameHold {
 public:
  NameHold() = default;
  // Another reference to `symbol`, which the caller must keep alive meanwhile
  // (it holds it, or an event it holds carries it).
  static NameHold of(Symbol symbol) {
    acquireHeldName(symbol);
    return NameHold(symbol);
  }
  ~NameHold() { releaseHeldName(symbol_); }
  NameHold(NameHold&& other) noexcept : symbol_(other.symbol_) { other.symbol_ = Symbol(); }
  NameHold& operator=(NameHold&& other) noexcept;
  NameHold(const NameHold&) = delete;
  NameHold& operator=(const NameHold&) = delete;

  Symbol symbol() const { return symbol_; }
  // Gives up the reference to the caller, who must end it with
  // releaseHeldName() (EventBuilder does, through its event).
  Symbol release();

 private:
  friend class SymbolIds;
  explicit NameHold(Symbol adopted) : symbol_(adopted) {}
  Symbol symbol_;
};

// How many names given back are kept for reuse before they are freed.
inline constexpr uint32_t kIdleHeldNames = 1024;

// A hold on `name`: its permanent symbol, or a held name created or found
// (charged to `quota`, when given, unless something holds it already);
// nullopt when it is new and the budget or `quota` is spent.
CEPBUS_API std::optional<NameHold> holdWireName(std::string_view name,
                                                WireNameQuota* quota = nullptr);

// A symbol that holds its name, for values that are copied about (an
// exchange's address, queued, journaled, kept for a request): each copy
// holds a held name too, so it lives while any copy does. It reads as its
// Symbol. A permanent symbol costs a test of its id per copy.
// Thread safety: a value; one thread at a time.
class CEPBUS_API SharedName {
 public:
  SharedName() = default;
  // Another hold on `symbol`, which the caller must keep alive meanwhile.
  SharedName(Symbol symbol) : symbol_(symbol) {  // NOLINT(google-explicit-constructor)
    acquireHeldName(symbol_);
  }
  // Takes over `hold`.
  explicit SharedName(NameHold hold) : symbol_(hold.release()) {}
  SharedName(const SharedName& other) : SharedName(other.symbol_) {}
  SharedName(SharedName&& other) noexcept : symbol_(other.symbol_) { other.symbol_ = Symbol(); }
  SharedName& operator=(const SharedName& other) {
    if (this != &other) *this = SharedName(other);
    return *this;
  }
  SharedName& operator=(SharedName&& other) noexcept {
    if (this != &other) {
      releaseHeldName(symbol_);
      symbol_ = other.symbol_;
      other.symbol_ = Symbol();
    }
    return *this;
  }
  ~SharedName() { releaseHeldName(symbol_); }

  operator Symbol() const { return symbol_; }  // NOLINT(google-explicit-constructor)
  Symbol symbol() const { return symbol_; }
  uint32_t id() const { return symbol_.id(); }
  bool empty() const { return symbol_.empty(); }
  bool held() const { return symbol_.held(); }
  std::string_view name() const { return symbol_.name(); }

  friend bool operator==(const SharedName& a, const SharedName& b) {
    return a.symbol_ == b.symbol_;
  }
  friend bool operator==(const SharedName& a, Symbol b) { return a.symbol_ == b; }

 private:
  Symbol symbol_;
};

// Which name the held id of `symbol` stands for: ids are reused once their
// names are freed, each time with a new incarnation (never 0, never seen
// before in this process); 0 for a permanent symbol. `symbol` must be held
// meanwhile. Lock-free.
CEPBUS_API uint64_t heldNameIncarnation(Symbol symbol);

// How many names from client input the process may hold at once (default
// kDefaultWireNameBudget). Lowering it below what is held refuses every
// further new name until enough are given back; held names stay.
CEPBUS_API void setWireNameBudget(uint32_t budget);

struct CEPBUS_API WireNameStats {
  uint32_t budget = 0;
  // Names from clients something holds now: what the budget counts.
  uint32_t held = 0;
  uint32_t idle = 0;        // besides: given back, kept for reuse (kIdleHeldNames at most)
  uint64_t refused = 0;     // names refused because the budget was spent
  uint64_t given_back = 0;  // held names freed since the start
};
CEPBUS_API WireNameStats wireNameStats();

// The error a decoder gives for a refused name: `what` says what it was
// ("attribute name", "event type").
// With `quota`: when it (or a parent) is spent, the refusal names its
// setting and value instead of the process-wide budget.
CEPBUS_API std::string wireNameRefusal(std::string_view what, std::string_view name,
                                       const WireNameQuota* quota = nullptr);

}  // namespace cepbus
