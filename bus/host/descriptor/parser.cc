// The descriptor parser walks the TinyXML2 tree once, element by element.
// Every element function checks its own attributes and children, reports
// each problem with the line it sits on and goes on, so one run finds every
// error. References between elements (a route naming a stage) are recorded
// while walking and resolved once the whole document has been read.

#include "bus/host/descriptor/parser.h"

#include <tinyxml2.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <map>
#include <optional>
#include <utility>

#include "bus/host/descriptor/address.h"

namespace cepbus::descriptor {
namespace {

using tinyxml2::XMLAttribute;
using tinyxml2::XMLElement;
using tinyxml2::XMLNode;

constexpr uint64_t kMaxCapacity = uint64_t{1} << 30;
constexpr uint64_t kMaxThreads = 1024;
constexpr uint64_t kMaxPort = 65535;
// AMQP link credit is a 32-bit count; a window beyond this buys nothing.
constexpr uint64_t kMaxCreditWindow = 1000000;
// Container threads of the AMQP listener: far more than cores buys nothing.
constexpr uint64_t kMaxAmqpThreads = 256;
constexpr uint64_t kMaxTimeoutMs = uint64_t{24} * 3600 * 1000;  // a day
constexpr uint64_t kMaxPartitions = 1024;
constexpr uint64_t kMaxSlack = uint64_t{1} << 40;
constexpr uint64_t kMaxCommitDelayUs = 1000000;  // a second
constexpr uint64_t kMaxRetryDelayMs = 3600000;   // an hour
// Long values are cut in messages so one bad attribute cannot flood a report.
constexpr size_t kMaxQuotedLength = 60;

bool isBlank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

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

bool isAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// Names of stages, plugins, assemblies, units, queries, params: they appear
// in metrics and admin URLs, so they stay within a conservative alphabet.
bool isName(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return isAlnum(c) || c == '_' || c == '-' || c == '.';
  });
}

bool isEnvName(std::string_view s) {
  return !s.empty() && !(s[0] >= '0' && s[0] <= '9') &&
         std::all_of(s.begin(), s.end(), [](char c) { return isAlnum(c) || c == '_'; });
}

