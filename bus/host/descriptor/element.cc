#include "bus/host/descriptor/element.h"

#include <tinyxml2.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "bus/base/spelling.h"
#include "bus/core/pattern/parser.h"
#include "bus/host/descriptor/document_reader.h"
#include "bus/host/descriptor/text.h"

namespace cepbus::descriptor {
namespace {

using tinyxml2::XMLAttribute;
using tinyxml2::XMLElement;
using tinyxml2::XMLNode;

std::string describeElement(const XMLElement* e) {
  std::string out = "<" + std::string(e->Name());
  for (const char* key : {"name", "address"}) {
    if (const char* value = e->Attribute(key)) {
      out += " " + std::string(key) + "=" + quote(value);
      break;
    }
  }
  return out + ">";
}

void reportUnknownChild(DocumentReader& reader, const XMLElement* parent, const XMLElement* child,
                        const std::vector<std::string_view>& allowed) {
  std::string message =
      "unknown element <" + std::string(child->Name()) + "> in " + describeElement(parent);
  if (allowed.empty()) {
    message += "; <" + std::string(parent->Name()) + "> has no child elements";
  } else if (auto guess = closest(child->Name(), allowed)) {
    message += " (did you mean <" + std::string(*guess) + ">?)";
  } else {
    message += "; expected " + listOf(allowed, "<", ">");
  }
  reader.report(child->GetLineNum(), message);
}

}  // namespace

std::string_view Element::tag() const { return element_->Name(); }

int Element::line() const { return element_->GetLineNum(); }

Location Element::where() const { return Location{reader_.file(), line()}; }

std::string Element::describe() const { return describeElement(element_); }

bool Element::has(const char* attribute) const {
  return element_->FindAttribute(attribute) != nullptr;
}

const char* Element::raw(const char* attribute) const { return element_->Attribute(attribute); }

int Element::attributeLine(const char* attribute) const {
  const XMLAttribute* a = element_->FindAttribute(attribute);
  return a != nullptr ? a->GetLineNum() : line();
}

void Element::report(std::string_view message) const {
  reader_.report(line(), describe() + ": " + std::string(message));
}

void Element::reportAttribute(const char* attribute, std::string_view message) const {
  reader_.report(attributeLine(attribute),
                 describe() + ": attribute " + quote(attribute) + " " + std::string(message));
}

void Element::reportAt(int at, std::string message) const {
  reader_.report(at, std::move(message));
}

void Element::allowAttributes(std::initializer_list<std::string_view> allowed) const {
  const std::vector<std::string_view> names(allowed);
  for (const XMLAttribute* a = element_->FirstAttribute(); a != nullptr; a = a->Next()) {
    const std::string_view attribute = a->Name();
    if (std::find(names.begin(), names.end(), attribute) != names.end()) continue;
    std::string message = describe() + ": unknown attribute " + quote(attribute);
    if (names.empty()) {
      message += "; <" + std::string(tag()) + "> takes no attributes";
    } else if (auto guess = closest(attribute, names)) {
      message += " (did you mean " + quote(*guess) + "?)";
    } else {
      message += "; expected one of " + listOf(names, "\"", "\"");
    }
    reader_.report(a->GetLineNum(), message);
  }
}

void Element::children(const std::vector<ChildSpec>& allowed,
                       const std::function<void(const Element&)>& visit) const {
  std::vector<std::string_view> names;
  for (const ChildSpec& c : allowed) names.push_back(c.name);
  std::map<std::string_view, int> seen;
  for (const XMLNode* n = element_->FirstChild(); n != nullptr; n = n->NextSibling()) {
    if (n->ToText() != nullptr) {
      reader_.report(n->GetLineNum(), describe() + ": unexpected text " + quote(trim(n->Value())));
      continue;
    }
    const XMLElement* child = n->ToElement();
    if (child == nullptr) continue;  // comments, processing instructions
    const std::string_view child_tag = child->Name();
    auto spec = std::find_if(allowed.begin(), allowed.end(),
                             [&](const ChildSpec& c) { return c.name == child_tag; });
    if (spec == allowed.end()) {
      reportUnknownChild(reader_, element_, child, names);
      continue;
    }
    if (spec->once) {
      auto [it, inserted] = seen.emplace(spec->name, child->GetLineNum());
      if (!inserted) {
        reader_.report(child->GetLineNum(), "<" + std::string(child_tag) + "> appears twice in " +
                                                describe() + " (first at line " +
                                                std::to_string(it->second) + ")");
        continue;
      }
    }
    visit(Element(reader_, child));
  }
}

void Element::noChildren() const {
  children({}, [](const Element&) {});
}

std::optional<std::pair<std::string, int>> Element::text() const {
  std::string content;
  int at = 0;
  for (const XMLNode* n = element_->FirstChild(); n != nullptr; n = n->NextSibling()) {
    if (const XMLElement* child = n->ToElement()) {
      reportUnknownChild(reader_, element_, child, {});
      continue;
    }
    const tinyxml2::XMLText* t = n->ToText();
    if (t == nullptr) continue;
    const std::string_view value = t->Value();
    if (at == 0 && !trim(value).empty()) {
      // TinyXML2 puts a text node on the line of its first non-blank
      // character, but a CDATA section on the line of "<![CDATA[".
      at = t->GetLineNum();
      if (t->CData()) {
        const std::string_view lead = value.substr(0, trim(value).data() - value.data());
        at += static_cast<int>(std::count(lead.begin(), lead.end(), '\n'));
      }
    }
    content += value;
  }
  const std::string_view trimmed = trim(content);
  if (trimmed.empty()) {
    report("must hold text");
    return std::nullopt;
  }
  return std::make_pair(std::string(trimmed), at);
}

void Element::unique(NameScope& scope, std::string_view what, const std::string& name) const {
  auto [it, inserted] = scope.emplace(name, line());
  if (!inserted) {
    report("duplicate " + std::string(what) + " " + quote(name) + " (first at line " +
           std::to_string(it->second) + ")");
  }
}

std::optional<std::string> Element::string(const char* attribute, bool required) const {
  const XMLAttribute* a = element_->FindAttribute(attribute);
  if (a == nullptr) {
    if (required) report("missing required attribute " + quote(attribute));
    return std::nullopt;
  }
  if (trim(a->Value()).empty()) {
    reportAttribute(attribute, "must not be empty");
    return std::nullopt;
  }
  return std::string(a->Value());
}

std::optional<std::string> Element::name(const char* attribute, bool required) const {
  auto value = string(attribute, required);
  if (value && !isName(*value)) {
    reportAttribute(attribute, "must be a name made of letters, digits, '_', '-' and '.', got " +
                                   quote(*value));
    return std::nullopt;
  }
  return value;
}

std::optional<uint64_t> Element::integer(const char* attribute, uint64_t min, uint64_t max) const {
  const XMLAttribute* a = element_->FindAttribute(attribute);
  if (a == nullptr) return std::nullopt;
  const std::string_view value_text = a->Value();
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(value_text.data(), value_text.data() + value_text.size(), value);
  if (value_text.empty() || ec != std::errc() || end != value_text.data() + value_text.size()) {
    reportAttribute(attribute, std::string("must be a ") +
                                   (min == 0 ? "non-negative" : "positive") + " integer, got " +
                                   quote(value_text));
    return std::nullopt;
  }
  if (value < min || value > max) {
    reportAttribute(attribute, "must be between " + std::to_string(min) + " and " +
                                   std::to_string(max) + ", got " + quote(value_text));
    return std::nullopt;
  }
  return value;
}

std::optional<double> Element::number(const char* attribute, double min, bool min_exclusive,
                                      double max) const {
  const XMLAttribute* a = element_->FindAttribute(attribute);
  if (a == nullptr) return std::nullopt;
  const std::string_view value_text = a->Value();
  double value = 0;
  auto [end, ec] = std::from_chars(value_text.data(), value_text.data() + value_text.size(), value);
  const bool parsed = !value_text.empty() && ec == std::errc() &&
                      end == value_text.data() + value_text.size() && std::isfinite(value);
  if (!parsed || value < min || (min_exclusive && value == min) || value > max) {
    reportAttribute(attribute,
                    "must be a number " +
                        (min_exclusive ? "greater than " + formatNumber(min) + " and at most "
                                       : "between " + formatNumber(min) + " and ") +
                        formatNumber(max) + ", got " + quote(value_text));
    return std::nullopt;
  }
  return value;
}

std::optional<bool> Element::boolean(const char* attribute) const {
  const XMLAttribute* a = element_->FindAttribute(attribute);
  if (a == nullptr) return std::nullopt;
  const std::string_view value = a->Value();
  if (value == "true") return true;
  if (value == "false") return false;
  reportAttribute(attribute, "must be true or false, got " + quote(value));
  return std::nullopt;
}

std::optional<size_t> Element::choice(const char* attribute,
                                      const std::vector<std::string_view>& names) const {
  const XMLAttribute* a = element_->FindAttribute(attribute);
  if (a == nullptr) return std::nullopt;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == a->Value()) return i;
  }
  reportAttribute(attribute,
                  "must be one of " + listOf(names, "", "") + "; got " + quote(a->Value()));
  return std::nullopt;
}

