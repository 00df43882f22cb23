#pragma once

// Topic addresses and subscription patterns, as in AMQP 0-9-1 topic exchanges
// (RabbitMQ):
//
// - An address is a non-empty list of non-empty segments separated by '.':
//   "stocks.nyse.ibm". It may not contain '*' or '#'.
// - A pattern is a list of segments where a segment "*" matches exactly one
//   segment and a segment "#" matches zero or more segments; other segments
//   match themselves. '#' may appear anywhere, also in the middle and more
//   than once ("a.#.b" matches "a.b", "a.x.b", "a.x.y.b"); "#" alone matches
//   every address. '*' and '#' are special only as whole segments, and a
//   segment mixing them with other characters ("st*") is refused rather than
//   taken literally, because it is almost always a typo.
// - Consecutive "#" segments mean the same as one ("#.#" == "#").

#include <string_view>
#include <vector>

#include "bus/core/status.h"

namespace cepbus::router {

inline constexpr std::string_view kStar = "*";
inline constexpr std::string_view kHash = "#";

// OK, or InvalidArgument saying what is wrong with `address`.
Status validateAddress(std::string_view address);
// OK, or InvalidArgument saying what is wrong with `pattern`.
Status validatePattern(std::string_view pattern);
// True when a (valid) pattern has a "*" or "#" segment.
bool hasWildcard(std::string_view pattern);

// Splits on '.'; "a..b" gives an empty middle segment (validation refuses it).
std::vector<std::string_view> splitTopic(std::string_view topic);
// Splits a valid pattern and collapses consecutive "#" segments.
std::vector<std::string_view> normalizedPattern(std::string_view pattern);

// The reference matcher: true when `pattern` matches `address` (both valid).
// Dynamic programming over segments, O(|pattern| * |address|); the trie in
// TopicTrie is what the router uses, this one is for policies and tests.
bool topicMatches(std::string_view pattern, std::string_view address);

}  // namespace cepbus::router
