#pragma once

// A budget on the symbols that input from clients may create.
//
// The symbol table (symbol.h) keeps every name forever and holds at most
// Symbol::kMaxSymbols of them; once full, every intern() throws, also those
// of a query being deployed. Event types and attribute names come from
// clients, so a client that sends millions of distinct property names would
// exhaust it for everyone. Decoders of client input (the JSON-lines codec,
// the AMQP mapping) therefore intern through internWireName(): a name the
// table already holds is returned as it is; a new one is interned only while
// the names created this way stay within the budget; beyond it the name is
// refused and counted, and the decoder refuses the event with an error that
// says so. Names from queries, descriptors and the bus itself are not
// counted and never refused.
//
// The budget is a process-wide safety cap; what keeps one client from
// spending it for all the others is its WireNameQuota: a decoder that knows
// its client (the AMQP listener knows the connection and its user) charges
// each new name to that client's quota, so a client that spent its share is
// refused while another still creates names. Names are not given back yet:
// a name stays interned, and charged to its quota, for the process's life.
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

// One client's share of the new names client input may create: at most
// `limit` of them, and at most what its parent (the quota of the client's
// user, shared by its connections) still allows. `setting` names the limit
// in refusals ("max-names"). Each refusal it makes is counted in `refused`
// too, which the owner of the quotas sums (e.g. over connections).
// Thread safety: charged under the symbol table's lock by internWireName();
// its counts may be read from any thread. Ownership: shares its parent and
// its refusal tally.
class CEPBUS_API WireNameQuota {
 public:
  WireNameQuota(uint32_t limit, std::string setting, std::shared_ptr<std::atomic<uint64_t>> refused,
                std::shared_ptr<WireNameQuota> parent = nullptr);

  uint32_t limit() const { return limit_; }
  const std::string& setting() const { return setting_; }
  // New names charged to it so far.
  uint32_t created() const { return created_.load(std::memory_order_relaxed); }

  // The quota of this chain (itself, then its parents) that is spent;
  // nullptr while every one has room.
  const WireNameQuota* spent() const;

 private:
  friend class WireNameCharge;

  const uint32_t limit_;
  const std::string setting_;
  const std::shared_ptr<std::atomic<uint64_t>> refused_;
  const std::shared_ptr<WireNameQuota> parent_;
  std::atomic<uint32_t> created_{0};
};

// The symbol of `name`; nullopt when it is new and the budget is spent, or
// `quota` (when given) is.
CEPBUS_API std::optional<Symbol> internWireName(std::string_view name,
                                                WireNameQuota* quota = nullptr);

// How many new names client input may create in this process (default
// kDefaultWireNameBudget). Lowering it below what was already created
// refuses every further new name; the names already created stay.
CEPBUS_API void setWireNameBudget(uint32_t budget);

struct CEPBUS_API WireNameStats {
  uint32_t budget = 0;
  uint32_t created = 0;  // new names interned through internWireName()
  uint64_t refused = 0;  // names refused because the budget was spent
};
CEPBUS_API WireNameStats wireNameStats();

// The error a decoder gives for a refused name: `what` says what it was
// ("attribute name", "event type").
// With `quota`: when it (or a parent) is spent, the refusal names its
// setting and value instead of the process-wide budget.
CEPBUS_API std::string wireNameRefusal(std::string_view what, std::string_view name,
                                       const WireNameQuota* quota = nullptr);

}  // namespace cepbus
