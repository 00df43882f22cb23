#include "bus/host/descriptor/text.h"

#include <algorithm>

#include "bus/host/descriptor/element.h"

namespace cepbus::descriptor {
namespace {

// Long values are cut in messages so one bad attribute cannot flood a report.
constexpr size_t kMaxQuotedLength = 60;

bool isBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool isAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

}  // namespace

std::string_view trim(std::string_view s) {
  while (!s.empty() && isBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && isBlank(s.back())) s.remove_suffix(1);
  return s;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  const bool cut = s.size() > kMaxQuotedLength;
  for (char c : cut ? s.substr(0, kMaxQuotedLength - 3) : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  if (cut) out += "...";
  return out + "\"";
}

bool isName(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return isAlnum(c) || c == '_' || c == '-' || c == '.';
  });
}

bool isEnvName(std::string_view s) {
  return !s.empty() && !(s[0] >= '0' && s[0] <= '9') &&
         std::all_of(s.begin(), s.end(), [](char c) { return isAlnum(c) || c == '_'; });
}

bool isHost(std::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  if (host.find(':') != std::string_view::npos) {
    if (host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return !host.empty() && std::all_of(host.begin(), host.end(), [](char c) {
      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
             c == ':' || c == '.';
    });
  }
  bool all_numeric = true;
  size_t labels = 0;
  size_t begin = 0;
  while (true) {
    const size_t end = std::min(host.find('.', begin), host.size());
    const std::string_view label = host.substr(begin, end - begin);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!isAlnum(c) && c != '-') return false;
      if (!(c >= '0' && c <= '9')) all_numeric = false;
    }
    if (all_numeric && (label.size() > 3 || std::stoi(std::string(label)) > 255)) return false;
    ++labels;
    if (end == host.size()) break;
    begin = end + 1;
  }
  return !all_numeric || labels == 4;
}

std::string listOf(const std::vector<std::string_view>& items, std::string_view open,
                   std::string_view close) {
  std::string out;
  for (std::string_view item : items) {
    if (!out.empty()) out += ", ";
    out.append(open).append(item).append(close);
  }
  return out;
}

std::string formatNumber(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}

}  // namespace cepbus::descriptor
