// The descriptor parser walks the TinyXML2 tree once, element by element.
// Every element function checks its own attributes and children, reports
// each problem with the line it sits on and goes on, so one run finds every
// error (element.h). The elements a service owns go to the ElementParser it
// registered (element_parser.h). References between elements (a route naming
// a stage) are recorded while walking and resolved once the whole document
// has been read.

#include "bus/host/descriptor/parser.h"

#include <tinyxml2.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

#include "bus/base/spelling.h"
#include "bus/host/descriptor/address.h"
#include "bus/host/descriptor/document_reader.h"
#include "bus/host/descriptor/element.h"
#include "bus/host/descriptor/element_parser.h"
#include "bus/host/descriptor/text.h"

namespace cepbus::descriptor {
namespace {

using tinyxml2::XMLElement;
using tinyxml2::XMLNode;

constexpr uint64_t kMaxThreads = 1024;
constexpr uint64_t kMaxCommitDelayUs = 1000000;  // a second
constexpr uint64_t kMaxRetryDelayMs = 3600000;   // an hour

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

// A reference to a stage, resolved once every stage has been read.
struct StageRef {
  int line;
  std::string context;  // `<route address="x">: attribute "stage"`
  std::string stage;
};

// An element of the bus's own and the functions that read it; a service's
// element goes to the ElementParser registered for it.
class Parser {
 public:
  Parser(std::string_view file, std::filesystem::path base_dir, const ElementParsers* elements)
      : reader_(file, std::move(base_dir), elements) {}

  std::optional<Descriptor> parseDocument(std::string_view text) {
    tinyxml2::XMLDocument doc;
    const XMLElement* root = load(doc, text, "cepbus");
    if (root == nullptr) return std::nullopt;
    Descriptor d;
    cepbus(Element(reader_, root), d);
    resolveReferences(d);
    return d;
  }

  std::optional<ServiceAssembly> parseFragment(std::string_view text) {
    tinyxml2::XMLDocument doc;
    const XMLElement* root = load(doc, text, "service-assembly");
    if (root == nullptr) return std::nullopt;
    ServiceAssembly a;
    assembly(Element(reader_, root), a);
    return a;
  }

  std::vector<DescriptorError> takeErrors() { return reader_.takeErrors(); }

 private:
  // ---- document -------------------------------------------------------

  const XMLElement* load(tinyxml2::XMLDocument& doc, std::string_view text,
                         std::string_view root_name) {
    doc.Parse(text.data(), text.size());
    if (doc.Error()) {
      reader_.report(doc.ErrorLineNum(), "malformed XML: " + xmlErrorMessage(doc));
      return nullptr;
    }
    const XMLElement* root = doc.RootElement();
    if (root == nullptr) {
      reader_.report(0, "no root element; expected <" + std::string(root_name) + ">");
      return nullptr;
    }
    for (const XMLNode* n = doc.FirstChild(); n != nullptr; n = n->NextSibling()) {
      if (n == root) continue;
      if (const XMLElement* extra = n->ToElement()) {
        reader_.report(extra->GetLineNum(), "second root element <" + std::string(extra->Name()) +
                                                ">; a document has one root element <" +
                                                std::string(root_name) + ">");
      } else if (n->ToText() != nullptr) {
        reader_.report(n->GetLineNum(),
                       "text outside the root element: " + quote(trim(n->Value())));
      }
    }
    if (root->Name() != root_name) {
      std::string message =
          "the root element must be <" + std::string(root_name) + ">, got <" + root->Name() + ">";
      if (root_name == "cepbus" && std::string_view(root->Name()) == "service-assembly") {
        message += " (a lone <service-assembly> is a fragment, deployed through the admin API)";
      }
      reader_.report(root->GetLineNum(), message);
      return nullptr;
    }
    return root;
  }

  // `fixed` and, each once, the tags of the services' elements under `parent`.
  std::vector<ChildSpec> childrenOf(std::string_view parent, std::vector<ChildSpec> fixed) const {
    if (reader_.elements() != nullptr) {
      for (std::string_view tag : reader_.elements()->tags(parent)) fixed.push_back({tag, true});
    }
    return fixed;
  }

