#pragma once

// An engine's own counters, beside what every engine reports
// (DetectorState): what a detector exports for the format kCountersFormat
// of Detector::exportModel() — one "name value" line per counter, the value
// a non-negative integer — and what the host reads back from it to show in
// /api/queries and /metrics. An engine without counters of its own refuses
// the format, as it does any format it does not know.
//
// Thread safety: constants and a pure function, safe from any thread.

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bus/core/status.h"

namespace cepbus::plugin {

inline constexpr const char* kCountersFormat = "counters";

using EngineCounters = std::vector<std::pair<std::string, uint64_t>>;

// The counters of an export in kCountersFormat, in its order;
// InvalidArgument naming the line that is not "name value".
inline Result<EngineCounters> parseEngineCounters(std::string_view text) {
  EngineCounters out;
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    const size_t space = line.find(' ');
    uint64_t value = 0;
    const char* digits = space == std::string_view::npos ? nullptr : line.data() + space + 1;
    const auto [end, ec] = digits == nullptr
                               ? std::from_chars_result{nullptr, std::errc::invalid_argument}
                               : std::from_chars(digits, line.data() + line.size(), value);
    if (space == 0 || ec != std::errc() || end != line.data() + line.size()) {
      return Status::invalidArgument("engine counters, line " + std::to_string(line_no) +
                                     ": expected 'name value', found '" + std::string(line) + "'");
    }
    out.emplace_back(std::string(line.substr(0, space)), value);
  }
  return out;
}

}  // namespace cepbus::plugin
