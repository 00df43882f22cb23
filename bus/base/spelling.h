#pragma once

// The "did you mean" suggestion every reader of names shares: the descriptor
// reader for stage, element and attribute names, the detection host for the
// event types and attributes a query names.
//
// Thread safety: pure functions, safe from any thread.

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace cepbus {

// The number of single-character insertions, deletions and substitutions
// that turn `a` into `b` (Levenshtein).
size_t editDistance(std::string_view a, std::string_view b);

// The candidate a typo most likely meant, if one is close enough: at most
// two edits, and fewer than half of `word`'s length.
std::optional<std::string_view> closest(std::string_view word,
                                        const std::vector<std::string_view>& candidates);

}  // namespace cepbus