  // A service's element: read by the parser its service registered.
  void serviceElement(std::string_view parent, const Element& e, Descriptor& d) {
    const ElementParser* parser = reader_.elements()->find(parent, e.tag());
    d.elements.push_back(
        ServiceElement{std::string(parent), std::string(e.tag()), parser->parse(e), e.where()});
  }

  // ---- elements --------------------------------------------------------

  void cepbus(const Element& e, Descriptor& d) {
    e.allowAttributes({"name"});
    d.name = e.name("name", true).value_or("");
    d.source = reader_.file();
    d.base_dir = reader_.baseDir();
    d.where = e.where();
    d.logging.where = d.plugins.where = d.routes.where = Location{reader_.file(), 0};
    NameScope assemblies;
    e.children(childrenOf(kRootElement, {{"logging", true},
                                         {"journal", true},
                                         {"listeners", true},
                                         {"stages", true},
                                         {"plugins", true},
                                         {"routes", true},
                                         {"service-assembly"}}),
               [&](const Element& child) {
                 const std::string_view tag = child.tag();
                 if (tag == "logging") {
                   logging(child, d.logging);
                 } else if (tag == "journal") {
                   journal(child, d.journal);
                 } else if (tag == "listeners") {
                   listeners(child, d);
                 } else if (tag == "stages") {
                   stages(child, d.stages);
                 } else if (tag == "plugins") {
                   plugins(child, d.plugins);
                 } else if (tag == "routes") {
                   routes(child, d.routes);
                 } else if (tag == "service-assembly") {
                   ServiceAssembly a;
                   if (!assembly(child, a)) return;
                   child.unique(assemblies, "service assembly", a.name);
                   d.assemblies.push_back(std::move(a));
                 } else {
                   serviceElement(kRootElement, child, d);
                 }
               });
  }

  void logging(const Element& e, LoggingConfig& out) {
    e.allowAttributes({"level"});
    e.noChildren();
    out.where = e.where();
    if (!e.has("level")) e.report("missing required attribute \"level\"");
    out.level = e.enumeration("level", kLogLevels).value_or(out.level);
  }

  void journal(const Element& e, std::optional<JournalConfig>& out) {
    e.allowAttributes({"path", "commit-delay-us", "retry-delay-ms", "max-retry-delay-ms"});
    e.noChildren();
    out.emplace();
    out->where = e.where();
    if (auto path = e.string("path", true)) out->path = e.path(*path);
    out->commit_delay_us = e.integer("commit-delay-us", 0, kMaxCommitDelayUs);
    out->retry_delay_ms = e.integer("retry-delay-ms", 1, kMaxRetryDelayMs);
    out->max_retry_delay_ms = e.integer("max-retry-delay-ms", 1, kMaxRetryDelayMs);
    if (out->retry_delay_ms && out->max_retry_delay_ms &&
        *out->retry_delay_ms > *out->max_retry_delay_ms) {
      e.report("retry-delay-ms=" + std::to_string(*out->retry_delay_ms) +
               " is longer than max-retry-delay-ms=" + std::to_string(*out->max_retry_delay_ms));
    }
  }

  // <listeners> holds the services' listeners (<amqp>, <http>, ...) only.
  void listeners(const Element& e, Descriptor& d) {
    e.allowAttributes({});
    e.children(childrenOf(kListenersElement, {}),
               [&](const Element& child) { serviceElement(kListenersElement, child, d); });
  }

  void stages(const Element& e, std::vector<StageSpec>& out) {
    e.allowAttributes({});
    e.children({{"stage"}}, [&](const Element& child) {
      StageSpec s;
      if (stage(child, s)) {
        child.unique(stage_names_, "stage", s.name);
        out.push_back(std::move(s));
      }
    });
  }