std::optional<std::string> Element::address(const char* attribute, AddressUse use,
                                            bool required) const {
  auto value = string(attribute, required);
  if (!value) return std::nullopt;
  if (auto why = addressError(*value, use)) {
    reportAttribute(attribute, "is not a valid address " + quote(*value) + ": " + *why);
    return std::nullopt;
  }
  return value;
}

std::vector<std::string> Element::nameList(const char* attribute) const {
  const auto list = string(attribute, false);
  if (!list) return {};
  std::vector<std::string> out;
  size_t begin = 0;
  while (true) {
    const size_t end = std::min(list->find(',', begin), list->size());
    const std::string item(trim(std::string_view(*list).substr(begin, end - begin)));
    if (!isName(item)) {
      reportAttribute(attribute,
                      "must list attribute names separated by commas, got " + quote(*list));
      return {};
    }
    out.push_back(item);
    if (end == list->size()) break;
    begin = end + 1;
  }
  return out;
}

std::optional<std::string> Element::envName(const char* attribute, std::string_view hint) const {
  auto value = string(attribute, false);
  if (!value) return std::nullopt;
  if (!isEnvName(*value)) {
    reportAttribute(attribute, "must be an environment variable name" + std::string(hint) +
                                   ", got " + quote(*value));
    return std::nullopt;
  }
  return value;
}

