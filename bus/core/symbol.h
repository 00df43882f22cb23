#pragma once

// Interned names: event types, attribute names, endpoint names.
//
// A Symbol is a 32-bit id into a process-wide table, so comparing two names
// or finding an attribute on the hot path never hashes a string. Interning
// (done at set-up, when a query or descriptor is compiled, and when an event
// is decoded) takes a lock; reading a symbol's name never does.
//
// Two kinds of names share the id space:
// - Permanent names (intern()): from queries, descriptors, the bus itself.
//   They live for the process's life; their ids are below kMaxSymbols.
// - Held names (holdWireName(), wire_names.h): a name a client sent that no
//   query, descriptor or route knows. It lives while something holds it (an
//   event that carries it, a NameHold) and is given back after: its id has
//   kHeldBit set and is reused for another name once given back. So a client
//   flooding new names grows the table only by what is queued at a time.
//   Holding costs an atomic count per held name per event; events whose
//   names are all permanent (every name a query matches on) pay nothing.
//   A held name that something interns later (a query deployed while events
//   carrying it are queued) becomes permanent in place, keeping its id, so
//   Event::find() by the query's symbol finds it on the queued events too.
//   find() does not return a held name that is not permanent: a caller could
//   not keep it alive.
//
// Thread safety: every function is safe to call from any thread. A held
// symbol's name() may be read only while something holds it.

#include <compare>
#include <cstdint>
#include <functional>
#include <string_view>

#include "bus/core/api.h"

namespace cepbus {

class CEPBUS_API Symbol {
 public:
  static constexpr uint32_t kMaxSymbols = 1u << 22;
  // Set in the id of a held name (see above).
  static constexpr uint32_t kHeldBit = 1u << 31;

  // The empty symbol, id 0, whose name is "".
  constexpr Symbol() = default;

  // Returns the symbol of `name`, creating it on first use.
  static Symbol intern(std::string_view name);
  // Returns the symbol of `name` if it was interned before, else the empty
  // symbol (also for a name only held, see above).
  static Symbol find(std::string_view name);

  uint32_t id() const { return id_; }
  bool empty() const { return id_ == 0; }
  // A name from the wire that is given back when nothing holds it any more
  // (or one that was, and has been interned since).
  bool held() const { return (id_ & kHeldBit) != 0; }
  std::string_view name() const;

  friend constexpr bool operator==(Symbol a, Symbol b) { return a.id_ == b.id_; }
  friend constexpr auto operator<=>(Symbol a, Symbol b) { return a.id_ <=> b.id_; }

 private:
  friend class SymbolIds;
  explicit constexpr Symbol(uint32_t id) : id_(id) {}
  uint32_t id_ = 0;
};

}  // namespace cepbus

template <>
struct std::hash<cepbus::Symbol> {
  size_t operator()(cepbus::Symbol s) const noexcept { return s.id(); }
};
