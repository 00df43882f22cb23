// One PetriNet holding many patterns: prefix joining shrinks the net and
// changes no pattern's matches (P3's claim), removing or adding a pattern
// while events flow leaves every other pattern's matches unchanged, and
// tokens expire with the window.

#include "plugins/petri/petri_net.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>

#include "bus/core/pattern/parser.h"
#include "tests/plugins/petri/petri_test_support.h"

namespace cepbus::plugins::petri {
namespace {

using testing::MatchRecorder;
using testing::RandomPattern;
using Matches = std::vector<std::vector<Timestamp>>;

pattern::Query parse(const std::string& text) {
  auto q = pattern::parseQuery(text);
  EXPECT_TRUE(q) << text << ": " << q.status().message();
  return *q;
}

void feed(PetriNet& net, const std::vector<EventPtr>& events, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) ASSERT_TRUE(net.onEvent(events[i]));
}

// The matches of `p` run alone in a net of its own over events[from, to).
Matches alone(const RandomPattern& p, const std::vector<EventPtr>& events, size_t from, size_t to) {
  PetriNet net;
  MatchRecorder sink;
  EXPECT_TRUE(net.addPattern("p", parse(p.text()), sink));
  feed(net, events, from, to);
  return sink.sortedTs();
}

// Patterns that extend a few common heads (so that they share prefixes) with
// their own tails, predicates and windows.
std::vector<RandomPattern> patternFamily(std::mt19937_64& rng, size_t count) {
  std::vector<RandomPattern> heads;
  for (int i = 0; i < 3; ++i) heads.push_back(testing::randomPattern(rng, 3, 3));
  std::vector<RandomPattern> out;
  for (size_t i = 0; i < count; ++i) {
    RandomPattern p = heads[rng() % heads.size()];
    if (rng() % 3 == 0) {
      // A new first element in front of a head: a middle join candidate.
      p.types.insert(p.types.begin(), static_cast<char>('A' + rng() % 3));
      p.named.insert(p.named.begin(), true);
      for (testing::Pred& pr : p.preds) {
        ++pr.lhs;
        if (pr.rhs >= 0) ++pr.rhs;
      }
      if (rng() % 2 == 0) p.preds.push_back(testing::randomPred(rng, p));
    }
    const size_t tail = rng() % 3;
    for (size_t k = 0; k < tail; ++k) {
      p.types.push_back(static_cast<char>('A' + rng() % 3));
      p.named.push_back(rng() % 5 != 0);
    }
    if (tail > 0 && rng() % 2 == 0) p.preds.push_back(testing::randomPred(rng, p));
    if (rng() % 3 == 0) {
      // One of two common tails (a back join candidate), with a guard inside
      // the tail and, now and then, one reaching back before it.
      const int which = static_cast<int>(rng() % 2);
      const int at = static_cast<int>(p.types.size());
      p.types.push_back(which == 0 ? 'B' : 'C');
      p.types.push_back(which == 0 ? 'C' : 'A');
      p.named.push_back(true);
      p.named.push_back(true);
      p.preds.push_back({at + 1, at, which == 0 ? 0 : 2, 0});
      if (rng() % 2 == 0) p.preds.push_back({at, 0, 1, 0});
    }
    p.within = rng() % 3 == 0 ? std::nullopt : std::optional<int64_t>(1 + rng() % 12);
    out.push_back(std::move(p));
  }
  return out;
}

TEST(PetriNet, PrefixJoinSharesPlacesAndTransitions) {
  PetriNet net;
  MatchRecorder s1, s2, s3;
  ASSERT_TRUE(net.addPattern("abcd", parse("PATTERN SEQ(A a, B b, C c, D d)"), s1));
  EXPECT_EQ(net.size().transitions, 4u);
  ASSERT_TRUE(net.addPattern("abce", parse("PATTERN SEQ(A a, B b, C c, E e)"), s2));
  // <a;b;c> is shared: one more transition (and its output place) for E.
  EXPECT_EQ(net.size().transitions, 5u);
  EXPECT_EQ(net.size().places, 5u + 5u);  // input places A..E, one output place each
  EXPECT_EQ(net.unmergedSize().transitions, 8u);
  EXPECT_EQ(net.unmergedSize().places, 8u + 8u);
  // A different guard on b is a different head from b on.
  ASSERT_TRUE(net.addPattern("guarded", parse("PATTERN SEQ(A a, B b) WHERE b.x = a.x"), s3));
  EXPECT_EQ(net.size().transitions, 6u);
  // Same elements and guards written in another order share everything.
  MatchRecorder s4;
  ASSERT_TRUE(net.addPattern("again", parse("PATTERN SEQ(A a, B b) WHERE a.x = b.x"), s4));
  EXPECT_EQ(net.size().transitions, 7u);  // the text differs: 'a.x = b.x' vs 'b.x = a.x'
  MatchRecorder s5, s6;
  ASSERT_TRUE(net.addPattern("same", parse("PATTERN SEQ(A a, B b) WHERE a.x = b.x WITHIN 3"), s5));
  EXPECT_EQ(net.size().transitions, 7u);
  // Variable names do not matter, only positions.
  ASSERT_TRUE(net.addPattern("renamed", parse("PATTERN SEQ(A p, B q, C r) WHERE p.x = q.x"), s6));
  EXPECT_EQ(net.size().transitions, 8u);
  EXPECT_EQ(net.patternCount(), 6u);
}

TEST(PetriNet, NamesAreUniqueAndRemovalNeedsAKnownName) {
  PetriNet net;
  MatchRecorder sink;
  ASSERT_TRUE(net.addPattern("p", parse("PATTERN SEQ(A a, B b)"), sink));
  EXPECT_EQ(net.addPattern("p", parse("PATTERN SEQ(A a)"), sink).code(),
            Status::Code::kAlreadyExists);
  EXPECT_EQ(net.removePattern("q").code(), Status::Code::kNotFound);
  Status bad = net.addPattern("k", parse("PATTERN SEQ(A a, B* b[])"), sink);
  EXPECT_EQ(bad.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(net.patternCount(), 1u);
  ASSERT_TRUE(net.removePattern("p"));
  EXPECT_EQ(net.size().transitions, 0u);
  EXPECT_EQ(net.size().places, 0u);
}

TEST(PetriNet, IdenticalPatternsShareTheWholeNetAndEachGetsEveryMatch) {
  PetriNet net;
  std::vector<std::unique_ptr<MatchRecorder>> sinks;
  const std::string q = "PATTERN SEQ(A a, B b, C c) WHERE a.x = b.x AND b.x = c.x";
  for (int i = 0; i < 5; ++i) {
    sinks.push_back(std::make_unique<MatchRecorder>());
    ASSERT_TRUE(net.addPattern("p" + std::to_string(i), parse(q), *sinks.back()));
  }
  EXPECT_EQ(net.size().transitions, 3u);
  EXPECT_EQ(net.unmergedSize().transitions, 15u);
  std::mt19937_64 rng(3);
  const auto events = testing::randomStream(rng, 80, 3);
  feed(net, events, 0, events.size());
  ASSERT_FALSE(sinks[0]->empty());
  for (const auto& s : sinks) EXPECT_EQ(s->timestamps(), sinks[0]->timestamps());
}

// <a;b;c;d> after <b;c;e>: the middle <b;c> is shared and joined with a.
TEST(PetriNet, MiddleJoinSharesTheMiddleOfAPattern) {
  RandomPattern q, p;
  q.types = {'B', 'C', 'E'};
  q.named = {true, true, true};
  q.preds = {{0, 1, 0, 0}};  // v0.x = v1.x
  p.types = {'A', 'B', 'C', 'D'};
  p.named = {true, true, true, true};
  p.preds = {{1, 2, 0, 0}, {0, 2, 1, 0}};  // v1.x = v2.x AND v0.x != v2.x
  p.within = 15;
  PetriNet net;
  MatchRecorder qs, ps;
  ASSERT_TRUE(net.addPattern("q", parse(q.text()), qs));
  ASSERT_TRUE(net.addPattern("p", parse(p.text()), ps));
  EXPECT_EQ(net.size().transitions, 6u);  // B, C, E; A, the join, D
  EXPECT_EQ(net.unmergedSize().transitions, 7u);
  std::mt19937_64 rng(5);
  const auto events = testing::randomStream(rng, 300, 5);
  feed(net, events, 0, events.size());
  EXPECT_EQ(ps.sortedTs(), testing::bruteForce(p, events));
  ASSERT_FALSE(ps.empty());
  EXPECT_EQ(qs.sortedTs(), testing::bruteForce(q, events));
  // Removing the pattern whose head is shared keeps the joined one whole.
  ASSERT_TRUE(net.removePattern("q"));
  EXPECT_EQ(net.size().transitions, 5u);  // E is gone
  MatchRecorder again;
  ASSERT_TRUE(net.addPattern("p2", parse(p.text()), again));
  EXPECT_EQ(net.size().transitions, 5u);  // shares everything with p
  const auto more = testing::randomStream(rng, 300, 5);
  std::vector<EventPtr> shifted;
  for (const EventPtr& e : more) {
    shifted.push_back(EventBuilder(e->type())
                          .at(e->ts() + events.back()->ts() + 1)
                          .set("x", *e->find(Symbol::intern("x")))
                          .build());
  }
  feed(net, shifted, 0, shifted.size());
  EXPECT_EQ(again.sortedTs(), testing::bruteForce(p, shifted));
  ASSERT_FALSE(again.empty());
}

// Regression: a join over <a;a> and one over <a;a;b> with the same prefix
// are different transitions (their keys once collided).
TEST(PetriNet, JoinsOverChainsOfDifferentLengthsStayApart) {
  auto make = [](std::vector<char> types, std::vector<testing::Pred> preds) {
    RandomPattern p;
    p.types = std::move(types);
    p.named.assign(p.types.size(), true);
    p.preds = std::move(preds);
    return p;
  };
  const std::vector<RandomPattern> patterns = {
      make({'A', 'A', 'B'}, {{2, 0, 0, 0}}),  // head <a;a;b> with a guard on b
      make({'B', 'A', 'A', 'B', 'C'}, {}),    // joins <a;a> only
      make({'A', 'A', 'B'}, {}),              // head <a;a;b> without a guard
      make({'B', 'A', 'A', 'B'}, {}),         // joins <a;a;b>
  };
  PetriNet net;
  std::vector<MatchRecorder> sinks(patterns.size());
  for (size_t i = 0; i < patterns.size(); ++i) {
    ASSERT_TRUE(net.addPattern("p" + std::to_string(i), parse(patterns[i].text()), sinks[i]));
  }
  std::mt19937_64 rng(9);
  const auto events = testing::randomStream(rng, 40, 3);
  feed(net, events, 0, events.size());
  for (size_t i = 0; i < patterns.size(); ++i) {
    EXPECT_EQ(sinks[i].sortedTs(), testing::bruteForce(patterns[i], events)) << patterns[i].text();
    EXPECT_FALSE(sinks[i].empty()) << patterns[i].text();
  }
}

// P3's central claim: the merged net reports, pattern by pattern, exactly
// what one independent net per pattern reports (and the brute force).
TEST(PetriNet, MergedNetMatchesIndependentNetsPatternByPattern) {
  std::mt19937_64 rng(1129);
  size_t merged_transitions = 0, unmerged_transitions = 0, nonempty = 0, joins = 0;
  for (int round = 0; round < 60; ++round) {
    const auto patterns = patternFamily(rng, 8);
    const auto events = testing::randomStream(rng, 40, 3);
    PetriNet net;
    std::vector<MatchRecorder> sinks(patterns.size());
    for (size_t i = 0; i < patterns.size(); ++i) {
      ASSERT_TRUE(net.addPattern("p" + std::to_string(i), parse(patterns[i].text()), sinks[i]));
    }
    merged_transitions += net.size().transitions;
    unmerged_transitions += net.unmergedSize().transitions;
    const std::string json = *net.exportModel("json");
    for (size_t at = json.find("\"kind\": \"join\""); at != std::string::npos;
         at = json.find("\"kind\": \"join\"", at + 1)) {
      ++joins;
    }
    feed(net, events, 0, events.size());
    for (size_t i = 0; i < patterns.size(); ++i) {
      const Matches expected = testing::bruteForce(patterns[i], events);
      nonempty += !expected.empty();
      EXPECT_EQ(sinks[i].sortedTs(), expected) << patterns[i].text();
      EXPECT_EQ(sinks[i].sortedTs(), alone(patterns[i], events, 0, events.size()))
          << patterns[i].text();
    }
  }
  EXPECT_LT(merged_transitions, unmerged_transitions);
  EXPECT_GT(nonempty, 100u);
  // 172 with back joins, 66 with middle joins only.
  EXPECT_GT(joins, 120u);
}

// <a;b;c;d>, <e;b;c;d> and <f;b;c;d> share nothing from the head: the back
// join rewrites the first to run <b;c;d> as a chain of its own, which all
// three join with their leading place.
TEST(PetriNet, BackJoinSharesACommonTail) {
  auto make = [](char head) {
    RandomPattern p;
    p.types = {head, 'B', 'C', 'D'};
    p.named = {true, true, true, true};
    p.preds = {{2, 1, 0, 0}, {3, 0, 1, 0}};  // v2.x = v1.x (in the tail), v3.x != v0.x (across)
    p.within = 12;
    return p;
  };
  const std::vector<RandomPattern> patterns = {make('A'), make('E'), make('F')};
  PetriNet net;
  std::vector<MatchRecorder> sinks(patterns.size());
  ASSERT_TRUE(net.addPattern("abcd", parse(patterns[0].text()), sinks[0]));
  EXPECT_EQ(net.size().transitions, 4u);
  ASSERT_TRUE(net.addPattern("ebcd", parse(patterns[1].text()), sinks[1]));
  // A, E; the chain B, C, D; one join each.
  EXPECT_EQ(net.size().transitions, 7u);
  ASSERT_TRUE(net.addPattern("fbcd", parse(patterns[2].text()), sinks[2]));
  EXPECT_EQ(net.size().transitions, 9u);
  EXPECT_EQ(net.unmergedSize().transitions, 12u);
  std::mt19937_64 rng(77);
  std::vector<EventPtr> events;
  Timestamp ts = 0;
  for (int i = 0; i < 400; ++i) {
    ts += static_cast<Timestamp>(rng() % 2);
    const char type[] = {"ABCDEF"[rng() % 6], 0};
    events.push_back(
        EventBuilder(type).at(ts).set("x", Value(static_cast<int64_t>(rng() % 3))).build());
  }
  feed(net, events, 0, events.size());
  for (size_t i = 0; i < patterns.size(); ++i) {
    EXPECT_EQ(sinks[i].sortedTs(), testing::bruteForce(patterns[i], events)) << patterns[i].text();
    EXPECT_FALSE(sinks[i].empty()) << patterns[i].text();
  }
  // Removing the rewritten pattern keeps the shared tail for the others.
  ASSERT_TRUE(net.removePattern("abcd"));
  EXPECT_EQ(net.size().transitions, 7u);
}

// Once events flow a running pattern is not rewritten (it would lose its
// partial matches), but a new pattern still shares a tail that runs as a
// chain already.
TEST(PetriNet, BackJoinMidStreamOnlyReusesRunningChains) {
  PetriNet net;
  MatchRecorder s1, s2, s3;
  ASSERT_TRUE(net.addPattern("abc", parse("PATTERN SEQ(A a, B b, C c) WITHIN 10"), s1));
  ASSERT_TRUE(net.onEvent(EventBuilder("A").at(1).build()));
  ASSERT_TRUE(net.addPattern("ebc", parse("PATTERN SEQ(E e, B b, C c) WITHIN 10"), s2));
  EXPECT_EQ(net.size().transitions, 6u);  // nothing shared
  ASSERT_TRUE(net.addPattern("bc", parse("PATTERN SEQ(B b, C c) WITHIN 10"), s3));
  EXPECT_EQ(net.size().transitions, 8u);
  MatchRecorder s4;
  ASSERT_TRUE(net.addPattern("fbc", parse("PATTERN SEQ(F f, B b, C c) WITHIN 10"), s4));
  EXPECT_EQ(net.size().transitions, 10u);  // F and its join with <b;c>; not F, B, C
  Timestamp ts = 1;
  for (const char* t : {"B", "E", "F", "B", "C"}) {
    ASSERT_TRUE(net.onEvent(EventBuilder(t).at(++ts).build()));
  }
  EXPECT_EQ(s1.sortedTs(), (Matches{{1, 2, 6}, {1, 5, 6}}));
  EXPECT_EQ(s2.sortedTs(), (Matches{{3, 5, 6}}));
  EXPECT_EQ(s3.sortedTs(), (Matches{{2, 6}, {5, 6}}));
  EXPECT_EQ(s4.sortedTs(), (Matches{{4, 5, 6}}));
}

CompiledPatternPtr compiled(const std::string& text, const char* policy) {
  const std::vector<std::string> items = {std::string("policy=") + policy};
  auto p = compilePattern(parse(text), *plugin::DetectorOptions::parse(items));
  EXPECT_TRUE(p) << p.status().message();
  return *p;
}

std::vector<EventPtr> typed(std::initializer_list<const char*> types) {
  std::vector<EventPtr> out;
  Timestamp ts = 0;
  for (const char* t : types) out.push_back(EventBuilder(t).at(++ts).build());
  return out;
}

// P3's consumption policies on one pattern: feedback reuses tokens (every
// combination), conflict and concurrency consume them.
TEST(PetriNet, ConsumingPoliciesUseEachTokenOnce) {
  const auto events = typed({"A", "A", "B", "B", "B"});
  for (const char* policy : {"feedback", "conflict", "concurrency"}) {
    PetriNet net;
    MatchRecorder sink;
    ASSERT_TRUE(net.addPattern("ab", compiled("PATTERN SEQ(A a, B b)", policy), sink));
    feed(net, events, 0, events.size());
    if (std::string(policy) == "feedback") {
      EXPECT_EQ(sink.sortedTs(), (Matches{{1, 3}, {1, 4}, {1, 5}, {2, 3}, {2, 4}, {2, 5}}));
    } else {
      // The oldest token takes the event; both are gone afterwards.
      EXPECT_EQ(sink.sortedTs(), (Matches{{1, 3}, {2, 4}})) << policy;
    }
  }
}

// Two patterns sharing the place of <a>: under conflict the token goes to
// the first parent that fires, under concurrency each has its own copy.
TEST(PetriNet, ConflictSharesAPlaceConcurrencyCopiesIt) {
  const auto events = typed({"A", "B", "C"});
  const char* policies[] = {"feedback", "conflict", "concurrency"};
  const Matches expected_ac[] = {{{1, 3}}, {}, {{1, 3}}};
  const size_t transitions[] = {3, 3, 4};
  for (int i = 0; i < 3; ++i) {
    PetriNet net;
    MatchRecorder ab, ac;
    ASSERT_TRUE(net.addPattern("ab", compiled("PATTERN SEQ(A a, B b)", policies[i]), ab));
    ASSERT_TRUE(net.addPattern("ac", compiled("PATTERN SEQ(A a, C c)", policies[i]), ac));
    EXPECT_EQ(net.size().transitions, transitions[i]) << policies[i];
    feed(net, events, 0, events.size());
    EXPECT_EQ(ab.sortedTs(), (Matches{{1, 2}})) << policies[i];
    EXPECT_EQ(ac.sortedTs(), expected_ac[i]) << policies[i];
  }
}

// Under conflict an event, too, takes part in one firing: B2 completes
// <a;b> (deeper transitions fire first), so <b;c> never sees it.
TEST(PetriNet, ConflictPatternsCompeteForEvents) {
  const auto events = typed({"A", "B", "C"});
  for (const char* policy : {"conflict", "concurrency", "feedback"}) {
    PetriNet net;
    MatchRecorder ab, bc;
    ASSERT_TRUE(net.addPattern("ab", compiled("PATTERN SEQ(A a, B b)", policy), ab));
    ASSERT_TRUE(net.addPattern("bc", compiled("PATTERN SEQ(B b, C c)", policy), bc));
    feed(net, events, 0, events.size());
    EXPECT_EQ(ab.sortedTs(), (Matches{{1, 2}})) << policy;
    const Matches expected = std::string(policy) == "conflict" ? Matches{} : Matches{{2, 3}};
    EXPECT_EQ(bc.sortedTs(), expected) << policy;
  }
  auto bad = compilePattern(parse("PATTERN SEQ(A a, B b)"),
                            plugin::DetectorOptions(std::map<std::string, std::string, std::less<>>{
                                {"policy", "greedy"}}));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("policy=greedy: expected feedback, conflict or "
                                        "concurrency"),
            std::string::npos);
}

TEST(PetriNet, ExportsTheMergedNetAsDotAndJson) {
  PetriNet net;
  MatchRecorder s1, s2;
  ASSERT_TRUE(net.addPattern("bce", parse("PATTERN SEQ(B b, C c, E e) WHERE b.x = c.x"), s1));
  ASSERT_TRUE(net.addPattern(
      "abcd", parse("PATTERN SEQ(A a, B b, C c, D d) WHERE b.x = c.x AND a.x != c.x WITHIN 9"),
      s2));
  auto dot = net.exportModel("dot");
  ASSERT_TRUE(dot);
  EXPECT_TRUE(dot->starts_with("digraph petri {"));
  for (const char* part : {"\"in:A\"", "\"in:E\"", ": join", "a.x != c.x", "within 9",
                           "\"out:bce\"", "\"out:abcd\"", "[style=dashed]"}) {
    EXPECT_NE(dot->find(part), std::string::npos) << part << "\n" << *dot;
  }
  auto json = net.exportModel("json");
  ASSERT_TRUE(json);
  for (const char* part :
       {"\"kind\": \"join\"", "\"event_type\": \"D\"", "\"unmerged_size\"", "\"name\": \"abcd\""}) {
    EXPECT_NE(json->find(part), std::string::npos) << part << "\n" << *json;
  }
  auto bad = net.exportModel("png");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("'dot' or 'json'"), std::string::npos);
}

