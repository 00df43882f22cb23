// One pattern language on every engine: random SEQ queries (negation, Kleene
// plus, predicates, windows, partitions, every strategy) over random streams
// run on the nfa, algebra (CONTEXT unrestricted) and petri plugins, and each
// engine that accepts a query must report exactly the matches of the
// brute-force reference (tests/plugins/nfa/reference_matcher.h). Where an
// engine refuses, its message must name the construct and an engine that
// runs it.
//
// The regular run is bounded (a fixed seed, a few seconds);
// CEPBUS_DIFFERENTIAL_CASES=N (and CEPBUS_DIFFERENTIAL_SEED=S) runs longer.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bus/core/pattern/expr_compiler.h"
#include "bus/core/pattern/parser.h"
#include "bus/host/loader/plugin_loader.h"
#include "tests/plugins/built_engines.h"
#include "tests/plugins/nfa/nfa_test_support.h"
#include "tests/plugins/nfa/random_queries.h"
#include "tests/plugins/nfa/reference_matcher.h"

namespace cepbus::plugins::testing {
namespace {

using nfa::testing::Generator;
using nfa::testing::MatchRecorder;
using nfa::testing::ReferenceMatcher;
using pattern::PatternKind;

// What a query uses that some engine may refuse.
struct Constructs {
  bool kleene = false;  // a Kleene element `Type+ var[]`
  // NOT before the first or after the last positive element.
  bool edge_negation = false;
  bool negation_next_to_kleene = false;
  bool negation_before_kleene = false;
  // A predicate names a negated variable and a positive one.
  bool negation_relates = false;
  // A predicate over a negated variable names an element after the one
  // that follows the negation.
  bool negation_names_later = false;
  // An iteration predicate b[i] names a later Kleene element.
  bool iteration_names_later_kleene = false;
};

Constructs constructsOf(const pattern::Query& q) {
  Constructs c;
  const auto& items = q.pattern->kind == PatternKind::kSeq ? q.pattern->children
                                                           : std::vector<pattern::PatternPtr>{};
  for (size_t i = 0; i < items.size(); ++i) {
    c.kleene |= items[i]->kind == PatternKind::kKleene;
    if (items[i]->kind != PatternKind::kNot) continue;
    auto positive = [](const pattern::PatternPtr& n) { return n->kind != PatternKind::kNot; };
    c.edge_negation |= std::none_of(items.begin(), items.begin() + i, positive) ||
                       std::none_of(items.begin() + i + 1, items.end(), positive);
    const bool before = i > 0 && items[i - 1]->kind == PatternKind::kKleene;
    const bool after = i + 1 < items.size() && items[i + 1]->kind == PatternKind::kKleene;
    c.negation_next_to_kleene |= before || after;
    c.negation_before_kleene |= after;
  }
  const auto layout = pattern::BindingLayout::forQuery(q);
  std::map<size_t, size_t> item_of_slot;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i]->var.empty()) item_of_slot[*layout.slotOf(items[i]->var)] = i;
  }
  auto conjuncts = pattern::compileConjuncts(q.where, layout);
  EXPECT_TRUE(conjuncts.isOk()) << conjuncts.status().message();
  if (!conjuncts) return c;
  for (const pattern::Conjunct& conjunct : *conjuncts) {
    size_t negated = items.size();
    size_t latest = 0;
    bool positive = false;
    for (size_t slot : conjunct.slots) {
      const size_t item = item_of_slot[slot];
      if (items[item]->kind == PatternKind::kNot) negated = std::min(negated, item);
      positive |= items[item]->kind != PatternKind::kNot;
      latest = std::max(latest, item);
    }
    c.negation_relates |= negated < items.size() && positive;
    c.negation_names_later |= negated < items.size() && latest > negated + 1;
    if (conjunct.iteration_slot) {
      const size_t of = item_of_slot[*conjunct.iteration_slot];
      c.iteration_names_later_kleene |= latest > of && items[latest]->kind == PatternKind::kKleene;
    }
  }
  return c;
}

struct Engine {
  const char* name;
  const char* suffix;  // appended to the query text
  // The refusal this engine must give for `c`, as substrings of its message
  // (the construct, an engine that runs it); empty when it must accept.
  std::vector<std::string> (*refusal)(const Constructs& c, const pattern::Query& q);
};