  // False when the stage has no usable name (it cannot be referenced).
  bool stage(const Element& e, StageSpec& s) {
    e.allowAttributes({"name", "capacity", "min-threads", "max-threads", "degrade-at", "reject-at",
                       "run-inline"});
    e.noChildren();
    s.where = e.where();
    auto stage_name = e.name("name", true);
    s.capacity = e.integer("capacity", 1, kMaxCapacity).value_or(s.capacity);
    auto min_threads = e.integer("min-threads", 1, kMaxThreads);
    auto max_threads = e.integer("max-threads", 1, kMaxThreads);
    s.min_threads = min_threads.value_or(s.min_threads);
    s.max_threads = max_threads.value_or(std::max(s.max_threads, s.min_threads));
    if (min_threads && max_threads && *max_threads < *min_threads) {
      e.reportAttribute("max-threads", "must be at least min-threads (" +
                                           std::to_string(*min_threads) + "), got " +
                                           quote(e.raw("max-threads")));
    }
    auto degrade = e.number("degrade-at", 0, false, 1);
    auto reject = e.number("reject-at", 0, true, 1);
    s.degrade_at = degrade.value_or(s.degrade_at);
    s.reject_at = reject.value_or(s.reject_at);
    s.run_inline_when_idle =
        e.enumeration("run-inline", {std::pair{std::string_view("never"), false},
                                     std::pair{std::string_view("when-idle"), true}})
            .value_or(s.run_inline_when_idle);
    // A bad threshold was reported already; comparing it with the other
    // would add a confusing second error.
    const bool thresholds_ok = (!e.has("degrade-at") || degrade) && (!e.has("reject-at") || reject);
    if (thresholds_ok && s.reject_at < s.degrade_at) {
      e.reportAt(e.has("reject-at") ? e.attributeLine("reject-at") : e.attributeLine("degrade-at"),
                 e.describe() + ": reject-at (" + formatNumber(s.reject_at) +
                     ") must not be below degrade-at (" + formatNumber(s.degrade_at) + ")");
    }
    if (!stage_name) return false;
    s.name = *stage_name;
    return true;
  }

  void plugins(const Element& e, PluginsConfig& out) {
    e.allowAttributes({});
    out.where = e.where();
    NameScope names;
    e.children({{"search-path"}, {"plugin"}}, [&](const Element& child) {
      if (child.tag() == "search-path") {
        child.allowAttributes({});
        if (auto path = child.text()) out.search_paths.push_back(child.path(path->first));
        return;
      }
      child.allowAttributes({"name", "library"});
      child.noChildren();
      PluginSpec p;
      p.where = child.where();
      auto plugin_name = child.name("name", true);
      if (auto library = child.string("library", false)) {
        // A bare file name would be taken for a plugin name by the loader.
        p.library = child.path(*library);
        if (!p.library.has_parent_path()) p.library = std::filesystem::path(".") / p.library;
      }
      if (!plugin_name) return;
      p.name = *plugin_name;
      child.unique(names, "plugin", p.name);
      out.plugins.push_back(std::move(p));
    });
  }