TEST(PetriNet, RemovingAndAddingPatternsMidStreamChangesNoOtherPattern) {
  std::mt19937_64 rng(77);
  for (int round = 0; round < 30; ++round) {
    const auto patterns = patternFamily(rng, 8);
    const auto events = testing::randomStream(rng, 40, 3);
    const size_t split = rng() % events.size();
    // Patterns 0..5 start in the net; 0..2 are removed at the split, 6..7
    // are added there.
    PetriNet net;
    std::vector<MatchRecorder> sinks(patterns.size());
    for (size_t i = 0; i < 6; ++i) {
      ASSERT_TRUE(net.addPattern("p" + std::to_string(i), parse(patterns[i].text()), sinks[i]));
    }
    feed(net, events, 0, split);
    for (size_t i = 0; i < 3; ++i) ASSERT_TRUE(net.removePattern("p" + std::to_string(i)));
    for (size_t i = 6; i < 8; ++i) {
      ASSERT_TRUE(net.addPattern("p" + std::to_string(i), parse(patterns[i].text()), sinks[i]));
    }
    // Removal left no transition behind that the remaining patterns do not
    // use (how they are decomposed may depend on the order they came in).
    EXPECT_LE(net.size().transitions, net.unmergedSize().transitions);
    feed(net, events, split, events.size());
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(sinks[i].sortedTs(), alone(patterns[i], events, 0, split)) << patterns[i].text();
    }
    for (size_t i = 3; i < 6; ++i) {
      EXPECT_EQ(sinks[i].sortedTs(), alone(patterns[i], events, 0, events.size()))
          << patterns[i].text();
    }
    for (size_t i = 6; i < 8; ++i) {
      EXPECT_EQ(sinks[i].sortedTs(), alone(patterns[i], events, split, events.size()))
          << patterns[i].text();
    }
    for (size_t i = 3; i < 8; ++i) ASSERT_TRUE(net.removePattern("p" + std::to_string(i)));
    EXPECT_EQ(net.size().transitions, 0u);
    EXPECT_EQ(net.size().places, 0u);
    EXPECT_EQ(net.tokenCount(), 0u);
  }
}