const Engine kEngines[] = {
    {"nfa", "",
     [](const Constructs&, const pattern::Query&) { return std::vector<std::string>{}; }},
    {"algebra", " CONTEXT unrestricted",
     [](const Constructs& c, const pattern::Query&) -> std::vector<std::string> {
       // Its first refusal names what it meets first; every one names the nfa.
       if (c.edge_negation) return {"the algebra engine", "nfa"};
       if (c.negation_before_kleene)
         return {"not before a Kleene element", "the nfa engine runs it"};
       if (c.negation_names_later) {
         return {"relates a negated operand", "the nfa engine runs it"};
       }
       return {};
     }},
    {"petri", "",
     [](const Constructs& c, const pattern::Query&) -> std::vector<std::string> {
       if (c.edge_negation) return {"the petri engine", "nfa engine runs"};
       if (c.negation_next_to_kleene) {
         return {"NOT(...) next to a Kleene element", "the nfa engine runs it"};
       }
       if (c.iteration_names_later_kleene) {
         return {"the petri engine needs an iteration predicate b[i] to name no later Kleene",
                 "the nfa engine runs it"};
       }
       if (c.negation_names_later) {
         return {"the petri engine checks a negation when the element after it arrives",
                 "the nfa engine runs it"};
       }
       return {};
     }},
};

struct EngineStats {
  uint64_t compared = 0;      // queries it accepted and was checked on
  uint64_t with_matches = 0;  // of those, with at least one match
  uint64_t matches = 0;
  uint64_t refused = 0;
  uint64_t compared_by_strategy[3] = {};  // indexed by pattern::Strategy
  uint64_t kleene_by_strategy[3] = {};    // ... of those with a Kleene element
};

constexpr pattern::Strategy kStrategies[] = {pattern::Strategy::kStrictContiguity,
                                             pattern::Strategy::kSkipTillNextMatch,
                                             pattern::Strategy::kSkipTillAnyMatch};

class EnginesDifferential {
 public:
  explicit EnginesDifferential(uint32_t seed) : gen_(seed) {}

  // One random query over one random stream on every engine;
  // `edge_negations` as Generator::query() takes it.
  void runCase(bool long_stream, bool edge_negations = false) {
    bool kleene = false;
    const std::string text = gen_.query(kleene, long_stream, edge_negations);
    auto q = pattern::parseQuery(text);
    ASSERT_TRUE(q.isOk()) << text << ": " << q.status().message();
    const auto events = long_stream ? gen_.events(gen_.uniform(40, 80))
                                    : gen_.events(gen_.uniform(4, kleene ? 12 : 20));
    auto expected = ReferenceMatcher(*q).run(events);
    std::sort(expected.begin(), expected.end());
    const Constructs constructs = constructsOf(*q);
    for (const Engine& engine : kEngines) {
      const std::string query = text + engine.suffix;
      check(engine, query, engine.refusal(constructs, *q), constructs.kleene, events, expected);
    }
  }

  int failures() const { return failures_; }
  const EngineStats& stats(const std::string& engine) { return stats_[engine]; }

 private:
  void check(const Engine& engine, const std::string& text, const std::vector<std::string>& refusal,
             bool kleene, const std::vector<EventPtr>& events,
             const std::vector<std::vector<EventId>>& expected) {
    EngineStats& st = stats_[engine.name];
    auto q = pattern::parseQuery(text);
    ASSERT_TRUE(q.isOk()) << text;
    MatchRecorder sink;
    auto made = loadBuiltEngine(engine.name)
                    ->createDetector(engine.name, *q, plugin::DetectorOptions(), sink);
    if (!refusal.empty()) {
      ++st.refused;
      if (made) {
        ++failures_;
        ADD_FAILURE() << engine.name << " accepts what it should refuse (" << refusal[0]
                      << "): " << text;
        return;
      }
      for (const std::string& part : refusal) {
        if (made.status().message().find(part) == std::string::npos) {
          ++failures_;
          ADD_FAILURE() << engine.name << "'s refusal does not say '" << part << "': " << text
                        << "\n"
                        << made.status().message();
        }
      }
      return;
    }
    if (!made) {
      ++failures_;
      ADD_FAILURE() << engine.name << " refuses " << text << ": " << made.status().message();
      return;
    }
    for (const EventPtr& e : events) {
      if (Status s = (*made)->onEvent(e); !s) {
        ++failures_;
        ADD_FAILURE() << engine.name << " fails on " << text << ": " << s.message();
        return;
      }
    }
    // The end of the stream: time passes to the end, then flush.
    if (Status s = (*made)->onWatermark(plugin::Detector::kEndOfTime); !s) {
      ++failures_;
      ADD_FAILURE() << engine.name << " fails on the final watermark " << text << ": "
                    << s.message();
      return;
    }
    if (Status s = (*made)->flush(); !s) {
      ++failures_;
      ADD_FAILURE() << engine.name << " fails to flush " << text << ": " << s.message();
      return;
    }
    ++st.compared;
    ++st.compared_by_strategy[static_cast<size_t>(q->strategy)];
    if (kleene) ++st.kleene_by_strategy[static_cast<size_t>(q->strategy)];
    st.with_matches += expected.empty() ? 0 : 1;
    st.matches += expected.size();
    if (sink.sortedIds() != expected) {
      ++failures_;
      ADD_FAILURE() << engine.name << " differs from the reference on\n  " << text << "\nexpected "
                    << expected.size() << " matches, got " << sink.size() << "\nevents:\n"
                    << describeEvents(events);
    }
  }

