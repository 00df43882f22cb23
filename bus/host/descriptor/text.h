#pragma once

// Text helpers of the descriptor readers: trimming, and the name and host
// alphabets ("did you mean" is bus/base/spelling.h). Private to
// bus/host/descriptor/ (quote() is public, in element.h).

#include <string>
#include <string_view>
#include <vector>

namespace cepbus::descriptor {

std::string_view trim(std::string_view s);
// Names of stages, plugins, assemblies, units, queries, params: they appear
// in metrics and admin URLs, so they stay within a conservative alphabet.
bool isName(std::string_view s);
bool isEnvName(std::string_view s);
// A DNS name (RFC 1123 labels), a dotted IPv4 address or an IPv6 literal,
// optionally in brackets.
bool isHost(std::string_view host);
// "a, b, c" with each item wrapped as `open item close`.
// 0.75 -> "0.75", 1 -> "1".
std::string formatNumber(double v);
std::string listOf(const std::vector<std::string_view>& items, std::string_view open,
                   std::string_view close);

}  // namespace cepbus::descriptor