// A shared transition prunes with the largest window of the patterns still
// using it, recomputed when one leaves.
TEST(PetriNet, SharedTransitionsKeepTheLargestRemainingWindow) {
  PetriNet net;
  MatchRecorder widest, narrow, wide;
  ASSERT_TRUE(net.addPattern("widest", parse("PATTERN SEQ(A a, B b, C c) WITHIN 30"), widest));
  ASSERT_TRUE(net.addPattern("narrow", parse("PATTERN SEQ(A a, B b, C c) WITHIN 2"), narrow));
  ASSERT_TRUE(net.addPattern("wide", parse("PATTERN SEQ(A a, B b, C c) WITHIN 20"), wide));
  ASSERT_TRUE(net.removePattern("widest"));
  for (const auto& [type, ts] : std::vector<std::pair<const char*, Timestamp>>{
           {"A", 1}, {"B", 5}, {"C", 15}, {"A", 16}, {"B", 17}, {"C", 18}}) {
    ASSERT_TRUE(net.onEvent(EventBuilder(type).at(ts).build()));
  }
  EXPECT_EQ(narrow.sortedTs(), (Matches{{16, 17, 18}}));
  EXPECT_EQ(wide.sortedTs(), (Matches{{1, 5, 15}, {1, 5, 18}, {1, 17, 18}, {16, 17, 18}}));
  EXPECT_TRUE(widest.empty());
}

