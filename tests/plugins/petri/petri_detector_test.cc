// The petri engine as the bus sees it: loaded through the plugin ABI, one
// query per detector, checked against hand-worked cases, a brute-force
// reference and the nfa engine on random patterns and streams.

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <random>

#include "bus/core/pattern/parser.h"
#include "bus/host/loader/guarded_detector.h"
#include "bus/host/loader/plugin_loader.h"
#include "tests/plugins/petri/petri_test_support.h"

namespace cepbus::plugins::petri {
namespace {

using testing::MatchRecorder;
using Matches = std::vector<std::vector<Timestamp>>;

plugin::PluginLoader& loader() {
  static plugin::PluginLoader l({std::string(CEPBUS_TEST_BUILD_DIR) + "/plugins"});
  return l;
}

plugin::PluginPtr load(const char* name) {
  auto p = loader().load(name);
  if (!p) ADD_FAILURE() << p.status().message();
  return p ? *p : nullptr;
}

Status run(const char* engine, const std::string& query, const std::vector<EventPtr>& events,
           MatchRecorder& sink, std::vector<std::string> options = {}) {
  auto q = pattern::parseQuery(query);
  if (!q) return q.status();
  auto opts = plugin::DetectorOptions::parse(options);
  if (!opts) return opts.status();
  auto d = load(engine)->createDetector(engine, *q, *opts, sink);
  if (!d) return d.status();
  for (const EventPtr& e : events) {
    Status s = (*d)->onEvent(e);
    if (!s) return s;
  }
  return (*d)->flush();
}

Matches petri(const std::string& query, const std::vector<EventPtr>& events) {
  MatchRecorder sink;
  Status s = run("petri", query, events, sink);
  EXPECT_TRUE(s) << s.message();
  return sink.sortedTs();
}

EventPtr ev(const char* type, Timestamp ts, int64_t x = 0) {
  return EventBuilder(type).at(ts).set("x", Value(x)).build();
}

// "A@1 x=0 B@2 x=3 ...": the stream a failed comparison ran on.
std::string describe(const std::vector<EventPtr>& events) {
  std::string out;
  for (const EventPtr& e : events) {
    out += std::string(e->type().name()) + "@" + std::to_string(e->ts()) +
           " x=" + e->find(Symbol::intern("x"))->toString() + " ";
  }
  return out;
}

// Runs `query` through the petri engine and through `engine` on `rounds`
// random streams of `length` events over four types, expecting the same
// matches on each; returns how many petri found, for the caller to check
// that the streams exercised real matches. `each` sees every stream with
// petri's matches.
size_t agreeOnRandomStreams(
    const char* engine, const std::string& query, std::mt19937_64& rng, int rounds, size_t length,
    const std::function<void(const std::vector<EventPtr>&, const Matches&)>& each = nullptr) {
  size_t matched = 0;
  for (int round = 0; round < rounds; ++round) {
    const std::vector<EventPtr> events = testing::randomStream(rng, length, 4);
    MatchRecorder other;
    Status s = run(engine, query, events, other);
    EXPECT_TRUE(s) << query << ": " << s.message();
    const Matches got = petri(query, events);
    EXPECT_EQ(got, other.sortedTs()) << query << "\n" << describe(events);
    matched += got.size();
    if (each) each(events, got);
  }
  return matched;
}

// The composite events a sink collected, one sorted line each: type, span
// and the attributes `names`.
std::vector<std::string> composites(const MatchRecorder& sink,
                                    std::initializer_list<const char*> names) {
  std::vector<std::string> out;
  for (const EventPtr& e : sink.composites()) {
    std::string line = std::string(e->type().name()) + "@" + std::to_string(e->start()) + "-" +
                       std::to_string(e->ts());
    for (const char* name : names) line += " " + e->find(Symbol::intern(name))->toString();
    out.push_back(line);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(PetriDetector, EveryCombinationInOrderIsAMatch) {
  const std::vector<EventPtr> s = {ev("A", 1), ev("B", 2), ev("A", 3), ev("B", 4), ev("C", 5)};
  EXPECT_EQ(petri("PATTERN SEQ(A a, B b, C c)", s), (Matches{{1, 2, 5}, {1, 4, 5}, {3, 4, 5}}));
}

TEST(PetriDetector, TimestampsMustStrictlyIncrease) {
  const std::vector<EventPtr> s = {ev("A", 1), ev("B", 1), ev("B", 2), ev("A", 2), ev("A", 3)};
  EXPECT_EQ(petri("PATTERN SEQ(A a, B b)", s), (Matches{{1, 2}}));
  // One event never fills two positions, even of the same type.
  EXPECT_EQ(petri("PATTERN SEQ(A a, A b)", s), (Matches{{1, 2}, {1, 3}, {2, 3}}));
}

TEST(PetriDetector, WithinIsInclusive) {
  const std::vector<EventPtr> s = {ev("A", 1), ev("B", 11), ev("B", 12)};
  EXPECT_EQ(petri("PATTERN SEQ(A a, B b) WITHIN 10", s), (Matches{{1, 11}}));
}

TEST(PetriDetector, GuardsCompareBoundEvents) {
  const std::vector<EventPtr> s = {ev("A", 1, 5), ev("A", 2, 7), ev("B", 3, 5), ev("C", 4, 9),
                                   ev("C", 5, 1)};
  EXPECT_EQ(petri("PATTERN SEQ(A a, B b, C c) WHERE a.x = b.x AND c.x > a.x", s),
            (Matches{{1, 3, 4}}));
  EXPECT_EQ(petri("PATTERN SEQ(A a, C c) WHERE a.x > 6", s), (Matches{{2, 4}, {2, 5}}));
}

TEST(PetriDetector, UnnamedElementsMatchByType) {
  const std::vector<EventPtr> s = {ev("A", 1), ev("B", 2), ev("C", 3)};
  EXPECT_EQ(petri("PATTERN A ; B ; C", s), (Matches{{1, 2, 3}}));
}

TEST(PetriDetector, ReturnBuildsTheCompositeEvent) {
  MatchRecorder sink(/*compose=*/true);
  const std::vector<EventPtr> s = {ev("A", 1, 4), ev("B", 3, 6)};
  ASSERT_TRUE(run("petri", "PATTERN SEQ(A a, B b) RETURN Pair(a.x, b.x + a.x AS sum)", s, sink));
  ASSERT_EQ(sink.composites().size(), 1u);
  const Event& c = *sink.composites()[0];
  EXPECT_EQ(c.type().name(), "Pair");
  EXPECT_EQ(c.find(Symbol::intern("a_x"))->asInt(), 4);
  EXPECT_EQ(c.find(Symbol::intern("sum"))->asInt(), 10);
  EXPECT_EQ(c.start(), 1);
  EXPECT_EQ(c.ts(), 3);
  EXPECT_EQ(c.constituents().size(), 2u);
}

TEST(PetriDetector, RejectsWhatItDoesNotImplementByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"PATTERN SEQ(A a, B* b[], C c)", "Kleene star"},
      {"PATTERN SEQ(A a, B+ b[], NOT(D d), C c)", "next to a Kleene element"},
      {"PATTERN SEQ(A a, B+ b[]) + C c", "Kleene element 'Type+ var[]' inside a conjunction"},
      {"PATTERN SEQ(A a, B+ b[], C+ c[]) WHERE b[i].x < c[1].x", "no later Kleene"},
      {"PATTERN SEQ(A a, NOT(C c), B b, D d) WHERE c.x = d.x", "only elements up to"},
      {"PATTERN SEQ(A a, B b + C c)", "conjunction 'AND(...)' / '+' only outside sequences"},
      {"PATTERN SEQ(A a + B b, C c)", "conjunction 'AND(...)' / '+' only outside sequences"},
      {"PATTERN AND(D d, SEQ(A a, NOT(C c), B b)) WHERE c.x = d.x", "only that operand"},
      {"PATTERN (A a)*", "iteration"},
      {"PATTERN A a - B b", "negation '-'"},
      {"PATTERN SEQ(A a, OR(B b, C c)) WHERE a.x = b.x", "only some alternatives"},
      {"PATTERN SEQ(A a, B b) CONTEXT recent", "CONTEXT recent"},
      // 2^7 = 128 alternatives, through SEQ; and 2 x 2 x ... through AND.
      {"PATTERN SEQ(OR(A a, B b), OR(C c, D d), OR(E e, F f), OR(G g, H h), OR(I i, J j), "
       "OR(K k, L l), OR(M m, N n))",
       "at most 64 alternatives"},
      {"PATTERN AND(OR(A a, B b), OR(C c, D d), OR(E e, F f), OR(G g, H h), OR(I i, J j), "
       "OR(K k, L l), OR(M m, N n))",
       "at most 64 alternatives"},
  };
  for (const auto& [query, name] : cases) {
    MatchRecorder sink;
    Status s = run("petri", query, {}, sink);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << query;
    EXPECT_NE(s.message().find(name), std::string::npos) << query << ": " << s.message();
    EXPECT_NE(s.message().find("petri"), std::string::npos) << s.message();
  }
  MatchRecorder conflict_and;
  Status c = run("petri", "PATTERN A a + B b", {}, conflict_and, {"policy=conflict"});
  EXPECT_EQ(c.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(c.message().find("policy=feedback only"), std::string::npos) << c.message();
  MatchRecorder conflict_kleene;
  Status k = run("petri", "PATTERN SEQ(A a, B+ b[])", {}, conflict_kleene, {"policy=concurrency"});
  EXPECT_EQ(k.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(k.message().find("policy=feedback only"), std::string::npos) << k.message();
  MatchRecorder bad_policy;
  Status p = run("petri", "PATTERN SEQ(A a, B b)", {}, bad_policy, {"policy=greedy"});
  EXPECT_EQ(p.code(), Status::Code::kInvalidArgument);
  MatchRecorder sink;
  Status s = run("petri", "PATTERN SEQ(A a, B b)", {}, sink, {"construction=batched"});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("construction"), std::string::npos) << s.message();
}

TEST(PetriDetector, RejectsEventsOutOfTimeOrder) {
  MatchRecorder sink;
  Status s = run("petri", "PATTERN SEQ(A a, B b)", {ev("A", 5), ev("B", 4)}, sink);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
}

// The central differential test: random patterns and streams give exactly
// the brute-force reference's matches and the nfa engine's.
TEST(PetriDetector, SameMatchesAsBruteForceAndNfa) {
  std::mt19937_64 rng(20261129);
  size_t nonempty = 0;
  for (int round = 0; round < 500; ++round) {
    const testing::RandomPattern p = testing::randomPattern(rng, 4, 3);
    const std::vector<EventPtr> events = testing::randomStream(rng, 30, 3);
    const std::string q = p.text();
    const Matches expected = testing::bruteForce(p, events);
    nonempty += !expected.empty();
    EXPECT_EQ(petri(q, events), expected) << q;
    MatchRecorder nfa;
    Status s = run("nfa", q, events, nfa);
    ASSERT_TRUE(s) << q << ": " << s.message();
    EXPECT_EQ(nfa.sortedTs(), expected) << q;
  }
  EXPECT_GT(nonempty, 200u);  // the random cases exercise real matches
}

// PROBABILITY >= p on uncertain streams: the brute force's likely matches,
// from petri and nfa, the composites carrying the product.
TEST(PetriDetector, ProbabilityBoundAgreesWithBruteForceAndNfa) {
  std::mt19937_64 rng(77);
  size_t kept = 0;
  for (int round = 0; round < 400; ++round) {
    testing::RandomPattern p = testing::randomPattern(rng, 4, 3);
    p.min_probability = 0.125 * static_cast<double>(1 + rng() % 6);
    const std::vector<EventPtr> events = testing::randomStream(rng, 30, 3, true);
    const std::string q = p.text();
    const Matches expected = testing::bruteForce(p, events);
    kept += expected.size();
    MatchRecorder sink(/*compose=*/true);
    ASSERT_TRUE(run("petri", q, events, sink)) << q;
    EXPECT_EQ(sink.sortedTs(), expected) << q;
    for (const EventPtr& c : sink.composites()) {
      double prob = 1;
      for (const EventPtr& e : c->constituents()) prob *= e->probability();
      EXPECT_EQ(c->probability(), prob) << q;
      EXPECT_GE(c->probability(), p.min_probability) << q;
    }
    MatchRecorder nfa;
    ASSERT_TRUE(run("nfa", q, events, nfa)) << q;
    EXPECT_EQ(nfa.sortedTs(), expected) << q;
  }
  EXPECT_GT(kept, 200u);
}

// Disjunction (one chain per alternative into one output place) and
// selection (a guard on the operand's last transition) against the algebra
// engine, whose semantics coincide under CONTEXT unrestricted.
TEST(PetriDetector, DisjunctionAndSelectionAgreeWithTheAlgebraEngine) {
  const char* queries[] = {
      "PATTERN OR(SEQ(A a, B b), SEQ(C c, D d)) WITHIN 6",
      "PATTERN SEQ(A a, OR(B b, C c), D d) WHERE a.x != d.x WITHIN 8",
      "PATTERN SEQ(A a, B b[b.x > 1], C c) WHERE a.x <= c.x WITHIN 8",
      "PATTERN SEQ(A a, OR(B b[b.x = 0], SEQ(C c, D d)[c.x < d.x])) WITHIN 7",
      "PATTERN A a | SEQ(B b, A c) WITHIN 4",
  };
  std::mt19937_64 rng(31);
  for (const char* q : queries) {
    EXPECT_GT(
        agreeOnRandomStreams("algebra", std::string(q) + " CONTEXT unrestricted", rng, 25, 40), 10u)
        << q;
  }
}

// NOT(Type var) between two elements: an inhibitor place of that type on
// the transition of the element after it. Same matches as the nfa engine.
TEST(PetriDetector, NegationAgreesWithTheNfaEngine) {
  const char* queries[] = {
      "PATTERN SEQ(A a, NOT(C c), B b) WITHIN 6",
      "PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x = a.x WITHIN 6",
      "PATTERN SEQ(A a, B b, NOT(A c), C d) WHERE c.x > b.x AND a.x = d.x WITHIN 8",
      "PATTERN SEQ(A a, NOT(B), C c) WITHIN 5",
      "PATTERN SEQ(A a, NOT(C c), NOT(D d), B b) WHERE d.x = b.x AND c.x != 0 WITHIN 7",
  };
  std::mt19937_64 rng(41);
  for (const char* q : queries) {
    // The same pattern without its NOTs (and its WHERE) matches more: the negation bites.
    std::string positive = q;
    for (size_t at; (at = positive.find("NOT(")) != std::string::npos;) {
      positive.erase(at, positive.find("), ", at) + 3 - at);
    }
    const size_t where = positive.find(" WHERE ");
    if (where != std::string::npos) positive.erase(where, positive.find(" WITHIN") - where);
    size_t blocked = 0;
    const size_t matched = agreeOnRandomStreams(
        "nfa", q, rng, 25, 40, [&](const std::vector<EventPtr>& events, const Matches& got) {
          blocked += petri(positive, events).size() > got.size();
        });
    EXPECT_GT(matched, 10u) << q;
    EXPECT_GT(blocked, 0u) << q;
  }
}

class LabelledSink final : public plugin::MultiMatchSink {
 public:
  explicit LabelledSink(size_t n) : sinks(n) {}
  void onMatch(size_t pattern, const plugin::Match& match) override {
    sinks.at(pattern).onMatch(match);
  }
  std::vector<MatchRecorder> sinks;
};

// createMany() merges every query into one net: each match is labelled with
// its query and equals what the query gives alone; the model names them all.
TEST(PetriDetector, CreateManyRunsOneMergedNetLabelledPerQuery) {
  const std::vector<std::string> texts = {
      "PATTERN SEQ(A a, B b, C c) WHERE a.x = c.x WITHIN 8", "PATTERN SEQ(A a, B b, D d) WITHIN 8",
      "PATTERN SEQ(D d, B b, C c) WHERE d.x = c.x WITHIN 8",  // back join with the first
      "PATTERN SEQ(A a, B b, C c) WHERE a.x = c.x WITHIN 8",  // a replica of the first
  };
  std::vector<plugin::NamedQuery> queries;
  for (size_t i = 0; i < texts.size(); ++i) {
    queries.push_back(plugin::NamedQuery{"q" + std::to_string(i), *pattern::parseQuery(texts[i])});
  }
  LabelledSink sink(texts.size());
  auto d = load("petri")->createManyDetectors("petri", queries, plugin::DetectorOptions(), sink);
  ASSERT_TRUE(d) << d.status().message();
  std::mt19937_64 rng(3);
  const std::vector<EventPtr> events = testing::randomStream(rng, 200, 4);
  for (const EventPtr& e : events) ASSERT_TRUE((*d)->onEvent(e));
  ASSERT_TRUE((*d)->flush());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(sink.sinks[i].sortedTs(), petri(texts[i], events)) << texts[i];
    EXPECT_FALSE(sink.sinks[i].empty()) << texts[i];
  }
  auto json = (*d)->exportModel("json");
  ASSERT_TRUE(json) << json.status().message();
  for (const char* name : {"\"q0\"", "\"q1\"", "\"q2\"", "\"q3\"", "\"join\""}) {
    EXPECT_NE(json->find(name), std::string::npos) << name << "\n" << *json;
  }
  // A query the engine cannot run is named.
  queries.push_back(plugin::NamedQuery{"kleene", *pattern::parseQuery("PATTERN SEQ(A a, B* b[])")});
  auto bad = load("petri")->createManyDetectors("petri", queries, plugin::DetectorOptions(), sink);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("query 'kleene': "), std::string::npos)
      << bad.status().message();
}

// Queries partitioned alike run one merged net per partition: each gives
// what its WHERE-equality form gives alone, and the model shows one net of
// both; a set partitioned differently runs each query on its own.
TEST(PetriDetector, PartitionedQueriesShareANetPerPartition) {
  const std::vector<std::pair<std::string, std::string>> texts = {
      {"PATTERN SEQ(A a, B b, C c) WITHIN 8 PARTITION BY x",
       "PATTERN SEQ(A a, B b, C c) WHERE a.x = b.x AND b.x = c.x WITHIN 8"},
      {"PATTERN SEQ(A a, B b, D d) WITHIN 8 PARTITION BY x",
       "PATTERN SEQ(A a, B b, D d) WHERE a.x = b.x AND b.x = d.x WITHIN 8"},
  };
  std::mt19937_64 rng(5);
  const std::vector<EventPtr> events = testing::randomStream(rng, 300, 4);
  for (const char* second : {"", " PARTITION BY x"}) {
    std::vector<plugin::NamedQuery> queries;
    queries.push_back({"q0", *pattern::parseQuery(texts[0].first)});
    queries.push_back({"q1", *pattern::parseQuery(std::string(texts[1].second) + second)});
    LabelledSink sink(2);
    auto d = load("petri")->createManyDetectors("petri", queries, plugin::DetectorOptions(), sink);
    ASSERT_TRUE(d) << d.status().message();
    for (const EventPtr& e : events) ASSERT_TRUE((*d)->onEvent(e));
    ASSERT_TRUE((*d)->flush());
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(sink.sinks[i].sortedTs(), petri(texts[i].second, events)) << i << second;
      EXPECT_FALSE(sink.sinks[i].empty()) << i << second;
    }
  }
  std::vector<plugin::NamedQuery> alike;
  for (size_t i = 0; i < 2; ++i) {
    alike.push_back({"q" + std::to_string(i), *pattern::parseQuery(texts[i].first)});
  }
  LabelledSink sink(2);
  auto d = load("petri")->createManyDetectors("petri", alike, plugin::DetectorOptions(), sink);
  ASSERT_TRUE(d) << d.status().message();
  auto json = (*d)->exportModel("json");
  ASSERT_TRUE(json) << json.status().message();
  for (const char* name : {"\"q0\"", "\"q1\""}) {
    EXPECT_NE(json->find(name), std::string::npos) << name << "\n" << *json;
  }
}