// A DNS name (RFC 1123 labels), a dotted IPv4 address or an IPv6 literal,
// optionally in brackets.
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

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// The candidate a typo most likely meant, if one is close enough.
std::optional<std::string_view> closest(std::string_view word,
                                        const std::vector<std::string_view>& candidates) {
  std::optional<std::string_view> best;
  size_t best_distance = std::min<size_t>(2, word.size() / 2) + 1;
  for (std::string_view c : candidates) {
    const size_t d = editDistance(word, c);
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

// "a, b, c" with each item wrapped as `open item close`.
std::string listOf(const std::vector<std::string_view>& items, std::string_view open,
                   std::string_view close) {
  std::string out;
  for (std::string_view item : items) {
    if (!out.empty()) out += ", ";
    out.append(open).append(item).append(close);
  }
  return out;
}

std::string xmlErrorMessage(const tinyxml2::XMLDocument& doc) {
  // ErrorStr() is "Error=... ErrorID=... Line number=N[: detail]"; TinyXML2
  // puts the offending element's name in the detail as "XMLElement name=b".
  std::string element;
  const std::string_view full = doc.ErrorStr();
  constexpr std::string_view kElementTag = "XMLElement name=";
  if (const size_t at = full.find(kElementTag); at != std::string_view::npos) {
    element = "<" + std::string(trim(full.substr(at + kElementTag.size()))) + ">";
  }
  const std::string in_element = element.empty() ? "" : " in " + element;
  switch (doc.ErrorID()) {
    case tinyxml2::XML_ERROR_MISMATCHED_ELEMENT:
      return "element " + (element.empty() ? std::string("here") : element) +
             " is not closed by its matching end tag";
    case tinyxml2::XML_ERROR_PARSING_ATTRIBUTE:
      return "malformed or repeated attribute" + in_element +
             " (values must be quoted; an attribute may appear once)";
    case tinyxml2::XML_ERROR_PARSING_ELEMENT:
      return "malformed element" + in_element +
             " (a literal '<' or '&' in text must be written &lt; or &amp;, or put in "
             "<![CDATA[...]]>)";
    case tinyxml2::XML_ERROR_PARSING_TEXT:
      return "malformed text" + in_element;
    case tinyxml2::XML_ERROR_PARSING_CDATA:
      return "unterminated CDATA section";
    case tinyxml2::XML_ERROR_PARSING_COMMENT:
      return "unterminated comment";
    case tinyxml2::XML_ERROR_PARSING_DECLARATION:
      return "malformed declaration";
    case tinyxml2::XML_ERROR_PARSING_UNKNOWN:
      return "malformed markup";
    case tinyxml2::XML_ERROR_EMPTY_DOCUMENT:
      return "the document is empty";
    case tinyxml2::XML_ERROR_PARSING:
      return "the document ends before every element is closed, or holds malformed markup";
    case tinyxml2::XML_ELEMENT_DEPTH_EXCEEDED:
      return "elements are nested too deeply";
    default:
      return doc.ErrorName();
  }
}

constexpr std::pair<std::string_view, LogLevel> kLogLevels[] = {
    {"trace", LogLevel::kTrace},
    {"debug", LogLevel::kDebug},
    {"information", LogLevel::kInformation},
    {"notice", LogLevel::kNotice},
    {"warning", LogLevel::kWarning},
    {"error", LogLevel::kError}};
constexpr std::pair<std::string_view, FlowKind> kFlows[] = {
    {"st", FlowKind::kSt}, {"seda", FlowKind::kSeda}, {"reliable", FlowKind::kReliable}};
constexpr std::pair<std::string_view, Qos> kQos[] = {{"best-effort", Qos::kBestEffort},
                                                     {"reliable", Qos::kReliable}};

// 0.75 -> "0.75", 1 -> "1".
std::string formatNumber(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (s.back() == '.') s.pop_back();
  return s;
}

// An allowed child element; `once` ones may appear at most once.
struct ChildSpec {
  std::string_view name;
  bool once = false;
};

// Names already used in one scope, with the line of their first use.
using NameScope = std::map<std::string, int, std::less<>>;

// A reference to a stage, resolved once every stage has been read.
struct StageRef {
  int line;
  std::string context;  // `<route address="x">: attribute "stage"`
  std::string stage;
};

class Parser {
 public:
  Parser(std::string_view file, std::filesystem::path base_dir)
      : file_(file), base_dir_(std::move(base_dir)) {}

  std::optional<Descriptor> parseDocument(std::string_view text) {
    tinyxml2::XMLDocument doc;
    const XMLElement* root = load(doc, text, "cepbus");
    if (root == nullptr) return std::nullopt;
    Descriptor d;
    cepbus(root, d);
    resolveReferences(d);
    return d;
  }

  std::optional<ServiceAssembly> parseFragment(std::string_view text) {
    tinyxml2::XMLDocument doc;
    const XMLElement* root = load(doc, text, "service-assembly");
    if (root == nullptr) return std::nullopt;
    ServiceAssembly a;
    assembly(root, a);
    return a;
  }

  // Every error in line order (stable, so errors of one line keep the order
  // they were found in).
  std::vector<DescriptorError> takeErrors() {
    std::stable_sort(
        errors_.begin(), errors_.end(),
        [](const DescriptorError& a, const DescriptorError& b) { return a.line < b.line; });
    return std::move(errors_);
  }

 private:
  // ---- reporting -------------------------------------------------------

  void report(int line, std::string message) {
    errors_.push_back(DescriptorError{file_, line, std::move(message)});
  }
  void report(const XMLElement* e, const std::string& message) {
    report(e->GetLineNum(), describe(e) + ": " + message);
  }
  void reportAttr(const XMLElement* e, const XMLAttribute* a, const std::string& message) {
    report(a->GetLineNum(), attrContext(e, a->Name()) + " " + message);
  }

  Location at(const XMLElement* e) const { return Location{file_, e->GetLineNum()}; }
  Location at(const XMLAttribute* a) const { return Location{file_, a->GetLineNum()}; }

  // `<stage name="dispatch">`: the element, named by its identifying
  // attribute when it has one, as a reader finds it in the file.
  static std::string describe(const XMLElement* e) {
    std::string out = "<" + std::string(e->Name());
    for (const char* key : {"name", "address"}) {
      if (const char* value = e->Attribute(key)) {
        out += " " + std::string(key) + "=" + quote(value);
        break;
      }
    }
    return out + ">";
  }
  static std::string attrContext(const XMLElement* e, std::string_view attr) {
    return describe(e) + ": attribute " + quote(attr);
  }

  // ---- document and structure --------------------------------------------

  const XMLElement* load(tinyxml2::XMLDocument& doc, std::string_view text,
                         std::string_view root_name) {
    doc.Parse(text.data(), text.size());
    if (doc.Error()) {
      report(doc.ErrorLineNum(), "malformed XML: " + xmlErrorMessage(doc));
      return nullptr;
    }
    const XMLElement* root = doc.RootElement();
    if (root == nullptr) {
      report(0, "no root element; expected <" + std::string(root_name) + ">");
      return nullptr;
    }
    for (const XMLNode* n = doc.FirstChild(); n != nullptr; n = n->NextSibling()) {
      if (n == root) continue;
      if (const XMLElement* extra = n->ToElement()) {
        report(extra->GetLineNum(), "second root element <" + std::string(extra->Name()) +
                                        ">; a document has one root element <" +
                                        std::string(root_name) + ">");
      } else if (n->ToText() != nullptr) {
        report(n->GetLineNum(), "text outside the root element: " + quote(trim(n->Value())));
      }
    }
    if (root->Name() != root_name) {
      std::string message =
          "the root element must be <" + std::string(root_name) + ">, got <" + root->Name() + ">";
      if (root_name == "cepbus" && std::string_view(root->Name()) == "service-assembly") {
        message += " (a lone <service-assembly> is a fragment, deployed through the admin API)";
      }
      report(root->GetLineNum(), message);
      return nullptr;
    }
    return root;
  }

  void checkAttributes(const XMLElement* e, const std::vector<std::string_view>& allowed) {
    for (const XMLAttribute* a = e->FirstAttribute(); a != nullptr; a = a->Next()) {
      const std::string_view name = a->Name();
      if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) continue;
      std::string message = describe(e) + ": unknown attribute " + quote(name);
      if (allowed.empty()) {
        message += "; <" + std::string(e->Name()) + "> takes no attributes";
      } else if (auto guess = closest(name, allowed)) {
        message += " (did you mean " + quote(*guess) + "?)";
      } else {
        message += "; expected one of " + listOf(allowed, "\"", "\"");
      }
      report(a->GetLineNum(), message);
    }
  }

  // Visits the allowed child elements in document order; reports unknown
  // ones, repeats of `once` ones and stray text.
  template <typename Visit>
  void children(const XMLElement* e, std::initializer_list<ChildSpec> allowed, Visit&& visit) {
    std::vector<std::string_view> names;
    for (const ChildSpec& c : allowed) names.push_back(c.name);
    std::map<std::string_view, int> seen;
    for (const XMLNode* n = e->FirstChild(); n != nullptr; n = n->NextSibling()) {
      if (n->ToText() != nullptr) {
        report(n->GetLineNum(), describe(e) + ": unexpected text " + quote(trim(n->Value())));
        continue;
      }
      const XMLElement* child = n->ToElement();
      if (child == nullptr) continue;  // comments, processing instructions
      const std::string_view name = child->Name();
      auto spec = std::find_if(allowed.begin(), allowed.end(),
                               [&](const ChildSpec& c) { return c.name == name; });
      if (spec == allowed.end()) {
        reportUnknownElement(e, child, names);
        continue;
      }
      if (spec->once) {
        auto [it, inserted] = seen.emplace(spec->name, child->GetLineNum());
        if (!inserted) {
          report(child->GetLineNum(), "<" + std::string(name) + "> appears twice in " +
                                          describe(e) + " (first at line " +
                                          std::to_string(it->second) + ")");
          continue;
        }
      }
      visit(child);
    }
  }

  void reportUnknownElement(const XMLElement* parent, const XMLElement* child,
                            const std::vector<std::string_view>& allowed) {
    std::string message =
        "unknown element <" + std::string(child->Name()) + "> in " + describe(parent);
    if (allowed.empty()) {
      message += "; <" + std::string(parent->Name()) + "> has no child elements";
    } else if (auto guess = closest(child->Name(), allowed)) {
      message += " (did you mean <" + std::string(*guess) + ">?)";
    } else {
      message += "; expected " + listOf(allowed, "<", ">");
    }
    report(child->GetLineNum(), message);
  }

  void noChildren(const XMLElement* e) {
    children(e, {}, [](const XMLElement*) {});
  }

  // The content of an element that holds text only (comments aside),
  // trimmed, and the line its first character is on.
  std::optional<std::pair<std::string, int>> textContent(const XMLElement* e) {
    std::string raw;
    int line = 0;
    for (const XMLNode* n = e->FirstChild(); n != nullptr; n = n->NextSibling()) {
      if (const XMLElement* child = n->ToElement()) {
        reportUnknownElement(e, child, {});
        continue;
      }
      const tinyxml2::XMLText* t = n->ToText();
      if (t == nullptr) continue;
      const std::string_view value = t->Value();
      if (line == 0 && !trim(value).empty()) {
        // TinyXML2 puts a text node on the line of its first non-blank
        // character, but a CDATA section on the line of "<![CDATA[".
        line = t->GetLineNum();
        if (t->CData()) {
          const std::string_view lead = value.substr(0, trim(value).data() - value.data());
          line += static_cast<int>(std::count(lead.begin(), lead.end(), '\n'));
        }
      }
      raw += value;
    }
    const std::string_view text = trim(raw);
    if (text.empty()) {
      report(e, "must hold text");
      return std::nullopt;
    }
    return std::make_pair(std::string(text), line);
  }

  // ---- attributes ------------------------------------------------------

  // The attribute's value; nullopt, after reporting, when it is required and
  // missing or when it is empty.
  std::optional<std::string> string(const XMLElement* e, const char* name, bool required) {
    const XMLAttribute* a = e->FindAttribute(name);
    if (a == nullptr) {
      if (required) report(e, "missing required attribute " + quote(name));
      return std::nullopt;
    }
    if (trim(a->Value()).empty()) {
      reportAttr(e, a, "must not be empty");
      return std::nullopt;
    }
    return std::string(a->Value());
  }

  std::optional<std::string> name(const XMLElement* e, const char* attr, bool required) {
    auto value = string(e, attr, required);
    if (value && !isName(*value)) {
      reportAttr(e, e->FindAttribute(attr),
                 "must be a name made of letters, digits, '_', '-' and '.', got " + quote(*value));
      return std::nullopt;
    }
    return value;
  }

  // An unsigned integer in [min, max]; `min` is 0 or 1.
  std::optional<uint64_t> integer(const XMLElement* e, const char* attr, uint64_t min,
                                  uint64_t max) {
    const XMLAttribute* a = e->FindAttribute(attr);
    if (a == nullptr) return std::nullopt;
    const std::string_view text = a->Value();
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
      reportAttr(e, a,
                 std::string("must be a ") + (min == 0 ? "non-negative" : "positive") +
                     " integer, got " + quote(text));
      return std::nullopt;
    }
    if (value < min || value > max) {
      reportAttr(e, a,
                 "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                     ", got " + quote(text));
      return std::nullopt;
    }
    return value;
  }

  // A number in [min, max], or in (min, max] when `min_exclusive`.
  std::optional<double> number(const XMLElement* e, const char* attr, double min,
                               bool min_exclusive, double max) {
    const XMLAttribute* a = e->FindAttribute(attr);
    if (a == nullptr) return std::nullopt;
    const std::string_view text = a->Value();
    double value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    const bool parsed = !text.empty() && ec == std::errc() && end == text.data() + text.size() &&
                        std::isfinite(value);
    if (!parsed || value < min || (min_exclusive && value == min) || value > max) {
      reportAttr(e, a,
                 "must be a number " +
                     (min_exclusive ? "greater than " + formatNumber(min) + " and at most "
                                    : "between " + formatNumber(min) + " and ") +
                     formatNumber(max) + ", got " + quote(text));
      return std::nullopt;
    }
    return value;
  }

  std::optional<bool> boolean(const XMLElement* e, const char* attr) {
    const XMLAttribute* a = e->FindAttribute(attr);
    if (a == nullptr) return std::nullopt;
    const std::string_view text = a->Value();
    if (text == "true") return true;
    if (text == "false") return false;
    reportAttr(e, a, "must be true or false, got " + quote(text));
    return std::nullopt;
  }

  template <typename Enum, size_t N>
  std::optional<Enum> enumeration(const XMLElement* e, const char* attr,
                                  const std::pair<std::string_view, Enum> (&values)[N]) {
    const XMLAttribute* a = e->FindAttribute(attr);
    if (a == nullptr) return std::nullopt;
    std::vector<std::string_view> names;
    for (const auto& [text, value] : values) {
      if (text == a->Value()) return value;
      names.push_back(text);
    }
    reportAttr(e, a, "must be one of " + listOf(names, "", "") + "; got " + quote(a->Value()));
    return std::nullopt;
  }

  std::optional<std::string> address(const XMLElement* e, const char* attr, AddressUse use,
                                     bool required) {
    auto value = string(e, attr, required);
    if (!value) return std::nullopt;
    if (auto why = addressError(*value, use)) {
      reportAttr(e, e->FindAttribute(attr),
                 "is not a valid address " + quote(*value) + ": " + *why);
      return std::nullopt;
    }
    return value;
  }

  // Reports `name` when the scope already holds it.
  void unique(NameScope& scope, const XMLElement* e, std::string_view what,
              const std::string& name) {
    auto [it, inserted] = scope.emplace(name, e->GetLineNum());
    if (!inserted) {
      report(e, "duplicate " + std::string(what) + " " + quote(name) + " (first at line " +
                    std::to_string(it->second) + ")");
    }
  }

  std::filesystem::path resolve(std::string_view path) const {
    std::filesystem::path p(path);
    if (p.is_absolute() || base_dir_.empty()) return p;
    return base_dir_ / p;
  }

  // ---- elements --------------------------------------------------------

  void cepbus(const XMLElement* e, Descriptor& d) {
    checkAttributes(e, {"name"});
    d.name = name(e, "name", true).value_or("");
    d.source = file_;
    d.base_dir = base_dir_;
    d.where = at(e);
    d.logging.where = d.plugins.where = d.routes.where = Location{file_, 0};
    NameScope assemblies;
    children(e,
             {{"logging", true},
              {"journal", true},
              {"listeners", true},
              {"stages", true},
              {"plugins", true},
              {"routes", true},
              {"cluster", true},
              {"service-assembly"}},
             [&](const XMLElement* child) {
               const std::string_view tag = child->Name();
               if (tag == "logging") {
                 logging(child, d.logging);
               } else if (tag == "journal") {
                 journal(child, d.journal);
               } else if (tag == "listeners") {
                 listeners(child, d.listeners);
               } else if (tag == "stages") {
                 stages(child, d.stages);
               } else if (tag == "plugins") {
                 plugins(child, d.plugins);
               } else if (tag == "routes") {
                 routes(child, d.routes);
               } else if (tag == "cluster") {
                 cluster(child, d.cluster.emplace());
               } else {
                 ServiceAssembly a;
                 if (!assembly(child, a)) return;
                 unique(assemblies, child, "service assembly", a.name);
                 d.assemblies.push_back(std::move(a));
               }
             });
  }

  void logging(const XMLElement* e, LoggingConfig& out) {
    checkAttributes(e, {"level"});
    noChildren(e);
    out.where = at(e);
    if (e->FindAttribute("level") == nullptr) report(e, "missing required attribute \"level\"");
    out.level = enumeration(e, "level", kLogLevels).value_or(out.level);
  }

  void journal(const XMLElement* e, std::optional<JournalConfig>& out) {
    checkAttributes(e, {"path", "commit-delay-us", "retry-delay-ms", "max-retry-delay-ms"});
    noChildren(e);
    out.emplace();
    out->where = at(e);
    if (auto path = string(e, "path", true)) out->path = resolve(*path);
    out->commit_delay_us = integer(e, "commit-delay-us", 0, kMaxCommitDelayUs);
    out->retry_delay_ms = integer(e, "retry-delay-ms", 1, kMaxRetryDelayMs);
    out->max_retry_delay_ms = integer(e, "max-retry-delay-ms", 1, kMaxRetryDelayMs);
    if (out->retry_delay_ms && out->max_retry_delay_ms &&
        *out->retry_delay_ms > *out->max_retry_delay_ms) {
      report(e,
             "retry-delay-ms=" + std::to_string(*out->retry_delay_ms) +
                 " is longer than max-retry-delay-ms=" + std::to_string(*out->max_retry_delay_ms));
    }
  }

  void cluster(const XMLElement* e, ClusterSpec& c) {
    checkAttributes(e, {"name", "node", "partitions", "key", "user", "password-env", "heartbeat",
                        "idle-timeout", "max-unsettled", "input", "retention", "slack"});
    c.where = at(e);
    c.name = name(e, "name", true).value_or("");
    c.node = name(e, "node", true).value_or("");
    if (e->FindAttribute("partitions") == nullptr) {
      report(e, "missing required attribute \"partitions\"");
    }
    c.partitions = static_cast<uint32_t>(integer(e, "partitions", 1, kMaxPartitions).value_or(0));
    if (auto key = string(e, "key", true)) c.key = nameList(e, "key", *key);
    if (auto user = name(e, "user", false)) c.user = *user;
    if (auto env = string(e, "password-env", false)) {
      if (isEnvName(*env)) {
        c.password_env = *env;
      } else {
        reportAttr(e, e->FindAttribute("password-env"),
                   "must be an environment variable name, got " + quote(*env));
      }
    }
    if (c.password_env.empty() && c.user != "guest" &&
        e->FindAttribute("password-env") == nullptr) {
      report(e, "user " + quote(c.user) +
                    " needs \"password-env\" naming the variable that holds its password");
    }
    c.heartbeat_ms = integer(e, "heartbeat", 1, kMaxTimeoutMs).value_or(c.heartbeat_ms);
    c.idle_timeout_ms = integer(e, "idle-timeout", 1, kMaxTimeoutMs).value_or(c.idle_timeout_ms);
    if (c.idle_timeout_ms < 2 * c.heartbeat_ms) {
      report(e, "\"idle-timeout\" (" + std::to_string(c.idle_timeout_ms) +
                    " ms) must be at least twice \"heartbeat\" (" + std::to_string(c.heartbeat_ms) +
                    " ms), or one late heartbeat would make a live node look gone");
    }
    c.max_unsettled = static_cast<uint32_t>(
        integer(e, "max-unsettled", 1, kMaxCreditWindow).value_or(c.max_unsettled));
    clusterInput(e, c);
    c.slack = static_cast<int64_t>(integer(e, "slack", 0, kMaxSlack).value_or(0));
    NameScope queries;
    children(e, {{"broker"}, {"tls", true}, {"query"}}, [&](const XMLElement* child) {
      const std::string_view kind = child->Name();
      if (kind == "broker") {
        checkAttributes(child, {"host", "port", "management-port"});
        noChildren(child);
        ClusterBroker& b = c.brokers.emplace_back();
        b.where = at(child);
        hostAndPort(child, b.host, b.port);
        if (auto port = integer(child, "management-port", 1, kMaxPort)) {
          b.management_port = static_cast<uint16_t>(*port);
        }
        return;
      }
      if (kind == "tls") {
        checkAttributes(child, {"ca", "peer-name"});
        noChildren(child);
        ClusterTls& tls = c.tls.emplace();
        tls.where = at(child);
        if (auto ca = string(child, "ca", true)) tls.ca = resolve(*ca);
        if (auto peer = string(child, "peer-name", false)) tls.peer_name = *peer;
        return;
      }
      QuerySpec q;
      if (!query(child, q, QueryInput::kNone)) return;
      unique(queries, child, "query", q.name);
      q.base_dir = base_dir_;
      c.queries.push_back(std::move(q));
    });
    if (c.brokers.empty()) report(e, "needs at least one <broker host=... port=.../>");
    // SASL PLAIN sends the password as it is: only inside TLS or this machine.
    for (const ClusterBroker& b : c.brokers) {
      if (c.tls || isLoopbackHost(b.host)) continue;
      report(b.where.line, "<broker> host " + quote(b.host) +
                               " is not a loopback host: add <tls ca=...> to the <cluster> "
                               "(SASL PLAIN would send the password in clear)");
    }
    if (c.queries.empty()) report(e, "needs at least one <query> to run on the partitions");
  }

  void clusterInput(const XMLElement* e, ClusterSpec& c) {
    if (auto input = string(e, "input", false)) {
      if (*input == "stream") {
        c.input = ClusterSpec::Input::kStream;
      } else if (*input != "queue") {
        reportAttr(e, e->FindAttribute("input"),
                   "must be \"queue\" or \"stream\", got " + quote(*input));
      }
    }
    const XMLAttribute* retention = e->FindAttribute("retention");
    if (retention == nullptr) return;
    if (c.input != ClusterSpec::Input::kStream) {
      reportAttr(e, retention,
                 "applies to input=\"stream\" only (a queue keeps what is unsettled)");
      return;
    }
    // RabbitMQ's x-max-age: a positive count and one unit letter.
    const std::string_view age = retention->Value();
    const bool valid =
        age.size() >= 2 && age.size() <= 10 &&
        std::string_view("YMDhms").find(age.back()) != std::string_view::npos &&
        age.front() != '0' &&
        std::all_of(age.begin(), age.end() - 1, [](char ch) { return ch >= '0' && ch <= '9'; });
    if (!valid) {
      reportAttr(e, retention,
                 "must be a positive count and a unit (Y, M, D, h, m or s), such as \"7D\", got " +
                     quote(age));
      return;
    }
    c.retention = std::string(age);
  }

  // The comma-separated attribute names of `attr`.
  std::vector<std::string> nameList(const XMLElement* e, const char* attr, std::string_view list) {
    std::vector<std::string> out;
    size_t begin = 0;
    while (true) {
      const size_t end = std::min(list.find(',', begin), list.size());
      const std::string item(trim(list.substr(begin, end - begin)));
      if (!isName(item)) {
        reportAttr(e, e->FindAttribute(attr),
                   "must list attribute names separated by commas, got " + quote(list));
        return {};
      }
      out.push_back(item);
      if (end == list.size()) break;
      begin = end + 1;
    }
    return out;
  }

  void listeners(const XMLElement* e, Listeners& out) {
    checkAttributes(e, {});
    children(e, {{"amqp", true}, {"http", true}}, [&](const XMLElement* child) {
      if (std::string_view(child->Name()) == "amqp") {
        amqp(child, out.amqp.emplace());
      } else {
        HttpListener& l = out.http.emplace();
        checkAttributes(child, {"host", "port", "token-env", "max-connections", "max-ws-clients",
                                "request-timeout"});
        noChildren(child);
        l.where = at(child);
        hostAndPort(child, l.host, l.port);
        l.max_connections = integer(child, "max-connections", 1, kMaxCapacity);
        l.max_ws_clients = integer(child, "max-ws-clients", 0, kMaxCapacity);
        l.request_timeout_ms = integer(child, "request-timeout", 1, kMaxTimeoutMs);
        if (auto env = string(child, "token-env", false)) {
          if (isEnvName(*env)) {
            l.token_env = *env;
          } else {
            reportAttr(child, child->FindAttribute("token-env"),
                       "must be an environment variable name (letters, digits and '_', not "
                       "starting with a digit), got " +
                           quote(*env));
          }
        }
      }
    });
  }

  void amqp(const XMLElement* e, AmqpListener& l) {
    checkAttributes(e, {"host", "port", "allow-anonymous", "credit-window", "subscriber-buffer",
                        "durable-buffer", "request-timeout", "subscriber-stall-timeout",
                        "handshake-timeout", "max-connections", "max-sessions", "max-links",
                        "max-durable", "max-pending-requests", "max-message-size", "threads"});
    l.where = at(e);
    hostAndPort(e, l.host, l.port);
    l.allow_anonymous = boolean(e, "allow-anonymous").value_or(l.allow_anonymous);
    if (auto window = integer(e, "credit-window", 1, kMaxCreditWindow)) {
      l.credit_window = static_cast<uint32_t>(*window);
    }
    l.subscriber_buffer = integer(e, "subscriber-buffer", 1, kMaxCapacity);
    // 0: an away durable subscription keeps nothing (it still exists).
    l.durable_buffer = integer(e, "durable-buffer", 0, kMaxCapacity);
    l.request_timeout_ms = integer(e, "request-timeout", 1, kMaxTimeoutMs);
    l.subscriber_stall_timeout_ms = integer(e, "subscriber-stall-timeout", 1, kMaxTimeoutMs);
    // 0: no deadline for a client to authenticate.
    l.handshake_timeout_ms = integer(e, "handshake-timeout", 0, kMaxTimeoutMs);
    l.max_connections = integer(e, "max-connections", 1, kMaxCapacity);
    l.max_sessions = integer(e, "max-sessions", 1, kMaxCapacity);
    l.max_links = integer(e, "max-links", 1, kMaxCapacity);
    // 0: no durable subscriptions at all.
    l.max_durable = integer(e, "max-durable", 0, kMaxCapacity);
    l.max_pending_requests = integer(e, "max-pending-requests", 1, kMaxCapacity);
    l.max_message_size = integer(e, "max-message-size", 1, kMaxCapacity);
    if (auto threads = integer(e, "threads", 1, kMaxAmqpThreads)) {
      l.threads = static_cast<unsigned>(*threads);
    }
    NameScope users;
    children(e, {{"tls", true}, {"user"}}, [&](const XMLElement* child) {
      if (std::string_view(child->Name()) == "tls") {
        checkAttributes(child, {"cert", "key"});
        noChildren(child);
        AmqpTls& tls = l.tls.emplace();
        tls.where = at(child);
        if (auto cert = string(child, "cert", true)) tls.cert = resolve(*cert);
        if (auto key = string(child, "key", true)) tls.key = resolve(*key);
        return;
      }
      AmqpUser u;
      if (amqpUser(child, u)) {
        unique(users, child, "user", u.name);
        l.users.push_back(std::move(u));
      }
    });
  }

  bool amqpUser(const XMLElement* e, AmqpUser& u) {
    checkAttributes(e, {"name", "password-hash"});
    u.where = at(e);
    auto user_name = name(e, "name", true);
    auto hash = string(e, "password-hash", true);
    if (hash && !isPasswordHash(*hash)) {
      reportAttr(e, e->FindAttribute("password-hash"),
                 "must be \"pbkdf2-sha256:<iterations>:<salt hex>:<hash hex>\" (a salted hash, "
                 "never the password itself; see `cepbus-amqp-passwd`), got " +
                     quote(hash->substr(0, std::min<size_t>(hash->size(), 16))));
      hash.reset();
    }
    children(e, {{"permit"}}, [&](const XMLElement* child) {
      checkAttributes(child, {"publish", "subscribe"});
      noChildren(child);
      AmqpPermit p;
      p.where = at(child);
      const bool has_any = child->FindAttribute("publish") != nullptr ||
                           child->FindAttribute("subscribe") != nullptr;
      if (!has_any) {
        report(child, "needs a \"publish\" or a \"subscribe\" pattern (or both)");
        return;
      }
      auto publish = address(child, "publish", AddressUse::kPattern, false);
      auto subscribe = address(child, "subscribe", AddressUse::kPattern, false);
      if ((child->FindAttribute("publish") != nullptr && !publish) ||
          (child->FindAttribute("subscribe") != nullptr && !subscribe)) {
        return;
      }
      p.publish = publish.value_or("");
      p.subscribe = subscribe.value_or("");
      u.permits.push_back(std::move(p));
    });
    if (!user_name || !hash) return false;
    u.name = *user_name;
    u.password_hash = *hash;
    return true;
  }

  // The shape of "pbkdf2-sha256:<iterations>:<salt hex>:<hash hex>"; the
  // AMQP listener does the arithmetic.
  static bool isPasswordHash(std::string_view s) {
    constexpr std::string_view kScheme = "pbkdf2-sha256:";
    if (s.substr(0, kScheme.size()) != kScheme) return false;
    s.remove_prefix(kScheme.size());
    std::vector<std::string_view> parts;
    for (size_t at = 0;;) {
      const size_t colon = s.find(':', at);
      parts.push_back(s.substr(at, colon == std::string_view::npos ? colon : colon - at));
      if (colon == std::string_view::npos) break;
      at = colon + 1;
    }
    if (parts.size() != 3) return false;
    uint64_t iterations = 0;
    auto [end, ec] =
        std::from_chars(parts[0].data(), parts[0].data() + parts[0].size(), iterations);
    if (ec != std::errc() || end != parts[0].data() + parts[0].size() || iterations < 1000) {
      return false;
    }
    auto isHex = [](std::string_view h, size_t min_bytes) {
      return h.size() >= 2 * min_bytes && h.size() % 2 == 0 &&
             std::all_of(h.begin(), h.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
             });
    };
    return isHex(parts[1], 8) && isHex(parts[2], 32);
  }

  void hostAndPort(const XMLElement* e, std::string& host, uint16_t& port) {
    if (auto h = string(e, "host", false)) {
      if (isHost(*h)) {
        host = *h;
      } else {
        reportAttr(e, e->FindAttribute("host"),
                   "must be a host name or an IP address, got " + quote(*h));
      }
    }
    if (auto p = integer(e, "port", 0, kMaxPort)) port = static_cast<uint16_t>(*p);
  }

  void stages(const XMLElement* e, std::vector<StageSpec>& out) {
    checkAttributes(e, {});
    children(e, {{"stage"}}, [&](const XMLElement* child) {
      StageSpec s;
      if (stage(child, s)) {
        unique(stage_names_, child, "stage", s.name);
        out.push_back(std::move(s));
      }
    });
  }

  // False when the stage has no usable name (it cannot be referenced).
  bool stage(const XMLElement* e, StageSpec& s) {
    checkAttributes(e, {"name", "capacity", "min-threads", "max-threads", "degrade-at", "reject-at",
                        "run-inline"});
    noChildren(e);
    s.where = at(e);
    auto stage_name = name(e, "name", true);
    s.capacity = integer(e, "capacity", 1, kMaxCapacity).value_or(s.capacity);
    auto min_threads = integer(e, "min-threads", 1, kMaxThreads);
    auto max_threads = integer(e, "max-threads", 1, kMaxThreads);
    s.min_threads = min_threads.value_or(s.min_threads);
    s.max_threads = max_threads.value_or(std::max(s.max_threads, s.min_threads));
    if (min_threads && max_threads && *max_threads < *min_threads) {
      reportAttr(e, e->FindAttribute("max-threads"),
                 "must be at least min-threads (" + std::to_string(*min_threads) + "), got " +
                     quote(e->Attribute("max-threads")));
    }
    auto degrade = number(e, "degrade-at", 0, false, 1);
    auto reject = number(e, "reject-at", 0, true, 1);
    s.degrade_at = degrade.value_or(s.degrade_at);
    s.reject_at = reject.value_or(s.reject_at);
    s.run_inline_when_idle = enumeration(e, "run-inline",
                                         {std::pair{std::string_view("never"), false},
                                          std::pair{std::string_view("when-idle"), true}})
                                 .value_or(s.run_inline_when_idle);
    // A bad threshold was reported already; comparing it with the other
    // would add a confusing second error.
    const XMLAttribute* degrade_attr = e->FindAttribute("degrade-at");
    const XMLAttribute* reject_attr = e->FindAttribute("reject-at");
    const bool thresholds_ok =
        (degrade_attr == nullptr || degrade) && (reject_attr == nullptr || reject);
    if (thresholds_ok && s.reject_at < s.degrade_at) {
      report((reject_attr != nullptr ? reject_attr : degrade_attr)->GetLineNum(),
             describe(e) + ": reject-at (" + formatNumber(s.reject_at) +
                 ") must not be below degrade-at (" + formatNumber(s.degrade_at) + ")");
    }
    if (!stage_name) return false;
    s.name = *stage_name;
    return true;
  }

  void plugins(const XMLElement* e, PluginsConfig& out) {
    checkAttributes(e, {});
    out.where = at(e);
    NameScope names;
    children(e, {{"search-path"}, {"plugin"}}, [&](const XMLElement* child) {
      if (std::string_view(child->Name()) == "search-path") {
        checkAttributes(child, {});
        if (auto text = textContent(child)) out.search_paths.push_back(resolve(text->first));
        return;
      }
      checkAttributes(child, {"name", "library"});
      noChildren(child);
      PluginSpec p;
      p.where = at(child);
      auto plugin_name = name(child, "name", true);
      if (auto library = string(child, "library", false)) {
        // A bare file name would be taken for a plugin name by the loader.
        p.library = resolve(*library);
        if (!p.library.has_parent_path()) p.library = std::filesystem::path(".") / p.library;
      }
      if (!plugin_name) return;
      p.name = *plugin_name;
      unique(names, child, "plugin", p.name);
      out.plugins.push_back(std::move(p));
    });
  }

  void routes(const XMLElement* e, RoutesConfig& out) {
    checkAttributes(e, {"default-flow", "default-stage"});
    out.where = at(e);
    const XMLAttribute* flow_attr = e->FindAttribute("default-flow");
    const auto flow = enumeration(e, "default-flow", kFlows);
    out.default_flow = flow.value_or(out.default_flow);
    if (flow_attr == nullptr || flow) {
      stageUse(e, "default-stage", out.default_flow, flow_attr != nullptr, out.default_stage);
      if (out.default_flow == FlowKind::kSeda && e->FindAttribute("default-stage") == nullptr) {
        report(e, "default flow \"seda\" needs attribute \"default-stage\"");
      }
      if (out.default_flow == FlowKind::kReliable) {
        reliable_uses_.emplace_back(e->GetLineNum(), describe(e) + ": default flow \"reliable\"");
      }
    }
    children(e, {{"route"}}, [&](const XMLElement* child) {
      RouteSpec r;
      checkAttributes(child, {"address", "flow", "qos", "stage"});
      noChildren(child);
      r.where = at(child);
      const auto route_address = address(child, "address", AddressUse::kPattern, true);
      const XMLAttribute* route_flow_attr = child->FindAttribute("flow");
      const auto route_flow = enumeration(child, "flow", kFlows);
      r.flow = route_flow.value_or(out.default_flow);
      r.qos = enumeration(child, "qos", kQos).value_or(r.qos);
      if (route_flow_attr == nullptr || route_flow) {
        stageUse(child, "stage", r.flow, route_flow_attr != nullptr, r.stage);
        if (r.flow == FlowKind::kSeda && child->FindAttribute("stage") == nullptr) {
          r.stage = out.default_stage;
          // An inherited seda flow without a default stage is reported once, on <routes>.
          if (r.stage.empty() && route_flow_attr != nullptr) {
            report(child,
                   "flow \"seda\" needs a stage: set attribute \"stage\", or \"default-stage\" "
                   "on <routes>");
          }
        }
        if (route_flow == FlowKind::kReliable) {
          reliable_uses_.emplace_back(child->GetLineNum(), describe(child) + ": flow \"reliable\"");
        }
      }
      if (!route_address) return;
      r.address = *route_address;
      out.routes.push_back(std::move(r));
    });
  }

  // Reads the stage attribute of an element carried by `flow` and records it
  // for resolution; a stage on a flow that uses none is an error, since it
  // would be silently ignored.
  void stageUse(const XMLElement* e, const char* stage_attr, FlowKind flow, bool flow_written,
                std::string& stage) {
    auto value = name(e, stage_attr, false);
    if (!value) return;
    const XMLAttribute* a = e->FindAttribute(stage_attr);
    if (flow == FlowKind::kSt) {
      reportAttr(e, a,
                 std::string("is not used by flow \"st\"") +
                     (flow_written ? "" : " (the default flow)") +
                     "; remove it or use flow \"seda\"");
      return;
    }
    stage = *value;
    stage_refs_.push_back(StageRef{a->GetLineNum(), attrContext(e, stage_attr), *value});
  }

  // False when the assembly has no usable name.
  bool assembly(const XMLElement* e, ServiceAssembly& a) {
    checkAttributes(e, {"name"});
    a.where = at(e);
    a.base_dir = base_dir_;
    auto assembly_name = name(e, "name", true);
    NameScope units;
    children(e, {{"service-unit"}}, [&](const XMLElement* child) {
      ServiceUnit u;
      if (!unit(child, u)) return;
      unique(units, child, "service unit", u.name);
      a.units.push_back(std::move(u));
    });
    if (!assembly_name) return false;
    a.name = *assembly_name;
    return true;
  }

  bool unit(const XMLElement* e, ServiceUnit& u) {
    checkAttributes(e, {"name", "type"});
    u.where = at(e);
    auto unit_name = name(e, "name", true);
    u.type = string(e, "type", true).value_or("");
    NameScope params;
    NameScope queries;
    children(e, {{"param"}, {"subscribe"}, {"publish"}, {"query"}}, [&](const XMLElement* child) {
      const std::string_view tag = child->Name();
      if (tag == "param") {
        Param p;
        if (!param(child, p)) return;
        unique(params, child, "param", p.name);
        u.params.push_back(std::move(p));
      } else if (tag == "subscribe") {
        subscription(child, u.subscriptions);
      } else if (tag == "publish") {
        checkAttributes(child, {"address"});
        noChildren(child);
        if (auto a = address(child, "address", AddressUse::kConcrete, true)) {
          u.publications.push_back(Publication{*a, at(child)});
        }
      } else {
        QuerySpec q;
        if (!query(child, q)) return;
        unique(queries, child, "query", q.name);
        u.queries.push_back(std::move(q));
      }
    });
    if (!unit_name) return false;
    u.name = *unit_name;
    return true;
  }

  // A <param> or an <option>: a name and a value that may be empty.
  bool param(const XMLElement* e, Param& p) {
    checkAttributes(e, {"name", "value"});
    noChildren(e);
    p.where = at(e);
    auto param_name = name(e, "name", true);
    const char* value = e->Attribute("value");
    if (value == nullptr) report(e, "missing required attribute \"value\"");
    if (!param_name || value == nullptr) return false;
    p.name = *param_name;
    p.value = value;
    return true;
  }

  void subscription(const XMLElement* e, std::vector<Subscription>& out) {
    checkAttributes(e, {"address", "filter", "durable"});
    noChildren(e);
    Subscription s;
    s.where = at(e);
    auto sub_address = address(e, "address", AddressUse::kPattern, true);
    if (auto filter = string(e, "filter", false)) {
      s.filter = std::string(trim(*filter));
      s.filter_where = at(e->FindAttribute("filter"));
    }
    if (auto durable = name(e, "durable", false)) {
      s.durable = *durable;
      auto [it, inserted] = durable_names_.emplace(*durable, e->GetLineNum());
      if (!inserted) {
        reportAttr(e, e->FindAttribute("durable"),
                   "names durable subscription " + quote(*durable) + " again (first at line " +
                       std::to_string(it->second) + "); durable names are unique");
      }
    }
    if (!sub_address) return;
    s.address = *sub_address;
    out.push_back(std::move(s));
  }

  // A CEP service's query names its input addresses; a cluster's query reads
  // its partition and has none.
  enum class QueryInput : uint8_t { kAddresses, kNone };

  bool query(const XMLElement* e, QuerySpec& q, QueryInput input_kind = QueryInput::kAddresses) {
    if (input_kind == QueryInput::kAddresses) {
      checkAttributes(e, {"name", "engine", "input", "output"});
    } else {
      checkAttributes(e, {"name", "engine", "output"});
    }
    q.where = at(e);
    auto query_name = name(e, "name", true);
    q.engine = name(e, "engine", true).value_or("");
    if (input_kind == QueryInput::kAddresses) {
      if (auto input = string(e, "input", true)) q.inputs = inputs(e, *input);
    }
    q.output = address(e, "output", AddressUse::kConcrete, true).value_or("");
    NameScope options;
    bool has_text = false;
    children(e, {{"option"}, {"text", true}}, [&](const XMLElement* child) {
      if (std::string_view(child->Name()) == "option") {
        Param p;
        if (!param(child, p)) return;
        unique(options, child, "option", p.name);
        q.options.push_back(std::move(p));
        return;
      }
      has_text = true;
      checkAttributes(child, {});
      if (auto text = textContent(child)) {
        q.text = std::move(text->first);
        q.text_where = Location{file_, text->second};
      }
    });
    if (!has_text) report(e, "missing required element <text> holding the query");
    if (!query_name) return false;
    q.name = *query_name;
    return true;
  }

  // The comma-separated input addresses of a query.
  std::vector<std::string> inputs(const XMLElement* e, std::string_view list) {
    const XMLAttribute* a = e->FindAttribute("input");
    std::vector<std::string> out;
    size_t begin = 0;
    while (true) {
      const size_t end = std::min(list.find(',', begin), list.size());
      const std::string_view item = trim(list.substr(begin, end - begin));
      if (item.empty()) {
        reportAttr(e, a, "has an empty item in " + quote(list) + "; separate addresses by commas");
      } else if (auto why = addressError(item, AddressUse::kConcrete)) {
        reportAttr(e, a, "holds an invalid address " + quote(item) + ": " + *why);
      } else if (std::find(out.begin(), out.end(), item) != out.end()) {
        reportAttr(e, a, "lists " + quote(item) + " twice");
      } else {
        out.emplace_back(item);
      }
      if (end == list.size()) break;
      begin = end + 1;
    }
    return out;
  }

  void resolveReferences(const Descriptor& d) {
    std::vector<std::string_view> declared;
    for (const auto& [stage_name, line] : stage_names_) declared.push_back(stage_name);
    for (const StageRef& ref : stage_refs_) {
      if (stage_names_.count(ref.stage) != 0) continue;
      std::string message = ref.context + " names an undeclared stage " + quote(ref.stage);
      if (declared.empty()) {
        message += "; no <stage> is declared in <stages>";
      } else if (auto guess = closest(ref.stage, declared)) {
        message += " (did you mean " + quote(*guess) + "?)";
      } else {
        message += "; declared stages: " + listOf(declared, "", "");
      }
      report(ref.line, message);
    }
    if (!d.journal) {
      for (const auto& [line, context] : reliable_uses_) {
        report(line, context + " needs a <journal path=\"...\"/> element to journal events in");
      }
    }
  }

  const std::string file_;
  const std::filesystem::path base_dir_;
  std::vector<DescriptorError> errors_;
  NameScope stage_names_;
  NameScope durable_names_;
  std::vector<StageRef> stage_refs_;
  std::vector<std::pair<int, std::string>> reliable_uses_;  // line, what uses the reliable flow
};