void Element::hostAndPort(std::string& host, uint16_t& port) const {
  if (auto h = string("host", false)) {
    if (isHost(*h)) {
      host = *h;
    } else {
      reportAttribute("host", "must be a host name or an IP address, got " + quote(*h));
    }
  }
  if (auto p = integer("port", 0, kMaxPort)) port = static_cast<uint16_t>(*p);
}

std::filesystem::path Element::path(std::string_view path) const { return reader_.resolve(path); }

std::optional<Param> Element::param() const {
  allowAttributes({"name", "value"});
  noChildren();
  Param p;
  p.where = where();
  auto param_name = name("name", true);
  const char* value = raw("value");
  if (value == nullptr) report("missing required attribute \"value\"");
  if (!param_name || value == nullptr) return std::nullopt;
  p.name = *param_name;
  p.value = value;
  return p;
}

std::optional<pattern::TimeUnit> Element::timeUnit(const char* attribute) const {
  auto unit = string(attribute, false);
  if (!unit) return std::nullopt;
  auto ts_unit = pattern::tsUnitNamed(*unit);
  if (!ts_unit) {
    reportAttribute(attribute,
                    "must be us, ms or s (ts in microseconds, milliseconds or seconds since the "
                    "epoch); got " +
                        quote(*unit));
  }
  return ts_unit;
}

std::optional<QuerySpec> Element::query(QueryInput input) const {
  if (input == QueryInput::kAddresses) {
    allowAttributes({"name", "engine", "input", "output", "time-unit"});
  } else {
    allowAttributes({"name", "engine", "output", "time-unit"});
  }
  QuerySpec q;
  q.where = where();
  auto query_name = name("name", true);
  q.engine = name("engine", true).value_or("");
  if (auto unit = timeUnit("time-unit")) q.ts_unit = *unit;
  if (input == QueryInput::kAddresses) {
    if (auto list = string("input", true)) q.inputs = inputs(*list);
  }
  q.output = address("output", AddressUse::kConcrete, true).value_or("");
  NameScope options;
  bool has_text = false;
  children({{"option"}, {"text", true}}, [&](const Element& child) {
    if (child.tag() == "option") {
      auto p = child.param();
      if (!p) return;
      child.unique(options, "option", p->name);
      q.options.push_back(std::move(*p));
      return;
    }
    has_text = true;
    child.allowAttributes({});
    if (auto content = child.text()) {
      q.text = std::move(content->first);
      q.text_where = Location{reader_.file(), content->second};
    }
  });
  if (!has_text) report("missing required element <text> holding the query");
  q.base_dir = reader_.baseDir();
  if (!query_name) return std::nullopt;
  q.name = *query_name;
  return q;
}

std::vector<std::string> Element::inputs(std::string_view list) const {
  std::vector<std::string> out;
  size_t begin = 0;
  while (true) {
    const size_t end = std::min(list.find(',', begin), list.size());
    const std::string_view item = trim(list.substr(begin, end - begin));
    if (item.empty()) {
      reportAttribute("input",
                      "has an empty item in " + quote(list) + "; separate addresses by commas");
    } else if (auto why = addressError(item, AddressUse::kConcrete)) {
      reportAttribute("input", "holds an invalid address " + quote(item) + ": " + *why);
    } else if (std::find(out.begin(), out.end(), item) != out.end()) {
      reportAttribute("input", "lists " + quote(item) + " twice");
    } else {
      out.emplace_back(item);
    }
    if (end == list.size()) break;
    begin = end + 1;
  }
  return out;
}

}  // namespace cepbus::descriptor