// Conjunction: each operand a chain, joined by a two-input transition that
// pairs the operands in any order within the window (P1's m ∪ n).
TEST(PetriDetector, ConjunctionPairsOperandsInAnyOrder) {
  const std::vector<EventPtr> s = {ev("A", 1), ev("B", 2), ev("B", 5), ev("A", 5), ev("A", 9)};
  // In pattern order (a then b) whatever their order in time; equal ts pair.
  EXPECT_EQ(petri("PATTERN A a + B b WITHIN 3", s), (Matches{{1, 2}, {5, 2}, {5, 5}}));
  // The same chain on both sides: one event may fill both (the algebra's
  // union of two leaves).
  EXPECT_EQ(petri("PATTERN A a + A b WITHIN 1", {ev("A", 1), ev("A", 3)}),
            (Matches{{1, 1}, {3, 3}}));
  EXPECT_EQ(petri("PATTERN AND(A a, B b, A c) WHERE a.x < c.x WITHIN 4",
                  {ev("A", 1, 0), ev("B", 2), ev("A", 3, 1)}),
            (Matches{{1, 2, 3}}));
}

TEST(PetriDetector, ConjunctionAgreesWithTheAlgebraEngine) {
  const char* queries[] = {
      "PATTERN A a + B b WITHIN 4",
      "PATTERN A a + A b WITHIN 3",
      "PATTERN AND(SEQ(A a, B b), C c) WHERE a.x = c.x WITHIN 6",
      "PATTERN AND(A a, B b, C c) WHERE a.x < c.x AND b.x != c.x WITHIN 5",
      "PATTERN A a + SEQ(B b, A c) WHERE a.x != c.x WITHIN 5",
      "PATTERN (A a + SEQ(B b, C c))[a.x >= b.x] WITHIN 6",
      "PATTERN OR(A a + B b, SEQ(C c, D d)) WITHIN 5",
      "PATTERN AND(A a, OR(B b, SEQ(C c, D d))) WITHIN 5",
      "PATTERN AND(SEQ(A a, B b), SEQ(A c, B d)) WHERE a.x = c.x WITHIN 7",
      "PATTERN A a + B b",
  };
  std::mt19937_64 rng(53);
  for (const char* q : queries) {
    EXPECT_GT(
        agreeOnRandomStreams("algebra", std::string(q) + " CONTEXT unrestricted", rng, 20, 30), 10u)
        << q;
  }
}

