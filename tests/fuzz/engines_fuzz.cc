// Structure-aware: the bytes choose a small query and a random event stream,
// and every pattern engine (nfa, algebra, petri) that accepts the query runs
// it over the stream. Checked for every engine:
//   - no exception escapes (the host's guard would turn one into Internal);
//   - causality: a match is reported no earlier than its last event arrives
//     (the order between matches is the engine's: nfa's batched construction
//     promises the same set of matches as per-event construction, not the
//     same order, so it is not checked);
//   - for SEQ queries (docs/pattern-language.md, "Semantics"):
//     positive elements in pattern order with strictly increasing ts (a
//     Kleene element's events non-decreasing among themselves), each of its
//     element's type, no event twice, and last ts - first ts <= WITHIN.

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/pattern/parser.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

using namespace cepbus;

constexpr const char* kTypes[] = {"A", "B", "C"};
constexpr const char* kStrategies[] = {"", " STRATEGY skip_till_any_match",
                                       " STRATEGY skip_till_next_match",
                                       " STRATEGY strict_contiguity"};

struct Element {
  std::string type;
  std::string var;
  bool kleene = false;
  bool negated = false;
};

struct Generated {
  std::string text;
  bool seq = false;                    // SEQ query: the full set of checks applies
  std::vector<std::string> positives;  // their types, in pattern order
  bool kleene = false;                 // has a Kleene element
  int64_t within = 0;
};

std::string pick(FuzzedDataProvider& in, std::initializer_list<const char*> options) {
  const size_t i = in.ConsumeIntegralInRange<size_t>(0, options.size() - 1);
  return *(options.begin() + i);
}

Generated seqQuery(FuzzedDataProvider& in) {
  Generated g;
  g.seq = true;
  std::vector<Element> elements;
  const size_t n = in.ConsumeIntegralInRange<size_t>(1, 4);
  for (size_t i = 0; i < n; ++i) {
    Element e;
    e.type = kTypes[in.ConsumeIntegralInRange<size_t>(0, 2)];
    e.var = std::string(1, static_cast<char>('a' + i));
    const int kind = in.ConsumeIntegralInRange<int>(0, 5);
    // NOT only between two positive elements (at an edge it needs WITHIN, which the
    // grammar here may leave out, and only the nfa engine runs it).
    e.negated = kind == 5 && i > 0 && i + 1 < n && !elements.back().negated;
    e.kleene = kind == 4;
    elements.push_back(e);
  }
  std::string text = "PATTERN SEQ(";
  std::vector<std::string> singles, kleenes;
  for (size_t i = 0; i < elements.size(); ++i) {
    const Element& e = elements[i];
    if (i > 0) text += ", ";
    if (e.negated) {
      text += "NOT(" + e.type + " " + e.var + ")";
    } else if (e.kleene) {
      text += e.type + "+ " + e.var + "[]";
      kleenes.push_back(e.var);
      g.kleene = true;
      g.positives.push_back(e.type);
    } else {
      text += e.type + " " + e.var;
      singles.push_back(e.var);
      g.positives.push_back(e.type);
    }
  }
  text += ")";
  std::vector<std::string> predicates;
  const size_t np = in.ConsumeIntegralInRange<size_t>(0, 3);
  for (size_t k = 0; k < np && !singles.empty(); ++k) {
    const std::string& v = singles[in.ConsumeIntegralInRange<size_t>(0, singles.size() - 1)];
    const std::string& w = singles[in.ConsumeIntegralInRange<size_t>(0, singles.size() - 1)];
    switch (in.ConsumeIntegralInRange<int>(0, 4)) {
      case 0:
        predicates.push_back(v + ".x = " + w + ".x");
        break;
      case 1:
        predicates.push_back(v + ".x < " + w + ".x");
        break;
      case 2:
        predicates.push_back(v + ".x > " + std::to_string(in.ConsumeIntegralInRange(0, 3)));
        break;
      case 3:
        predicates.push_back(v + ".s != " + w + ".s");
        break;
      default:
        if (!kleenes.empty()) {
          const std::string& b = kleenes[0];
          predicates.push_back(in.ConsumeBool() ? b + "[i].x > " + b + "[i-1].x"
                                                : b + "[i].x < " + pick(in, {"1", "2", "3"}));
        }
    }
  }
  for (size_t k = 0; k < predicates.size(); ++k)
    text += (k == 0 ? " WHERE " : " AND ") + predicates[k];
  g.within = in.ConsumeIntegralInRange<int64_t>(1, 20);
  text += " WITHIN " + std::to_string(g.within);
  if (in.ConsumeBool()) text += " PARTITION BY s";
  text += kStrategies[in.ConsumeIntegralInRange<size_t>(0, std::size(kStrategies) - 1)];
  g.text = text;
  return g;
}

// A binary algebra expression over single events (P1's operators).
std::string algebraTerm(FuzzedDataProvider& in, int depth, int& vars) {
  if (depth == 0 || in.ConsumeIntegralInRange<int>(0, 2) == 0) {
    return std::string(kTypes[in.ConsumeIntegralInRange<size_t>(0, 2)]) + " v" +
           std::to_string(vars++);
  }
  const std::string op = pick(in, {" ; ", " + ", " | ", " - ", " || ", " ~ "});
  std::string left = algebraTerm(in, depth - 1, vars);
  std::string right = algebraTerm(in, depth - 1, vars);
  return "(" + left + op + right + ")";
}

