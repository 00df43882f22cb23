#include "bus/host/descriptor/address.h"

namespace cepbus::descriptor {
namespace {

bool isSegmentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

std::string printable(char c) {
  if (c == ' ') return "a space";
  if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
    return "a non-printable or non-ASCII character";
  }
  return std::string("'") + c + "'";
}

}  // namespace

std::optional<std::string> addressError(std::string_view address, AddressUse use) {
  if (address.empty()) return "it is empty";
  size_t index = 1;
  size_t begin = 0;
  while (true) {
    const size_t end = address.find('.', begin);
    const std::string_view segment =
        address.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
    const std::string where = "segment " + std::to_string(index);
    if (segment.empty()) return where + " is empty";
    if (segment == "*" || segment == "#") {
      if (use == AddressUse::kConcrete) {
        return where + " is the wildcard '" + std::string(segment) +
               "', allowed only in subscriptions and routes";
      }
    } else {
      for (char c : segment) {
        if (c == '*' || c == '#') {
          return where + " \"" + std::string(segment) + "\" mixes the wildcard '" +
                 std::string(1, c) + "' with other characters; a wildcard is a whole segment";
        }
        if (!isSegmentChar(c)) {
          return where + " \"" + std::string(segment) + "\" contains " + printable(c) +
                 "; segments are made of letters, digits, '_' and '-'";
        }
      }
    }
    if (end == std::string_view::npos) return std::nullopt;
    begin = end + 1;
    ++index;
  }
}

}  // namespace cepbus::descriptor