TEST(PetriNet, TokensExpireWithTheWindow) {
  PetriNet net;
  MatchRecorder sink;
  ASSERT_TRUE(net.addPattern("p", parse("PATTERN SEQ(A a, B b, C c) WITHIN 10"), sink));
  // A and B only: without expiry the <a;b> place would hold ~ n^2/4 tokens.
  for (Timestamp ts = 0; ts < 4000; ++ts) {
    ASSERT_TRUE(net.onEvent(EventBuilder(ts % 2 == 0 ? "A" : "B").at(ts).build()));
  }
  EXPECT_LT(net.tokenCount(), 1024u * 6);
  EXPECT_GT(net.tokenCount(), 0u);
  // And the pattern still matches after the sweeps.
  ASSERT_TRUE(net.onEvent(EventBuilder("C").at(4000).build()));
  EXPECT_EQ(sink.size(), 15u);  // a, b in [3990, 3999], a < b: 5+4+3+2+1
}

// CORE's pile-up: partial matches of SEQ(A, B, ...) pile up and none
// completes. The places hold a token per event in the window, not one per
// combination (about 250,000 <a;b> pairs here), and the pairs are built
// when the last element arrives, nested lazy places (<a;b;c>) included.
TEST(PetriNet, PileUpHoldsATokenPerEventNotPerCombination) {
  for (const char* query :
       {"PATTERN SEQ(A a, B b, X x) WITHIN 1000", "PATTERN SEQ(A a, B b, C c, X x) WITHIN 1000"}) {
    const bool four = std::string(query).find("C c") != std::string::npos;
    PetriNet net;
    MatchRecorder sink;
    ASSERT_TRUE(net.addPattern("p", parse(query), sink));
    std::mt19937_64 rng(5);
    std::vector<std::pair<char, Timestamp>> seen;
    for (Timestamp ts = 1; ts <= 20000; ++ts) {
      const char type = "ABC"[rng() % (four ? 3 : 2)];
      seen.emplace_back(type, ts);
      ASSERT_TRUE(net.onEvent(EventBuilder(std::string(1, type)).at(ts).build()));
    }
    EXPECT_LT(net.peakHeldTokens(), 2u * (1000 + 1024)) << query;
    ASSERT_TRUE(net.onEvent(EventBuilder("X").at(20001).build()));
    // Brute force: the combinations in pattern order that X completes.
    const std::string order = four ? "ABC" : "AB";
    std::vector<uint64_t> ways(order.size() + 1, 0);  // ways[k]: prefixes of length k
    ways[0] = 1;
    for (const auto& [type, ts] : seen) {
      if (20001 - ts > 1000) continue;
      for (size_t k = order.size(); k-- > 0;) {
        if (order[k] == type) ways[k + 1] += ways[k];
      }
    }
    // ways[1] counts every A, so the first factor needs no window check of its own.
    EXPECT_EQ(sink.size(), ways[order.size()]) << query;
    EXPECT_GT(sink.size(), 1000u);
  }
}