Generated algebraQuery(FuzzedDataProvider& in) {
  Generated g;
  int vars = 0;
  g.text = "PATTERN " + algebraTerm(in, 2, vars);
  if (in.ConsumeBool()) {
    g.within = in.ConsumeIntegralInRange<int64_t>(1, 20);
    g.text += " WITHIN " + std::to_string(g.within);
  }
  g.text += pick(in, {"", " CONTEXT recent", " CONTEXT unrestricted"});
  return g;
}

class CheckingSink final : public plugin::MatchSink {
 public:
  CheckingSink(const Generated& query, std::string_view engine) : query_(query), engine_(engine) {}

  void onMatch(const plugin::Match& match) override {
    const std::string where = std::string(engine_) + ": " + query_.text;
    fuzz::check(match.size() > 0, "empty match", where);
    Timestamp first = match.ts(0), last = match.ts(0);
    for (size_t i = 0; i < match.size(); ++i) {
      first = std::min(first, match.ts(i));
      last = std::max(last, match.ts(i));
    }
    fuzz::check(last <= now_, "match reported before its last event arrived", where);
    if (query_.within > 0)
      fuzz::check(last - first <= query_.within, "match outside WITHIN", where);
    if (!query_.seq) return;
    fuzz::check(match.elementCount() == query_.positives.size(), "wrong element count", where);
    std::set<EventId> seen;
    Timestamp previous_end = 0;
    for (size_t j = 0; j < match.elementCount(); ++j) {
      const auto events = match.elementEvents(j);
      fuzz::check(!events.empty(), "element without an event", where);
      for (size_t k = 0; k < events.size(); ++k) {
        const Event& e = **events[k];
        fuzz::check(e.type().name() == query_.positives[j], "event of the wrong type", where);
        fuzz::check(seen.insert(e.id()).second, "one event fills two positions", where);
        if (k > 0)
          fuzz::check(e.ts() >= (*events[k - 1])->ts(), "Kleene events out of order", where);
      }
      if (j > 0) {
        fuzz::check((*events.front())->ts() > previous_end, "SEQ not strictly increasing", where);
      }
      previous_end = (*events.back())->ts();
    }
  }

  void advance(Timestamp ts) { now_ = ts; }

 private:
  const Generated& query_;
  const std::string_view engine_;
  Timestamp now_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 2048) return -1;
  FuzzedDataProvider in(data, size);
  const Generated query = in.ConsumeBool() ? seqQuery(in) : algebraQuery(in);
  // Replaying a reproducer with CEPBUS_FUZZ_PRINT=1 shows what it ran.
  static const bool print = std::getenv("CEPBUS_FUZZ_PRINT") != nullptr;
  if (print) std::fprintf(stderr, "query: %s\n", query.text.c_str());
  Result<pattern::Query> parsed = pattern::parseQuery(query.text);
  // Every generated query is meant to be valid: one the parser refuses is a
  // generator bug, or a parser bug, worth a look either way.
  fuzz::check(parsed.isOk(), "generated query does not parse:",
              query.text + " -- " + (parsed ? "" : parsed.status().message()));

  std::vector<EventPtr> events;
  Timestamp ts = 1;
  // Under skip-till-any-match a Kleene element matches every subset of its
  // candidates: 2^n matches are the semantics, not a bug, and a stream long
  // enough for that only makes the fuzzer slow (a 61 s input of 48 events was
  // seen). Streams with a Kleene element are kept short.
  // Likewise an algebra conjunction matches every combination of its
  // operands' events (an AND of 8 over 48 events ran out of memory): those
  // streams are kept to 16 events, and the trees to 4 operands.
  const size_t n = in.ConsumeIntegralInRange<size_t>(0, query.kleene ? 12 : query.seq ? 48 : 16);
  for (size_t i = 0; i < n && in.remaining_bytes() > 0; ++i) {
    ts += in.ConsumeIntegralInRange<int64_t>(0, 3);
    events.push_back(EventBuilder(pick(in, {"A", "B", "C", "D"}))
                         .at(ts)
                         .set("x", Value(in.ConsumeIntegralInRange<int64_t>(0, 3)))
                         .set("s", Value(pick(in, {"p", "q"})))
                         .build());
  }

  static const plugin::DetectorOptions kNoOptions;
  for (const fuzz::Engine& engine : fuzz::patternEngines()) {
    CheckingSink sink(query, engine.name);
    auto detector = engine.plugin->createDetector(engine.name, *parsed, kNoOptions, sink);
    if (!detector) continue;  // not supported by this engine: its answer
    for (const EventPtr& e : events) {
      sink.advance(e->ts());
      const Status s = (*detector)->onEvent(e);
      fuzz::check(s.code() != Status::Code::kInternal, "engine threw:", s.message());
    }
    const Status s = (*detector)->flush();
    fuzz::check(s.code() != Status::Code::kInternal, "engine threw on flush:", s.message());
    fuzz::check((*detector)->exceptionCount() == 0, "engine threw", query.text);
  }
  return 0;
}
