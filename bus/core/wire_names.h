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
// Thread safety: every function is safe to call from any thread.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "bus/core/api.h"
#include "bus/core/symbol.h"

namespace cepbus {

// A quarter of the table: clients can never take the rest from queries.
inline constexpr uint32_t kDefaultWireNameBudget = Symbol::kMaxSymbols / 4;

// The symbol of `name`; nullopt when it is new and the budget is spent.
CEPBUS_API std::optional<Symbol> internWireName(std::string_view name);

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
CEPBUS_API std::string wireNameRefusal(std::string_view what, std::string_view name);

}  // namespace cepbus
