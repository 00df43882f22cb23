#pragma once

// Element: one element of a deployment descriptor as the code that reads it
// sees it — the descriptor parser for the elements the bus itself owns
// (stages, routes, service assemblies, ...), and the ElementParser a service
// registers for an element it owns (element_parser.h: the AMQP listener's
// <amqp>, the admin listener's <http>, the cluster's <cluster>).
//
// Every reader of a descriptor reports problems the same way: each with the
// file and line it sits on and what was expected, and it goes on, so one run
// finds every error (`cepbus validate` lists them all). An accessor that finds
// a problem reports it and returns nothing; the caller keeps its default and
// reads on.
//
//   quickstart.xml:12: <stage name="dispatch">: attribute "capacity" must be a
//   positive integer, got "-3"
//
// Thread safety: an Element belongs to the parse that made it (one thread);
// it is valid only during the ElementParser::parse() call or element function
// it is given to.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bus/host/descriptor/address.h"
#include "bus/host/descriptor/descriptor.h"

namespace tinyxml2 {
class XMLElement;
}

namespace cepbus::descriptor {

class DocumentReader;

// An allowed child element; `once` ones may appear at most once.
struct ChildSpec {
  std::string_view name;
  bool once = false;
};

// Names already used in one scope, with the line of their first use.
using NameScope = std::map<std::string, int, std::less<>>;

// A CEP service's query names its input addresses; a cluster's query reads
// its partition and has none.
enum class QueryInput : uint8_t { kAddresses, kNone };

// Bounds shared by the elements that take them.
inline constexpr uint64_t kMaxCapacity = uint64_t{1} << 30;
inline constexpr uint64_t kMaxPort = 65535;
// AMQP link credit is a 32-bit count; a window beyond this buys nothing.
inline constexpr uint64_t kMaxCreditWindow = 1000000;
inline constexpr uint64_t kMaxTimeoutMs = uint64_t{24} * 3600 * 1000;  // a day

class Element {
 public:
  Element(DocumentReader& reader, const tinyxml2::XMLElement* element)
      : reader_(reader), element_(element) {}

  std::string_view tag() const;
  int line() const;
  Location where() const;
  // `<stage name="dispatch">`: the element, named by its identifying
  // attribute when it has one, as a reader finds it in the file.
  std::string describe() const;
  bool has(const char* attribute) const;
  // The attribute as written; nullptr when absent.
  const char* raw(const char* attribute) const;
  // The line of the attribute; the element's when it is absent.
  int attributeLine(const char* attribute) const;

  // ---- reporting ------------------------------------------------------
  // "<describe()>: message", at the element's line.
  void report(std::string_view message) const;
  // "<describe()>: attribute "name" message", at the attribute's line.
  void reportAttribute(const char* attribute, std::string_view message) const;
  // `message` as it is, at `line` of the document.
  void reportAt(int line, std::string message) const;

  // ---- structure ------------------------------------------------------
  // Reports every attribute not in `allowed`, suggesting the closest one.
  void allowAttributes(std::initializer_list<std::string_view> allowed) const;
  // Visits the allowed child elements in document order; reports unknown
  // ones (suggesting the closest), repeats of `once` ones and stray text.
  void children(const std::vector<ChildSpec>& allowed,
                const std::function<void(const Element&)>& visit) const;
  void noChildren() const;
  // The content of an element that holds text only (comments aside),
  // trimmed, and the line its first character is on.
  std::optional<std::pair<std::string, int>> text() const;
  // Reports `name` when `scope` already holds it ("duplicate <what> ...").
  void unique(NameScope& scope, std::string_view what, const std::string& name) const;

  // ---- attribute values -----------------------------------------------
  // The value; nullopt, after reporting, when it is required and missing or
  // when it is empty.
  std::optional<std::string> string(const char* attribute, bool required) const;
  // A name of letters, digits, '_', '-' and '.' (names appear in metrics
  // and admin URLs).
  std::optional<std::string> name(const char* attribute, bool required) const;
  // An unsigned integer in [min, max]; `min` is 0 or 1.
  std::optional<uint64_t> integer(const char* attribute, uint64_t min, uint64_t max) const;
  // A number in [min, max], or in (min, max] when `min_exclusive`.
  std::optional<double> number(const char* attribute, double min, bool min_exclusive,
                               double max) const;
  std::optional<bool> boolean(const char* attribute) const;
  // One of `values`' names, as its value.
  template <typename Enum, size_t N>
  std::optional<Enum> enumeration(const char* attribute,
                                  const std::pair<std::string_view, Enum> (&values)[N]) const {
    std::vector<std::string_view> names;
    for (const auto& [text, value] : values) names.push_back(text);
    const std::optional<size_t> at = choice(attribute, names);
    if (!at) return std::nullopt;
    return values[*at].second;
  }
  std::optional<std::string> address(const char* attribute, AddressUse use, bool required) const;
  // The unit of a stream's ts: "us", "ms" or "s".
  std::optional<pattern::TimeUnit> timeUnit(const char* attribute) const;
  // A comma-separated list of names ("symbol,venue").
  std::vector<std::string> nameList(const char* attribute) const;
  // The variable name of a "*-env" attribute (letters, digits and '_', not
  // starting with a digit); `hint` follows "must be an environment variable
  // name" in the message.
  std::optional<std::string> envName(const char* attribute, std::string_view hint = {}) const;
  // Attributes "host" and "port", into `host` and `port` when present and valid.
  void hostAndPort(std::string& host, uint16_t& port) const;
  // `path` resolved against the descriptor's folder (as it is when absolute
  // or when the text has no folder).
  std::filesystem::path path(std::string_view path) const;

  // ---- shared elements ------------------------------------------------
  // A <query> element; nullopt when it has no usable name (what else is wrong
  // is reported and the rest read).
  std::optional<QuerySpec> query(QueryInput input) const;
  // A <param> or an <option>: a name and a value that may be empty.
  std::optional<Param> param() const;

 private:
  // The index of the attribute's value in `names`; reports any other value.
  std::optional<size_t> choice(const char* attribute,
                               const std::vector<std::string_view>& names) const;
  std::vector<std::string> inputs(std::string_view list) const;

  DocumentReader& reader_;
  const tinyxml2::XMLElement* const element_;
};

// `"text"` for a message, escaped and cut to a readable length.
std::string quote(std::string_view text);

}  // namespace cepbus::descriptor