// skip_till_next_match and strict_contiguity run natively on a plain
// sequence: each run takes the events its strategy allows as they come, so
// a rising run of n events holds one run per prefix, not the 2^n subsets
// skip_till_any_match would (and then select from).
TEST(PetriNet, NativeStrategiesHoldTheirRunsNotEverySubset) {
  const std::string q = "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > b[i-1].x STRATEGY ";
  constexpr int kRising = 16;
  for (const char* strategy : {"skip_till_next_match", "strict_contiguity"}) {
    PetriNet net;
    MatchRecorder sink;
    ASSERT_TRUE(net.addPattern("p", parse(q + strategy), sink));
    Timestamp ts = 0;
    ASSERT_TRUE(net.onEvent(EventBuilder("A").at(++ts).build()));
    for (int x = 1; x <= kRising; ++x) {
      ASSERT_TRUE(net.onEvent(EventBuilder("B").at(++ts).set("x", Value(int64_t{x})).build()));
    }
    ASSERT_TRUE(net.onEvent(EventBuilder("C").at(++ts).build()));
    EXPECT_LT(net.peakHeldTokens(), 3u * kRising) << strategy;
    Matches expected;
    if (std::string(strategy) == "strict_contiguity") {
      // Only the whole run has C right after its last B.
      expected.emplace_back();
      for (Timestamp t = 1; t <= ts; ++t) expected.back().push_back(t);
    } else {
      // Each prefix of the run, closed by C (the first C after it).
      for (Timestamp last = 2; last < ts; ++last) {
        expected.emplace_back();
        for (Timestamp t = 1; t <= last; ++t) expected.back().push_back(t);
        expected.back().push_back(ts);
      }
      std::sort(expected.begin(), expected.end());
    }
    EXPECT_EQ(sink.sortedTs(), expected) << strategy;
  }
}

