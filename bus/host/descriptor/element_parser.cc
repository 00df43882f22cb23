#include "bus/host/descriptor/element_parser.h"

#include <string>
#include <utility>

namespace cepbus::descriptor {

Status ElementParsers::add(std::unique_ptr<ElementParser> parser) {
  if (find(parser->parent(), parser->tag()) != nullptr) {
    return Status::alreadyExists("a parser for <" + std::string(parser->tag()) + "> in <" +
                                 std::string(parser->parent()) + "> is registered already");
  }
  parsers_.push_back(std::move(parser));
  return Status::ok();
}

const ElementParser* ElementParsers::find(std::string_view parent, std::string_view tag) const {
  for (const auto& parser : parsers_) {
    if (parser->parent() == parent && parser->tag() == tag) return parser.get();
  }
  return nullptr;
}

std::vector<std::string_view> ElementParsers::tags(std::string_view parent) const {
  std::vector<std::string_view> out;
  for (const auto& parser : parsers_) {
    if (parser->parent() == parent) out.push_back(parser->tag());
  }
  return out;
}

}  // namespace cepbus::descriptor