// NOT inside an operand (which the algebra engine does not run): the
// conjunction is every pair of the operands' own matches within the window.
TEST(PetriDetector, ConjunctionOfANegatedSequenceIsEveryPairOfOperandMatches) {
  std::mt19937_64 rng(59);
  size_t matched = 0;
  for (int round = 0; round < 20; ++round) {
    const std::vector<EventPtr> events = testing::randomStream(rng, 40, 4);
    const Matches left = petri("PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x = a.x WITHIN 6", events);
    const Matches right = petri("PATTERN SEQ(D d, A e) WITHIN 6", events);
    Matches expected;
    for (const auto& l : left) {
      for (const auto& r : right) {
        const Timestamp lo = std::min(l.front(), r.front());
        const Timestamp hi = std::max(l.back(), r.back());
        if (hi - lo > 6) continue;
        expected.push_back({l[0], l[1], r[0], r[1]});
      }
    }
    std::sort(expected.begin(), expected.end());
    const Matches got = petri(
        "PATTERN AND(SEQ(A a, NOT(C c), B b), SEQ(D d, A e)) WHERE c.x = a.x WITHIN 6", events);
    EXPECT_EQ(got, expected);
    matched += got.size();
  }
  EXPECT_GT(matched, 10u);
}

// Kleene plus inside SEQ: a one-input transition looping on its own place,
// whose tokens are the runs. Same matches as the nfa engine.
TEST(PetriDetector, KleeneRunsLoopOnTheirPlace) {
  const std::vector<EventPtr> s = {ev("A", 1), ev("B", 2), ev("B", 3), ev("C", 4)};
  EXPECT_EQ(petri("PATTERN SEQ(A a, B+ b[], C c)", s),
            (Matches{{1, 2, 3, 4}, {1, 2, 4}, {1, 3, 4}}));
  EXPECT_EQ(petri("PATTERN SEQ(A a, B+ b[])", s), (Matches{{1, 2}, {1, 2, 3}, {1, 3}}));
}

