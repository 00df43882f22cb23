#pragma once

// UTF-8 validation for text that arrives from outside the JSON decoder.
//
// Every string an event carries (type, attribute names and string values) is
// valid UTF-8: the JSON codec cannot encode anything else (nlohmann::json
// throws on it), and the JSON decoder only produces UTF-8. Decoders of other
// wire formats (AMQP strings and symbols) check with this function and refuse
// what is not, instead of letting a bad byte become an exception later, on
// whichever thread first encodes the event.
//
// Thread safety: a pure function.

#include <string_view>

namespace cepbus {

// True when `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF).
bool isValidUtf8(std::string_view text);

}  // namespace cepbus