template <typename T>
Result<T> finish(Parser& parser, std::optional<T> value, ParseReport* report) {
  ParseReport local{parser.takeErrors()};
  Result<T> result = local.ok() && value ? Result<T>(std::move(*value))
                                         : Result<T>(Status::invalidArgument(local.toString()));
  if (report != nullptr) *report = std::move(local);
  return result;
}

}  // namespace

std::string ParseReport::toString() const {
  std::string out;
  for (const DescriptorError& e : errors) {
    if (!out.empty()) out += '\n';
    out += e.toString();
  }
  return out;
}

Result<Descriptor> parseDescriptorString(std::string_view text, std::string_view name,
                                         ParseReport* report,
                                         const std::filesystem::path& base_dir) {
  Parser parser(name, base_dir);
  auto descriptor = parser.parseDocument(text);
  return finish(parser, std::move(descriptor), report);
}

Result<ServiceAssembly> parseServiceAssembly(std::string_view text, std::string_view name,
                                             ParseReport* report,
                                             const std::filesystem::path& base_dir) {
  Parser parser(name, base_dir);
  auto assembly = parser.parseFragment(text);
  return finish(parser, std::move(assembly), report);
}

Result<Descriptor> parseDescriptorFile(const std::filesystem::path& path, ParseReport* report) {
  std::string text;
  int error = 0;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    char buffer[1 << 14];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) text.append(buffer, n);
    if (std::ferror(f)) error = errno;
    std::fclose(f);
  } else {
    error = errno;
  }
  if (error != 0) {
    ParseReport local{{DescriptorError{
        path.string(), 0, std::string("cannot read the descriptor: ") + std::strerror(error)}}};
    Status status = Status::ioError(local.toString());
    if (report != nullptr) *report = std::move(local);
    return status;
  }
  return parseDescriptorString(text, path.string(), report, path.parent_path());
}

}  // namespace cepbus::descriptor