// A lazy place whose transition becomes a pattern's output (or gains any
// reader that needs whole tokens) expands its tokens first: the running
// pattern keeps its partial matches and the new one sees only its own events.
TEST(PetriNet, LazyPlaceExpandsWhenAPatternEndsThere) {
  PetriNet net;
  MatchRecorder longer, shorter;
  ASSERT_TRUE(net.addPattern("long", parse("PATTERN SEQ(A a, B b, X x) WITHIN 100"), longer));
  for (const auto& [type, ts] :
       std::vector<std::pair<const char*, Timestamp>>{{"A", 1}, {"A", 2}, {"B", 3}, {"B", 4}}) {
    ASSERT_TRUE(net.onEvent(EventBuilder(type).at(ts).build()));
  }
  EXPECT_EQ(net.tokenCount(), 4u);  // a1, a2 and two lazy tokens b3, b4
  ASSERT_TRUE(net.addPattern("short", parse("PATTERN SEQ(A a, B b) WITHIN 100"), shorter));
  EXPECT_EQ(net.size().transitions, 3u);  // the prefix is shared
  EXPECT_EQ(net.tokenCount(), 6u);        // a1, a2 and the four pairs
  EXPECT_EQ(net.heldTokens(), net.tokenCount());
  for (const auto& [type, ts] :
       std::vector<std::pair<const char*, Timestamp>>{{"A", 5}, {"B", 6}, {"X", 7}}) {
    ASSERT_TRUE(net.onEvent(EventBuilder(type).at(ts).build()));
  }
  EXPECT_EQ(longer.sortedTs(),
            (Matches{{1, 3, 7}, {1, 4, 7}, {1, 6, 7}, {2, 3, 7}, {2, 4, 7}, {2, 6, 7}, {5, 6, 7}}));
  EXPECT_EQ(shorter.sortedTs(), (Matches{{5, 6}}));
}

// A conjunction's operands are chains from the head: they share prefixes
// with running sequences, the merged net matches each pattern alone, the
// export draws the two-input transition, and removal drops only its part.
TEST(PetriNet, ConjunctionSharesItsOperandChainsAndExports) {
  const std::vector<std::string> texts = {
      "PATTERN SEQ(A a, B b) WHERE a.x = b.x WITHIN 6",
      "PATTERN AND(SEQ(A a, B b), C c) WHERE a.x = b.x AND b.x != c.x WITHIN 6",
      "PATTERN SEQ(C c, D d) WITHIN 6",
      "PATTERN AND(C c, SEQ(A a, B b)) WHERE a.x = b.x AND b.x != c.x WITHIN 6",
  };
  PetriNet net;
  std::vector<MatchRecorder> sinks(texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    ASSERT_TRUE(net.addPattern("q" + std::to_string(i), parse(texts[i]), sinks[i]));
  }
  // <A;B> (2), C (1), <C;D> shares C (+1), two conjunctions: 6 transitions.
  EXPECT_EQ(net.size().transitions, 6u);
  EXPECT_EQ(net.unmergedSize().transitions, 2u + 4u + 2u + 4u);
  std::mt19937_64 rng(61);
  const std::vector<EventPtr> events = testing::randomStream(rng, 150, 4);
  feed(net, events, 0, events.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    PetriNet single;
    MatchRecorder sink;
    ASSERT_TRUE(single.addPattern("p", parse(texts[i]), sink));
    feed(single, events, 0, events.size());
    EXPECT_EQ(sinks[i].sortedTs(), sink.sortedTs()) << texts[i];
    EXPECT_FALSE(sink.empty()) << texts[i];
  }
  // q1 and q3 bind the same events in other orders.
  EXPECT_EQ(sinks[1].size(), sinks[3].size());
  auto dot = net.exportModel("dot");
  ASSERT_TRUE(dot);
  EXPECT_NE(dot->find(": AND (any order)"), std::string::npos) << *dot;
  EXPECT_NE(dot->find("b.x != c.x"), std::string::npos) << *dot;
  auto json = net.exportModel("json");
  ASSERT_TRUE(json);
  EXPECT_NE(json->find("\"kind\": \"conjunction\""), std::string::npos) << *json;
  ASSERT_TRUE(net.removePattern("q1"));
  ASSERT_TRUE(net.removePattern("q3"));
  EXPECT_EQ(net.size().transitions, 4u);
  EXPECT_EQ(net.exportModel("json")->find("conjunction"), std::string::npos);
}