TEST(PetriDetector, KleeneAgreesWithTheNfaEngine) {
  const char* queries[] = {
      "PATTERN SEQ(A a, B+ b[], C c) WITHIN 6",
      "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > b[i-1].x WITHIN 8",
      "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x >= a.x AND c.x != a.x WITHIN 7",
      "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x < c.x WITHIN 7",
      "PATTERN SEQ(A a, B+ b[]) WHERE count(b[]) >= 2 AND b[i].x != 1 WITHIN 5",
      "PATTERN SEQ(B+ b[], C c) WHERE sum(b[].x) > c.x WITHIN 5",
      "PATTERN SEQ(A a, B+ b[], C c) WHERE b[last].x = c.x AND b[1].x = a.x WITHIN 8",
      "PATTERN SEQ(A a, B+ b[], A c, B+ d[]) WHERE d[i].x > c.x WITHIN 6",
      "PATTERN SEQ(A a, NOT(C n), D d, B+ b[], C c) WITHIN 8",
      "PATTERN SEQ(A, B+ b[], C c) WHERE avg(b[].x) < 2 WITHIN 6",
  };
  std::mt19937_64 rng(67);
  for (const char* q : queries) EXPECT_GT(agreeOnRandomStreams("nfa", q, rng, 40, 30), 10u) << q;
}

