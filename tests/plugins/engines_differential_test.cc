// One pattern language on every engine: random SEQ queries (negation, Kleene
// plus, predicates, windows, partitions, every strategy) over random streams
// run on the nfa, algebra (CONTEXT unrestricted) and petri plugins, and each
// engine that accepts a query must report exactly the matches of the
// brute-force reference (tests/plugins/nfa/reference_matcher.h). Where an
// engine refuses, its message must name the construct and an engine that
// runs it. Detectors are made as the host makes them: NOT at an edge of the
// pattern, which the nfa runs itself, runs on the others through the host's
// edge negation (bus/host/detection/edge_negation.h), so what they refuse is
// read off the query without it.
//
// Output control (EMIT FIRST|LAST EVERY, AFTER MATCH SKIP PAST LAST EVENT)
// runs in the host around each engine's detector and must let out exactly
// what the reference's matches give under output_control_reference.h.
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
#include "bus/host/detection/edge_negation.h"
#include "bus/host/detection/output_control.h"
#include "bus/host/loader/plugin_loader.h"
#include "tests/plugins/built_engines.h"
#include "tests/plugins/nfa/nfa_test_support.h"
#include "tests/plugins/nfa/random_queries.h"
#include "tests/plugins/nfa/reference_matcher.h"
#include "tests/plugins/output_control_reference.h"

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
       if (c.negation_before_kleene)
         return {"not before a Kleene element", "the nfa engine runs it"};
       if (c.negation_names_later) {
         return {"relates a negated operand", "the nfa engine runs it"};
       }
       return {};
     }},
    {"petri", "",
     [](const Constructs& c, const pattern::Query&) -> std::vector<std::string> {
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
  uint64_t edge_negation = 0;             // compared with a NOT at an edge
  uint64_t edge_with_matches = 0;         // ... of those, with at least one match
};

// The detector of `engine` for `query`, made as the host makes it.
Result<std::unique_ptr<plugin::GuardedDetector>> hostDetector(const char* engine,
                                                              const pattern::Query& query,
                                                              plugin::MatchSink& sink) {
  const std::vector<plugin::NamedQuery> queries = {{"q", query}};
  auto make = [engine](std::span<const plugin::NamedQuery> qs, plugin::MatchSink& one,
                       plugin::MultiMatchSink&) {
    return loadBuiltEngine(engine)->createDetector(engine, qs.front().query,
                                                   plugin::DetectorOptions(), one);
  };
  struct NoMany final : plugin::MultiMatchSink {
    void onMatch(size_t, const plugin::Match&) override {}
  } unused;
  return detection::EdgeNegation::makeDetector(queries, make, sink, unused, /*several=*/false);
}

constexpr pattern::Strategy kStrategies[] = {pattern::Strategy::kStrictContiguity,
                                             pattern::Strategy::kSkipTillNextMatch,
                                             pattern::Strategy::kSkipTillAnyMatch};

class EnginesDifferential {
 public:
  explicit EnginesDifferential(uint32_t seed) : gen_(seed) {}

  // One random query over one random stream on every engine;
  // `edge_negations` as Generator::query() takes it. `timely`: time passes
  // as the host passes it with no maximum delay (after each event, to just
  // before it), else only at the end.
  void runCase(bool long_stream, bool edge_negations = false, bool timely = false) {
    timely_ = timely;
    bool kleene = false;
    const std::string text = gen_.query(kleene, long_stream, edge_negations);
    auto q = pattern::parseQuery(text);
    ASSERT_TRUE(q.isOk()) << text << ": " << q.status().message();
    const auto events = long_stream ? gen_.events(gen_.uniform(40, 80))
                                    : gen_.events(gen_.uniform(4, kleene ? 12 : 20));
    auto expected = ReferenceMatcher(*q).run(events);
    std::sort(expected.begin(), expected.end());
    // What an engine refuses is what is left once the host takes the edge
    // negation: the nfa refuses none of it.
    const Constructs constructs = constructsOf(detection::withoutEdgeNegation(*q));
    edge_ = constructsOf(*q).edge_negation;
    for (const Engine& engine : kEngines) {
      const std::string query = text + engine.suffix;
      check(engine, query, engine.refusal(constructs, *q), constructs.kleene, events, expected);
    }
  }

  // One random query with random output control over one random stream on
  // every engine that accepts the query, through the host's rules.
  void runControlledCase(bool long_stream, bool edge_negations) {
    bool kleene = false;
    std::string text = gen_.query(kleene, long_stream, edge_negations);
    auto plain = pattern::parseQuery(text);
    ASSERT_TRUE(plain.isOk()) << text << ": " << plain.status().message();
    const pattern::Variable& first = plain->variables.front();
    std::string per_attr;
    const bool skip = gen_.chance(0.5);
    if (skip) text += " AFTER MATCH SKIP PAST LAST EVENT";
    const int emit = gen_.uniform(0, 2);  // none (with SKIP), FIRST, LAST
    if (emit > 0 || !skip) {
      text += std::string(emit == 2 ? " EMIT LAST" : " EMIT FIRST") + " EVERY " +
              std::to_string(gen_.uniform(1, 6));
      if (first.kind == pattern::VarKind::kSingle && gen_.chance(0.5)) {
        per_attr = gen_.chance(0.5) ? "sym" : "key";
        text += " PER " + first.name + "." + per_attr;
      }
    }
    auto q = pattern::parseQuery(text);
    ASSERT_TRUE(q.isOk()) << text << ": " << q.status().message();
    const auto events = long_stream ? gen_.events(gen_.uniform(40, 80))
                                    : gen_.events(gen_.uniform(4, kleene ? 12 : 20));
    auto expected =
        OutputControlReference(*q, per_attr).run(events, ReferenceMatcher(*q).run(events));
    std::sort(expected.begin(), expected.end());
    const Constructs constructs = constructsOf(detection::withoutEdgeNegation(*q));
    for (const Engine& engine : kEngines) {
      if (!engine.refusal(constructs, *q).empty()) continue;
      checkControlled(engine, text + engine.suffix, events, expected);
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
    auto made = hostDetector(engine.name, *q, sink);
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
    Timestamp newest = INT64_MIN;
    for (const EventPtr& e : events) {
      Status s = (*made)->onEvent(e);
      if (s && timely_ && e->ts() > newest) s = (*made)->onWatermark(e->ts() - 1);
      newest = std::max(newest, e->ts());
      if (!s) {
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
    st.edge_negation += edge_ ? 1 : 0;
    st.edge_with_matches += edge_ && !expected.empty() ? 1 : 0;
    if (sink.sortedIds() != expected) {
      ++failures_;
      ADD_FAILURE() << engine.name << " differs from the reference on\n  " << text << "\nexpected "
                    << expected.size() << " matches, got " << sink.size() << "\nevents:\n"
                    << describeEvents(events);
    }
  }

  // Hands a member's matches to a recorder.
  class ToRecorder final : public detection::MemberSink {
   public:
    explicit ToRecorder(MatchRecorder& recorder) : recorder_(recorder) {}
    void onMatch(size_t /*member*/, const plugin::Match& match) override {
      recorder_.onMatch(match);
    }

   private:
    MatchRecorder& recorder_;
  };

  // `text` on `engine` behind the host's output control, time passing as the
  // host passes it with no maximum delay: after each event, to just before it.
  void checkControlled(const Engine& engine, const std::string& text,
                       const std::vector<EventPtr>& events,
                       const std::vector<std::vector<EventId>>& expected) {
    EngineStats& st = stats_[engine.name];
    auto q = pattern::parseQuery(text);
    ASSERT_TRUE(q.isOk()) << text;
    MatchRecorder sink;
    ToRecorder to(sink);
    detection::MemberRelay relay;
    relay.attach(to);
    const std::vector<plugin::NamedQuery> queries = {{"q", *q}};
    auto control = detection::OutputControl::create(queries, relay);
    ASSERT_TRUE(control.isOk()) << text << ": " << control.status().message();
    auto make = [&engine](std::span<const plugin::NamedQuery> qs, plugin::MatchSink& one,
                          plugin::MultiMatchSink&) {
      return loadBuiltEngine(engine.name)
          ->createDetector(engine.name, qs.front().query, plugin::DetectorOptions(), one);
    };
    auto made = detection::EdgeNegation::makeDetector(queries, make, **control, **control,
                                                      /*several=*/false);
    if (!made) {
      ++failures_;
      ADD_FAILURE() << engine.name << " refuses " << text << ": " << made.status().message();
      return;
    }
    auto detector =
        detection::OutputControl::wrap(std::move(control).value(), std::move(made).value());
    Timestamp newest = INT64_MIN;
    Status s = Status::ok();
    for (const EventPtr& e : events) {
      s = detector->onEvent(e);
      if (s && e->ts() > newest) s = detector->onWatermark(e->ts() - 1);
      newest = std::max(newest, e->ts());
      if (!s) break;
    }
    if (s) s = detector->onWatermark(plugin::Detector::kEndOfTime);
    if (s) s = detector->flush();
    if (!s) {
      ++failures_;
      ADD_FAILURE() << engine.name << " fails on " << text << ": " << s.message();
      return;
    }
    ++st.compared;
    st.with_matches += expected.empty() ? 0 : 1;
    st.matches += expected.size();
    if (sink.sortedIds() != expected) {
      ++failures_;
      auto ids = [&](const std::vector<std::vector<EventId>>& ms) {
        std::string out;
        for (const auto& m : ms) {
          out += " [";
          for (EventId id : m) {
            for (size_t i = 0; i < events.size(); ++i) {
              if (events[i]->id() == id) out += " #" + std::to_string(i);
            }
          }
          out += " ]";
        }
        return out;
      };
      ADD_FAILURE() << engine.name << " differs from the output control reference on\n  " << text
                    << "\nexpected" << ids(expected) << "\ngot     " << ids(sink.sortedIds())
                    << "\nevents (#0 first):\n"
                    << describeEvents(events);
    }
  }

  Generator gen_;
  std::map<std::string, EngineStats> stats_;
  int failures_ = 0;
  bool timely_ = false;  // of the case being run
  bool edge_ = false;    // the case's query has a NOT at an edge
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

// NOT at either end of the pattern: the nfa engine runs it itself, the
// algebra and petri engines through the host's edge negation, and each must
// agree with the reference, with time passing after every event (trailing
// matches let out by the watermark) or only at the end.
TEST(EnginesDifferentialTest, EdgeNegationsRunOnEveryEngine) {
  for (const Engine& e : kEngines) ASSERT_NE(loadBuiltEngine(e.name), nullptr) << e.name;
  const uint64_t cases = envOr("CEPBUS_DIFFERENTIAL_CASES", 10000) / 5;
  EnginesDifferential run(static_cast<uint32_t>(envOr("CEPBUS_DIFFERENTIAL_SEED", 20261206)));
  for (uint64_t i = 0; i < cases && run.failures() < 5; ++i) {
    run.runCase(/*long_stream=*/i % 10 == 9, /*edge_negations=*/true, /*timely=*/i % 2 == 0);
  }
  if (run.failures() > 0) return;
  std::ostringstream summary;
  for (const Engine& e : kEngines) {
    const EngineStats& s = run.stats(e.name);
    summary << e.name << ": " << s.compared << " compared, " << s.edge_negation
            << " with a NOT at an edge (" << s.edge_with_matches << " with matches), " << s.refused
            << " refused; ";
    // Most cases have a NOT at an edge, and every engine runs most of them.
    EXPECT_GT(s.edge_negation, cases / 3) << e.name;
    EXPECT_GT(s.edge_with_matches, s.edge_negation / 4) << e.name;
  }
  RecordProperty("summary", summary.str());
  std::cout << "[ edge not ] " << cases << " cases; " << summary.str() << '\n';
}

// EMIT FIRST|LAST EVERY d [PER v0.attr] and AFTER MATCH SKIP PAST LAST
// EVENT, alone and together, on random queries under every strategy: every
// engine that runs the query lets out the reference's matches.
TEST(EnginesDifferentialTest, OutputControlLetsOutTheSameMatchesOnEveryEngine) {
  for (const Engine& e : kEngines) ASSERT_NE(loadBuiltEngine(e.name), nullptr) << e.name;
  const uint64_t cases = envOr("CEPBUS_DIFFERENTIAL_CASES", 10000) / 5;
  EnginesDifferential run(static_cast<uint32_t>(envOr("CEPBUS_DIFFERENTIAL_SEED", 20261207)));
  for (uint64_t i = 0; i < cases && run.failures() < 5; ++i) {
    run.runControlledCase(/*long_stream=*/i % 10 == 9, /*edge_negations=*/i % 4 == 3);
  }
  if (run.failures() > 0) return;
  std::ostringstream summary;
  for (const Engine& e : kEngines) {
    const EngineStats& s = run.stats(e.name);
    summary << e.name << ": " << s.compared << " compared (" << s.with_matches
            << " letting matches out, " << s.matches << " matches); ";
    EXPECT_GT(s.compared, cases / 3) << e.name;
    EXPECT_GT(s.with_matches, s.compared / 4) << e.name;
  }
  std::cout << "[ output   ] " << cases << " cases; " << summary.str() << '\n';
}

}  // namespace
}  // namespace cepbus::plugins::testing
