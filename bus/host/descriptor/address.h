#pragma once

// The syntax of bus addresses (topics), shared by descriptors and the router.
//
// An address is a dot-separated list of non-empty segments made of letters,
// digits, '_' and '-': `stocks.ticks`, `plant-3.line_2.alarms`. Where an
// address selects other addresses (subscriptions, routes) a segment may also
// be a wildcard: `*` matches exactly one segment, `#` any number of segments
// (zero included): `stocks.*`, `stocks.#`, `#`.
//
// Thread safety: pure functions.

#include <optional>
#include <string>
#include <string_view>

namespace cepbus::descriptor {

enum class AddressUse {
  kConcrete,  // where events are published: no wildcards
  kPattern,   // where addresses are selected: '*' and '#' segments allowed
};

// Why `address` is not a valid address for `use` ("segment 2 is empty"),
// or nullopt when it is valid.
std::optional<std::string> addressError(std::string_view address, AddressUse use);

inline bool isValidAddress(std::string_view address, AddressUse use) {
  return !addressError(address, use).has_value();
}

// True for a host name or address that stays on this machine (localhost,
// 127.0.0.0/8, ::1): where a password may travel without TLS.
inline bool isLoopbackHost(std::string_view host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.substr(0, 4) == "127.";
}

}  // namespace cepbus::descriptor