TEST(PetriDetector, KleeneInsideADisjunctionIsTheUnionOfItsAlternatives) {
  const std::string x = "SEQ(A a, B+ b[], C c)";
  const std::string y = "SEQ(D d, C e)";
  const std::string where = " WITHIN 5";
  std::mt19937_64 rng(73);
  size_t matched = 0;
  for (int round = 0; round < 20; ++round) {
    const std::vector<EventPtr> events = testing::randomStream(rng, 30, 4);
    Matches expected = petri("PATTERN " + x + where, events);
    for (const auto& m : petri("PATTERN " + y + " WITHIN 5", events)) expected.push_back(m);
    std::sort(expected.begin(), expected.end());
    const Matches got = petri("PATTERN OR(" + x + ", " + y + ")" + where, events);
    EXPECT_EQ(got, expected);
    matched += got.size();
  }
  EXPECT_GT(matched, 10u);
}

// A Kleene element binds several events: Match::elementEvents() and the
// RETURN clause's aggregates see the whole run, as the nfa engine's do.
TEST(PetriDetector, KleeneCompositesEqualTheNfaEngines) {
  const std::string q =
      "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x >= b[i-1].x WITHIN 6 "
      "RETURN R(a.x, count(b[]) AS n, sum(b[].x) AS s, b[last].x AS l, c.x)";
  std::mt19937_64 rng(71);
  const std::vector<EventPtr> events = testing::randomStream(rng, 60, 3);
  MatchRecorder p(/*compose=*/true), n(/*compose=*/true);
  ASSERT_TRUE(run("petri", q, events, p));
  ASSERT_TRUE(run("nfa", q, events, n));
  ASSERT_GT(p.composites().size(), 10u);
  EXPECT_EQ(composites(p, {"a_x", "n", "s", "l", "c_x"}),
            composites(n, {"a_x", "n", "s", "l", "c_x"}));
}