// A Kleene element is one transition looping on its own place: a sequence
// sharing the prefix before it shares those places, the export draws the
// loop, and a Kleene pattern added mid-stream sees only later events.
TEST(PetriNet, KleeneLoopsOnItsPlaceAndSharesItsPrefix) {
  PetriNet net;
  MatchRecorder seq, kleene, late;
  ASSERT_TRUE(net.addPattern("seq", parse("PATTERN SEQ(A a, B b) WHERE a.x = b.x"), seq));
  ASSERT_TRUE(net.addPattern(
      "kleene", parse("PATTERN SEQ(A a, B b, C+ c[]) WHERE a.x = b.x AND c[i].x > b.x"), kleene));
  // <A;B> shared, plus the loop on C.
  EXPECT_EQ(net.size().transitions, 3u);
  auto dot = net.exportModel("dot");
  ASSERT_TRUE(dot);
  EXPECT_NE(dot->find(": C+ (loop)"), std::string::npos) << *dot;
  EXPECT_NE(dot->find("p2 -> t2 [label=\"run\"]"), std::string::npos) << *dot;
  EXPECT_NE(net.exportModel("json")->find("\"kind\": \"iterate\""), std::string::npos);
  auto event = [](const char* type, Timestamp ts, int64_t x) {
    return EventBuilder(type).at(ts).set("x", Value(x)).build();
  };
  ASSERT_TRUE(net.onEvent(event("A", 1, 1)));
  ASSERT_TRUE(net.onEvent(event("B", 2, 1)));
  ASSERT_TRUE(net.onEvent(event("C", 3, 2)));
  ASSERT_TRUE(net.addPattern("late",
                             parse("PATTERN SEQ(A a, B b, C+ c[]) WHERE a.x = b.x AND "
                                   "c[i].x > b.x"),
                             late));
  ASSERT_TRUE(net.onEvent(event("C", 4, 0)));  // fails c[i].x > b.x
  ASSERT_TRUE(net.onEvent(event("C", 5, 3)));
  EXPECT_EQ(seq.sortedTs(), (Matches{{1, 2}}));
  EXPECT_EQ(kleene.sortedTs(), (Matches{{1, 2, 3}, {1, 2, 3, 5}, {1, 2, 5}}));
  EXPECT_TRUE(late.empty());
  ASSERT_TRUE(net.removePattern("kleene"));
  ASSERT_TRUE(net.removePattern("late"));
  EXPECT_EQ(net.size().transitions, 2u);
}

// A Kleene element followed by the pattern's last element keeps a lazy
// Kleene place (each event once, with the events it may follow) and
// enumerates the runs when the last element arrives; a pattern sharing the
// prefix whose element after the Kleene one keeps tokens makes the loop keep
// a token per run instead. Both report the same matches in the same order,
// also when the second pattern arrives mid-stream (the place is then
// replaced by the run tokens the loop would have made).
TEST(PetriNet, ALazyKleenePlaceReportsWhatRunTokensWouldInTheSameOrder) {
  struct Case {
    const char* elements;
    const char* rest;
  };
  const Case cases[] = {
      // The rising run: a link per rising pair, count and b[1] checked per run.
      {"A a, B+ b[], C c",
       "WHERE b[i].x > b[i-1].x AND c.x < b[1].x AND count(b[]) >= 2 WITHIN 30"},
      // b[i] against an earlier element, checked at each event of a run.
      {"A a, B+ b[], C c", "WHERE b[i].x >= a.x AND b[i].x != b[i-1].x AND c.x = a.x WITHIN 20"},
      // No guard on b: every earlier event is a link; probability bounds.
      {"A a, B+ b[], C c", "WITHIN 30 PROBABILITY >= 0.05"},
      // The Kleene element first, a guard on its events alone.
      {"B+ b[], C c", "WHERE b[i].x != b[i-1].x AND b[i].x < 3 AND c.x > b[last].x WITHIN 20"},
      // Two elements before it (b[i].x > m.x alone would keep the run
      // tokens: with no link to bound the runs, they prune better).
      {"A a, C m, B+ b[], C c",
       "WHERE m.x >= a.x AND b[i].x > m.x AND b[i].x >= b[i-1].x WITHIN 25"},
  };
  for (const Case& c : cases) {
    const std::string lazy_text = std::string("PATTERN SEQ(") + c.elements + ") " + c.rest;
    const std::string keeping = std::string("PATTERN SEQ(") + c.elements + ", D z) " + c.rest;
    std::mt19937_64 rng(29);
    const std::vector<EventPtr> events = testing::randomStream(rng, 400, 4, true);
    PetriNet lazy, eager, switched;
    MatchRecorder lazy_sink, eager_sink, switched_sink, keeping_eager, keeping_switched;
    ASSERT_TRUE(lazy.addPattern("p", parse(lazy_text), lazy_sink));
    ASSERT_TRUE(eager.addPattern("p", parse(lazy_text), eager_sink));
    ASSERT_TRUE(eager.addPattern("q", parse(keeping), keeping_eager));
    ASSERT_TRUE(switched.addPattern("p", parse(lazy_text), switched_sink));
    uint64_t ab = 0;
    for (size_t i = 0; i < events.size(); ++i) {
      ASSERT_TRUE(lazy.onEvent(events[i]));
      ASSERT_TRUE(eager.onEvent(events[i]));
      if (i == events.size() / 2) {
        ASSERT_TRUE(switched.addPattern("q", parse(keeping), keeping_switched));
        ASSERT_EQ(switched.heldTokens(), switched.tokenCount());
      }
      ASSERT_TRUE(switched.onEvent(events[i]));
      ASSERT_EQ(lazy.heldTokens(), lazy.tokenCount()) << lazy_text << ", event " << i;
      ASSERT_EQ(switched.heldTokens(), switched.tokenCount()) << lazy_text << ", event " << i;
      if (events[i]->type().name() != "D") ++ab;
    }
    auto ordered = [](const MatchRecorder& sink) {
      std::vector<std::pair<std::vector<EventId>, std::vector<uint32_t>>> out;
      for (const auto& m : sink.matches()) out.emplace_back(m.ids, m.element_ends);
      return out;
    };
    EXPECT_FALSE(lazy_sink.empty()) << lazy_text;
    EXPECT_EQ(ordered(lazy_sink), ordered(eager_sink)) << lazy_text;
    EXPECT_EQ(ordered(switched_sink), ordered(eager_sink)) << lazy_text;
    // One token per event at most: the runs are not kept.
    EXPECT_LE(lazy.peakHeldTokens(), ab) << lazy_text;
    EXPECT_GT(eager.peakHeldTokens(), lazy.peakHeldTokens()) << lazy_text;
  }
}

}  // namespace
// Patterns sharing a prefix with different PROBABILITY bounds: the shared
// transitions keep the tokens the least demanding one needs, and each output
// applies its own bound.
TEST(PetriNet, SharedTransitionsKeepTokensForTheLowestProbabilityBound) {
  PetriNet net;
  testing::MatchRecorder strict, loose;
  ASSERT_TRUE(net.addPattern("strict", parse("PATTERN SEQ(A, B, C) PROBABILITY >= 0.5"), strict));
  ASSERT_TRUE(net.addPattern("loose", parse("PATTERN SEQ(A, B, C)"), loose));
  for (const EventPtr& e : {EventBuilder("A").at(1).probability(0.5).build(),
                            EventBuilder("B").at(2).probability(0.5).build(),
                            EventBuilder("C").at(3).build(), EventBuilder("A").at(4).build(),
                            EventBuilder("B").at(5).build(), EventBuilder("C").at(6).build()}) {
    ASSERT_TRUE(net.onEvent(e));
  }
  EXPECT_EQ(loose.sortedTs(), (Matches{{1, 2, 3}, {1, 2, 6}, {1, 5, 6}, {4, 5, 6}}));
  EXPECT_EQ(strict.sortedTs(), (Matches{{1, 5, 6}, {4, 5, 6}}));  // 1-2-x have probability 1/4
}