  Generator gen_;
  std::map<std::string, EngineStats> stats_;
  int failures_ = 0;
};

TEST(EnginesDifferentialTest, EveryEngineThatAcceptsAQueryReportsTheReferencesMatches) {
  for (const Engine& e : kEngines) ASSERT_NE(loadBuiltEngine(e.name), nullptr) << e.name;
  const uint64_t cases = envOr("CEPBUS_DIFFERENTIAL_CASES", 10000);
  EnginesDifferential run(static_cast<uint32_t>(envOr("CEPBUS_DIFFERENTIAL_SEED", 20261201)));
  for (uint64_t i = 0; i < cases && run.failures() < 5; ++i)
    run.runCase(/*long_stream=*/i % 10 == 9);
  std::ostringstream summary;
  for (const Engine& e : kEngines) {
    const EngineStats& s = run.stats(e.name);
    summary << e.name << ": " << s.compared << " compared (" << s.with_matches << " with matches, "
            << s.matches << " matches; by strategy";
    for (pattern::Strategy k : kStrategies) {
      summary << ' ' << pattern::strategyName(k) << ' '
              << s.compared_by_strategy[static_cast<size_t>(k)] << " (Kleene "
              << s.kleene_by_strategy[static_cast<size_t>(k)] << ')';
    }
    summary << "), " << s.refused << " refused; ";
    if (run.failures() > 0) continue;  // stopped early: the counts say nothing
    // Every engine is really compared, on queries that match.
    EXPECT_GT(s.compared, cases / 20) << e.name;
    EXPECT_GT(s.with_matches, s.compared / 4) << e.name;
    for (pattern::Strategy k : kStrategies) {
      EXPECT_GT(s.compared_by_strategy[static_cast<size_t>(k)], cases / 100)
          << e.name << " " << pattern::strategyName(k);
      // Kleene elements too, on every engine and under every strategy.
      EXPECT_GT(s.kleene_by_strategy[static_cast<size_t>(k)], cases / 200)
          << e.name << " " << pattern::strategyName(k) << " with a Kleene element";
    }
  }
  RecordProperty("summary", summary.str());
  std::cout << "[ engines  ] " << cases << " cases; " << summary.str() << '\n';
}

// NOT at either end of the pattern: the nfa engine runs it and must agree
// with the reference; the others refuse it, naming the nfa engine.
TEST(EnginesDifferentialTest, EdgeNegationsRunOnTheNfaAndAreRefusedElsewhere) {
  for (const Engine& e : kEngines) ASSERT_NE(loadBuiltEngine(e.name), nullptr) << e.name;
  const uint64_t cases = envOr("CEPBUS_DIFFERENTIAL_CASES", 10000) / 5;
  EnginesDifferential run(static_cast<uint32_t>(envOr("CEPBUS_DIFFERENTIAL_SEED", 20261206)));
  for (uint64_t i = 0; i < cases && run.failures() < 5; ++i) {
    run.runCase(/*long_stream=*/i % 10 == 9, /*edge_negations=*/true);
  }
  if (run.failures() > 0) return;
  EXPECT_GT(run.stats("nfa").compared, cases / 2);
  EXPECT_GT(run.stats("nfa").with_matches, run.stats("nfa").compared / 4);
  // Most cases have a NOT at an edge, which the other engines refuse.
  EXPECT_GT(run.stats("algebra").refused, cases / 3);
  EXPECT_GT(run.stats("petri").refused, cases / 3);
}

}  // namespace
}  // namespace cepbus::plugins::testing