TEST(PetriDetector, CompositesEqualTheNfaEngines) {
  const std::string q =
      "PATTERN SEQ(A a, B b, A c) WHERE a.x <= c.x WITHIN 6 RETURN R(a.x, c.x, b.ts AS bt)";
  std::mt19937_64 rng(7);
  const std::vector<EventPtr> events = testing::randomStream(rng, 60, 2);
  MatchRecorder p(/*compose=*/true), n(/*compose=*/true);
  ASSERT_TRUE(run("petri", q, events, p));
  ASSERT_TRUE(run("nfa", q, events, n));
  ASSERT_FALSE(p.composites().empty());
  EXPECT_EQ(composites(p, {"a_x", "c_x", "bt"}), composites(n, {"a_x", "c_x", "bt"}));
}

std::unique_ptr<plugin::GuardedDetector> petriDetector(const std::string& query,
                                                       MatchRecorder& sink) {
  auto q = pattern::parseQuery(query);
  EXPECT_TRUE(q.isOk()) << q.status().message();
  auto d = load("petri")->createDetector("petri", *q, plugin::DetectorOptions(), sink);
  EXPECT_TRUE(d.isOk()) << d.status().message();
  return std::move(d).value();
}

uint64_t tokens(const plugin::Detector& d) {
  const std::optional<plugin::DetectorState> s = d.state();
  EXPECT_TRUE(s.has_value());
  return s ? s->partial_matches : 0;
}