// heldTokens() is counted as tokens are placed, consumed and expire; it must
// agree with a walk of the places after every event, under every policy,
// with negations, Kleene loops, conjunctions and probability bounds, and
// across adding and removing patterns.
TEST(PetriNet, HeldTokensAgreeWithTheTokensInThePlaces) {
  const std::vector<std::pair<std::string, const char*>> extra = {
      {"PATTERN SEQ(A a, NOT(B n), C c) WHERE n.x = a.x WITHIN 6", "feedback"},
      {"PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x >= a.x WITHIN 5", "feedback"},
      {"PATTERN AND(SEQ(A a, B b), C c) WHERE a.x = b.x WITHIN 6", "feedback"},
      {"PATTERN SEQ(A a, B b, C c) WITHIN 8 PROBABILITY >= 0.5", "feedback"},
      {"PATTERN SEQ(A a, B b) WITHIN 4", "conflict"},
      {"PATTERN SEQ(B b, C c) WITHIN 4", "conflict"},
      {"PATTERN SEQ(A a, C c, A d) WITHIN 7", "concurrency"},
      {"PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > b[i-1].x WITHIN 6 "
       "STRATEGY skip_till_next_match",
       "feedback"},
      {"PATTERN SEQ(A a, B b, C c) WITHIN 6 STRATEGY strict_contiguity", "feedback"},
  };
  std::mt19937_64 rng(11);
  for (int round = 0; round < 4; ++round) {
    PetriNet net;
    std::vector<RandomPattern> family = patternFamily(rng, 6);
    // Windows keep the places small enough to walk after every event.
    for (RandomPattern& p : family) p.within = std::min<int64_t>(p.within.value_or(6), 6);
    std::vector<MatchRecorder> sinks(family.size() + extra.size());
    for (size_t i = 0; i < family.size(); ++i) {
      ASSERT_TRUE(net.addPattern("r" + std::to_string(i), parse(family[i].text()), sinks[i]));
    }
    for (size_t i = 0; i < extra.size(); ++i) {
      ASSERT_TRUE(net.addPattern("e" + std::to_string(i), compiled(extra[i].first, extra[i].second),
                                 sinks[family.size() + i]));
    }
    const std::vector<EventPtr> events = testing::randomStream(rng, 1000, 3, true);
    uint64_t peak = 0;
    for (size_t i = 0; i < events.size(); ++i) {
      ASSERT_TRUE(net.onEvent(events[i]));
      ASSERT_EQ(net.heldTokens(), net.tokenCount()) << "round " << round << ", event " << i;
      peak = std::max<uint64_t>(peak, net.tokenCount());
      if (i == events.size() / 2) {
        ASSERT_TRUE(net.removePattern("r0"));
        ASSERT_TRUE(net.removePattern("e1"));
        ASSERT_EQ(net.heldTokens(), net.tokenCount());
      }
    }
    EXPECT_GT(peak, 0u);
    EXPECT_EQ(net.peakHeldTokens(), peak);
  }
}

// The host runs a NOT at an edge of a SEQ around the engine
// (bus/host/detection/edge_negation.h); the engine's own refusal says what
// it refuses, in its own words.
TEST(PetriNet, RefusesANegationAtAnEdgeOfASeqInItsOwnWords) {
  const std::pair<const char*, const char*> cases[] = {
      {"PATTERN SEQ(NOT(C c), A a, B b) WITHIN 10", "refuses NOT(C) at the start of a SEQ"},
      {"PATTERN SEQ(A a, B b, NOT(C c)) WITHIN 10", "refuses NOT(C) at the end of a SEQ"}};
  for (const auto& [text, refusal] : cases) {
    auto p = compilePattern(parse(text), plugin::DetectorOptions());
    ASSERT_FALSE(p) << text;
    EXPECT_NE(p.status().message().find(refusal), std::string::npos) << p.status().message();
    EXPECT_EQ(p.status().message().find("nfa"), std::string::npos) << p.status().message();
  }
}

}  // namespace cepbus::plugins::petri
