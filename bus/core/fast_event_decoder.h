#pragma once

// FastEventDecoder: the fast path of the JSON-lines codec (event_json.h).
//
// decodeEventReference() (nlohmann::json) defines what a line means and why a
// bad one is refused. This decoder reads the lines that make up nearly every
// events file — an object of the contract's fields with scalar attributes —
// with simdjson's on-demand parser, about ten times faster. Whenever it
// cannot vouch for giving the reference's answer (malformed or unusual JSON,
// a refused field, a duplicate key, a name the budget refuses, constituent
// events) it declines, and the caller asks the reference decoder, so both
// accepted events and error messages are the reference's by construction
// (tests/fuzz/event_json_fuzz.cc compares the two).
//
// Not thread-safe: one decoder per thread (or per reader).

#include <memory>
#include <optional>
#include <string_view>

#include "bus/core/event.h"

namespace cepbus {

class FastEventDecoder {
 public:
  FastEventDecoder();
  ~FastEventDecoder();
  FastEventDecoder(const FastEventDecoder&) = delete;
  FastEventDecoder& operator=(const FastEventDecoder&) = delete;

  // The event `line` holds, or nullopt when the reference decoder must
  // decide. `capacity` counts the readable bytes from line.data(): simdjson
  // reads up to kPadding bytes past the line's end (their content does not
  // matter), so capacity >= line.size() + kPadding.
  // `hold_new_names`: a name no query knows is held (wire_names.h) here;
  // false when the caller charges a client's quota, which only the
  // reference decoder does: such lines are declined.
  std::optional<EventPtr> decode(std::string_view line, size_t capacity,
                                 bool hold_new_names = true);

  static const size_t kPadding;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cepbus