EventPtr uncertain(const char* type, Timestamp ts, double prob) {
  return EventBuilder(type).at(ts).probability(prob).build();
}

// SEQ(A, B, C) keeps tokens in two places, <a> and <a;b>; the last
// transition's tokens are matches, not kept. A place's tokens expire when
// its consumer fires past the window.
TEST(PetriDetector, StateCountsTheTokensInThePlaces) {
  MatchRecorder sink;
  auto d = petriDetector("PATTERN SEQ(A a, B b, C c) WITHIN 8", sink);
  EXPECT_EQ(tokens(*d), 0u);
  ASSERT_TRUE(d->onEvent(ev("A", 1)));
  ASSERT_TRUE(d->onEvent(ev("A", 2)));
  ASSERT_TRUE(d->onEvent(ev("B", 3)));
  // a1, a2; b3, one lazy token standing for a1;b3 and a2;b3.
  EXPECT_EQ(tokens(*d), 3u);
  ASSERT_TRUE(d->onEvent(ev("B", 100)));
  EXPECT_EQ(tokens(*d), 1u);  // <a> expired when B fired, and b100 pairs with none
  ASSERT_TRUE(d->onEvent(ev("C", 101)));
  EXPECT_EQ(tokens(*d), 0u);
  EXPECT_TRUE(sink.empty());
  EXPECT_EQ(d->state()->peak_partial_matches, 3u);
}

