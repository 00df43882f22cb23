#pragma once

// Interned names: event types, attribute names, endpoint names.
//
// A Symbol is a 32-bit id into a process-wide table, so comparing two names
// or finding an attribute on the hot path never hashes a string. Interning
// (done at set-up, when a query or descriptor is compiled, and when an event
// is decoded) takes a lock; reading a symbol's name never does.
//
// Thread safety: every function is safe to call from any thread. Symbols are
// never freed; the table holds at most kMaxSymbols names.

#include <compare>
#include <cstdint>
#include <functional>
#include <string_view>

#include "bus/core/api.h"

namespace cepbus {

class CEPBUS_API Symbol {
 public:
  static constexpr uint32_t kMaxSymbols = 1u << 22;

  // The empty symbol, id 0, whose name is "".
  constexpr Symbol() = default;

  // Returns the symbol of `name`, creating it on first use.
  static Symbol intern(std::string_view name);
  // Returns the symbol of `name` if it was interned before, else the empty symbol.
  static Symbol find(std::string_view name);

  uint32_t id() const { return id_; }
  bool empty() const { return id_ == 0; }
  std::string_view name() const;

  friend constexpr bool operator==(Symbol a, Symbol b) { return a.id_ == b.id_; }
  friend constexpr auto operator<=>(Symbol a, Symbol b) { return a.id_ <=> b.id_; }

 private:
  explicit constexpr Symbol(uint32_t id) : id_(id) {}
  uint32_t id_ = 0;
};

}  // namespace cepbus

template <>
struct std::hash<cepbus::Symbol> {
  size_t operator()(cepbus::Symbol s) const noexcept { return s.id(); }
};