  void routes(const Element& e, RoutesConfig& out) {
    e.allowAttributes({"default-flow", "default-stage"});
    out.where = e.where();
    const auto flow = e.enumeration("default-flow", kFlows);
    out.default_flow = flow.value_or(out.default_flow);
    if (!e.has("default-flow") || flow) {
      stageUse(e, "default-stage", out.default_flow, e.has("default-flow"), out.default_stage);
      if (out.default_flow == FlowKind::kSeda && !e.has("default-stage")) {
        e.report("default flow \"seda\" needs attribute \"default-stage\"");
      }
      if (out.default_flow == FlowKind::kReliable) {
        reliable_uses_.emplace_back(e.line(), e.describe() + ": default flow \"reliable\"");
      }
    }
    e.children({{"route"}}, [&](const Element& child) {
      RouteSpec r;
      child.allowAttributes({"address", "flow", "qos", "stage"});
      child.noChildren();
      r.where = child.where();
      const auto route_address = child.address("address", AddressUse::kPattern, true);
      const auto route_flow = child.enumeration("flow", kFlows);
      r.flow = route_flow.value_or(out.default_flow);
      r.qos = child.enumeration("qos", kQos).value_or(r.qos);
      if (!child.has("flow") || route_flow) {
        stageUse(child, "stage", r.flow, child.has("flow"), r.stage);
        if (r.flow == FlowKind::kSeda && !child.has("stage")) {
          r.stage = out.default_stage;
          // An inherited seda flow without a default stage is reported once, on <routes>.
          if (r.stage.empty() && child.has("flow")) {
            child.report(
                "flow \"seda\" needs a stage: set attribute \"stage\", or \"default-stage\" on "
                "<routes>");
          }
        }
        if (route_flow == FlowKind::kReliable) {
          reliable_uses_.emplace_back(child.line(), child.describe() + ": flow \"reliable\"");
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
  void stageUse(const Element& e, const char* stage_attr, FlowKind flow, bool flow_written,
                std::string& stage) {
    auto value = e.name(stage_attr, false);
    if (!value) return;
    if (flow == FlowKind::kSt) {
      e.reportAttribute(stage_attr, std::string("is not used by flow \"st\"") +
                                        (flow_written ? "" : " (the default flow)") +
                                        "; remove it or use flow \"seda\"");
      return;
    }
    stage = *value;
    stage_refs_.push_back(StageRef{e.attributeLine(stage_attr),
                                   e.describe() + ": attribute " + quote(stage_attr), *value});
  }

  // False when the assembly has no usable name.
  bool assembly(const Element& e, ServiceAssembly& a) {
    e.allowAttributes({"name"});
    a.where = e.where();
    a.base_dir = reader_.baseDir();
    auto assembly_name = e.name("name", true);
    NameScope units;
    e.children({{"service-unit"}}, [&](const Element& child) {
      ServiceUnit u;
      if (!unit(child, u)) return;
      child.unique(units, "service unit", u.name);
      a.units.push_back(std::move(u));
    });
    if (!assembly_name) return false;
    a.name = *assembly_name;
    return true;
  }

  bool unit(const Element& e, ServiceUnit& u) {
    e.allowAttributes({"name", "type"});
    u.where = e.where();
    auto unit_name = e.name("name", true);
    u.type = e.string("type", true).value_or("");
    NameScope params;
    NameScope queries;
    e.children({{"param"}, {"subscribe"}, {"publish"}, {"query"}}, [&](const Element& child) {
      const std::string_view tag = child.tag();
      if (tag == "param") {
        auto p = child.param();
        if (!p) return;
        child.unique(params, "param", p->name);
        u.params.push_back(std::move(*p));
      } else if (tag == "subscribe") {
        subscription(child, u.subscriptions);
      } else if (tag == "publish") {
        child.allowAttributes({"address"});
        child.noChildren();
        if (auto a = child.address("address", AddressUse::kConcrete, true)) {
          u.publications.push_back(Publication{*a, child.where()});
        }
      } else {
        auto q = child.query(QueryInput::kAddresses);
        if (!q) return;
        child.unique(queries, "query", q->name);
        u.queries.push_back(std::move(*q));
      }
    });
    if (!unit_name) return false;
    u.name = *unit_name;
    return true;
  }

  void subscription(const Element& e, std::vector<Subscription>& out) {
    e.allowAttributes({"address", "filter", "durable"});
    e.noChildren();
    Subscription s;
    s.where = e.where();
    auto sub_address = e.address("address", AddressUse::kPattern, true);
    if (auto filter = e.string("filter", false)) {
      s.filter = std::string(trim(*filter));
      s.filter_where = Location{reader_.file(), e.attributeLine("filter")};
    }
    if (auto durable = e.name("durable", false)) {
      s.durable = *durable;
      auto [it, inserted] = durable_names_.emplace(*durable, e.line());
      if (!inserted) {
        e.reportAttribute("durable", "names durable subscription " + quote(*durable) +
                                         " again (first at line " + std::to_string(it->second) +
                                         "); durable names are unique");
      }
    }
    if (!sub_address) return;
    s.address = *sub_address;
    out.push_back(std::move(s));
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
      reader_.report(ref.line, message);
    }
    if (!d.journal) {
      for (const auto& [line, context] : reliable_uses_) {
        reader_.report(line,
                       context + " needs a <journal path=\"...\"/> element to journal events in");
      }
    }
  }

  DocumentReader reader_;
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
                                         ParseReport* report, const std::filesystem::path& base_dir,
                                         const ElementParsers* elements) {
  Parser parser(name, base_dir, elements);
  auto descriptor = parser.parseDocument(text);
  return finish(parser, std::move(descriptor), report);
}

Result<ServiceAssembly> parseServiceAssembly(std::string_view text, std::string_view name,
                                             ParseReport* report,
                                             const std::filesystem::path& base_dir) {
  Parser parser(name, base_dir, nullptr);
  auto assembly = parser.parseFragment(text);
  return finish(parser, std::move(assembly), report);
}

Result<Descriptor> parseDescriptorFile(const std::filesystem::path& path, ParseReport* report,
                                       const ElementParsers* elements) {
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
  return parseDescriptorString(text, path.string(), report, path.parent_path(), elements);
}

}  // namespace cepbus::descriptor