TEST(PetriDetector, ProbabilityBoundKeepsFewerTokens) {
  const std::vector<EventPtr> events = {uncertain("A", 1, 0.5), uncertain("A", 2, 0.95),
                                        uncertain("B", 3, 0.95)};
  MatchRecorder all_sink, likely_sink;
  auto all = petriDetector("PATTERN SEQ(A a, B b, C c) WITHIN 8", all_sink);
  auto likely =
      petriDetector("PATTERN SEQ(A a, B b, C c) WITHIN 8 PROBABILITY >= 0.9", likely_sink);
  ASSERT_TRUE(all->onEvents(events));
  ASSERT_TRUE(likely->onEvents(events));
  EXPECT_EQ(tokens(*all), 3u);     // a1, a2 and b3 (standing for a1;b3 and a2;b3)
  EXPECT_EQ(tokens(*likely), 2u);  // a2 and b3 (a2;b3 0.9025)
}

// One net per partition: the partitioned detector adds theirs up.
TEST(PetriDetector, StateAddsUpThePartitionsNets) {
  MatchRecorder sink;
  auto d = petriDetector("PATTERN SEQ(A a, B b, C c) WITHIN 8 PARTITION BY x", sink);
  ASSERT_TRUE(d->onEvent(ev("A", 1, 1)));
  ASSERT_TRUE(d->onEvent(ev("A", 2, 2)));
  ASSERT_TRUE(d->onEvent(ev("B", 3, 1)));
  EXPECT_EQ(tokens(*d), 3u);  // x=1: a1, a1;b3; x=2: a2
  // Both partitions are quiet for longer than the window: dropped.
  ASSERT_TRUE(d->onEvent(ev("A", 50, 3)));
  EXPECT_EQ(tokens(*d), 1u);
  EXPECT_EQ(d->state()->peak_partial_matches, 3u);
}

}  // namespace
}  // namespace cepbus::plugins::petri
