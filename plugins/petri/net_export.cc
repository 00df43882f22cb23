// The net as Graphviz DOT or JSON (Detector::exportModel).

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "bus/core/pattern/printer.h"
#include "plugins/petri/net_parts.h"

namespace cepbus::plugins::petri {

namespace {

// A DOT string literal's contents: quotes and backslashes escaped, line
// breaks as DOT's centred "\n".
std::string dotEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string windowText(Timestamp w) { return w == kNoWindow ? "none" : std::to_string(w); }

}  // namespace

Result<std::string> PetriNet::exportModel(std::string_view format) const {
  if (format == "dot") return toDot();
  if (format == "json") return toJson();
  return Status::invalidArgument("the petri engine exports its net as 'dot' or 'json', not '" +
                                 std::string(format) + "'");
}

std::string PetriNet::toDot() const {
  std::map<const Transition*, size_t> id;
  for (const auto& t : transitions_) id.emplace(t.get(), id.size());
  std::string out =
      "digraph petri {\n  rankdir=LR;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  std::vector<Symbol> types;
  for (const auto& [type, list] : by_type_) types.push_back(type);
  std::sort(types.begin(), types.end(), [](Symbol a, Symbol b) { return a.name() < b.name(); });
  for (Symbol type : types) {
    out += "  \"in:" + dotEscape(type.name()) + "\" [shape=circle, style=filled, " +
           "fillcolor=lightblue, label=\"" + dotEscape(type.name()) + "\"];\n";
  }
  for (const auto& owned : transitions_) {
    const Transition& t = *owned;
    const std::string n = std::to_string(id.at(&t));
    std::string label = t.conjunction        ? "T" + n + ": AND (any order)"
                        : t.right != nullptr ? "T" + n + ": join"
                        : t.loop ? "T" + n + ": " + std::string(t.type.name()) + "+ (loop)"
                                 : "T" + n + ": " + std::string(t.type.name());
    for (const pattern::Conjunct* g : t.guards) label += "\n" + pattern::toString(*g->source);
    if (t.window != kNoWindow) label += "\nwithin " + windowText(t.window);
    std::string users;
    for (const PatternEntry* u : t.users) users += (users.empty() ? "" : ", ") + u->name;
    label += "\n[" + users + "]";
    out += "  t" + n + " [shape=box, label=\"" + dotEscape(label) + "\"];\n";
    out += "  p" + n + " [shape=circle, label=\"P" + n + "\\n" + std::to_string(t.held()) +
           " tok\"];\n";
    if (t.input != nullptr) out += "  p" + std::to_string(id.at(t.input)) + " -> t" + n + ";\n";
    if (t.conjunction) {
      out += "  p" + std::to_string(id.at(t.right)) + " -> t" + n + ";\n";
    } else if (t.right != nullptr) {
      out += "  p" + std::to_string(id.at(t.right)) + " -> t" + n + " [style=dashed];\n";
    } else {
      out += "  \"in:" + dotEscape(t.type.name()) + "\" -> t" + n + ";\n";
    }
    out += "  t" + n + " -> p" + n + ";\n";
    if (t.loop) out += "  p" + n + " -> t" + n + " [label=\"run\"];\n";
    for (const PatternEntry* p : t.outputs) {
      out += "  \"out:" + dotEscape(p->name) + "\" [shape=doubleoctagon, label=\"" +
             dotEscape(p->name) + "\"];\n  p" + n + " -> \"out:" + dotEscape(p->name) + "\";\n";
    }
  }
  return out + "}\n";
}

std::string PetriNet::toJson() const {
  std::map<const Transition*, size_t> id;
  for (const auto& t : transitions_) id.emplace(t.get(), id.size());
  nlohmann::json places = nlohmann::json::array();
  std::vector<Symbol> types;
  for (const auto& [type, list] : by_type_) types.push_back(type);
  std::sort(types.begin(), types.end(), [](Symbol a, Symbol b) { return a.name() < b.name(); });
  for (Symbol type : types) {
    places.push_back({{"id", "in:" + std::string(type.name())},
                      {"kind", "input"},
                      {"event_type", std::string(type.name())}});
  }
  nlohmann::json transitions = nlohmann::json::array();
  for (const auto& owned : transitions_) {
    const Transition& t = *owned;
    const std::string n = std::to_string(id.at(&t));
    nlohmann::json outputs = nlohmann::json::array();
    for (const PatternEntry* p : t.outputs) outputs.push_back(p->name);
    places.push_back({{"id", "p" + n},
                      {"kind", "output"},
                      {"transition", "t" + n},
                      {"tokens", t.held()},
                      {"emits", outputs}});
    nlohmann::json inputs = nlohmann::json::array();
    if (t.input != nullptr) inputs.push_back("p" + std::to_string(id.at(t.input)));
    if (t.loop) inputs.push_back("p" + n);
    if (t.right != nullptr) {
      inputs.push_back("p" + std::to_string(id.at(t.right)));
    } else {
      inputs.push_back("in:" + std::string(t.type.name()));
    }
    nlohmann::json guards = nlohmann::json::array();
    for (const pattern::Conjunct* g : t.guards) guards.push_back(pattern::toString(*g->source));
    nlohmann::json users = nlohmann::json::array();
    for (const PatternEntry* u : t.users) users.push_back(u->name);
    nlohmann::json tj = {{"id", "t" + n},
                         {"kind", t.conjunction        ? "conjunction"
                                  : t.right != nullptr ? "join"
                                  : t.loop             ? "iterate"
                                                       : "extend"},
                         {"depth", t.depth},
                         {"inputs", inputs},
                         {"output", "p" + n},
                         {"guards", guards},
                         {"patterns", users}};
    if (t.right == nullptr) tj["event_type"] = std::string(t.type.name());
    if (t.window != kNoWindow) tj["window"] = t.window;
    transitions.push_back(std::move(tj));
  }
  nlohmann::json patterns = nlohmann::json::array();
  for (const auto& p : patterns_) {
    nlohmann::json chain = nlohmann::json::array();
    for (const Transition* t : p->chain) chain.push_back("t" + std::to_string(id.at(t)));
    static const char* kPolicies[] = {"feedback", "conflict", "concurrency"};
    nlohmann::json pj = {{"name", p->name},
                         {"alternative", p->alternative},
                         {"policy", kPolicies[static_cast<int>(p->pattern->policy)]},
                         {"transitions", chain}};
    if (p->pattern->window != kNoWindow) pj["window"] = p->pattern->window;
    patterns.push_back(std::move(pj));
  }
  const NetSize merged = size();
  const NetSize alone = unmergedSize();
  nlohmann::json out = {
      {"engine", "petri"},
      {"places", places},
      {"transitions", transitions},
      {"patterns", patterns},
      {"size", {{"places", merged.places}, {"transitions", merged.transitions}}},
      {"unmerged_size", {{"places", alone.places}, {"transitions", alone.transitions}}}};
  return out.dump(2) + "\n";
}

}  // namespace cepbus::plugins::petri
