#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <span>

#include "bus/host/loader/guarded_detector.h"
#include "bus/host/time/reorder.h"
#include "tests/plugins/nfa/nfa_test_support.h"

namespace cepbus::plugins::nfa::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using TsList = std::vector<std::vector<Timestamp>>;

const std::vector<std::string> kPerEvent = {"construction=per_event"};
const std::vector<std::string> kBatched = {"construction=batched"};

TsList matchTs(const std::string& query, const std::string& stream,
               const std::vector<std::string>& options) {
  MatchRecorder sink;
  Status s = runQuery(query, letters(stream), options, sink);
  EXPECT_TRUE(s.isOk()) << s.message();
  return sink.sortedTs();
}

// P2's worked example: window size 9 (nine consecutive time steps, i.e.
// WITHIN 8), SEQ(A,B,D). All seven matches the paper lists satisfy
// ts(last) - ts(first) <= 8: the widest, <a1,b3,d9> and <a1,b6,d9>, span
// exactly 8 (so WITHIN 7 drops them, and nothing else).
const char* kP2Stream = "a1 c2 b3 a4 d5 b6 d7 c8 d9";
const TsList kP2Matches = {{1, 3, 5}, {1, 3, 7}, {1, 3, 9}, {1, 6, 7},
                           {1, 6, 9}, {4, 6, 7}, {4, 6, 9}};

TEST(NfaTest, PaperExampleGivesTheSevenMatchesWithBothMethods) {
  const std::string q = "PATTERN SEQ(A a, B b, D d) WITHIN 8";
  EXPECT_EQ(matchTs(q, kP2Stream, kPerEvent), kP2Matches);
  EXPECT_EQ(matchTs(q, kP2Stream, kBatched), kP2Matches);
  EXPECT_EQ(matchTs(q, kP2Stream, {"construction=batched", "batch_period=2"}), kP2Matches);
  const TsList within7 = {{1, 3, 5}, {1, 3, 7}, {1, 6, 7}, {4, 6, 7}, {4, 6, 9}};
  EXPECT_EQ(matchTs("PATTERN SEQ(A a, B b, D d) WITHIN 7", kP2Stream, kPerEvent), within7);
  EXPECT_EQ(matchTs("PATTERN SEQ(A a, B b, D d) WITHIN 7", kP2Stream, kBatched), within7);
}

// What `cepbus plugins` says about the options is what the engine does
// without them: batched construction, every WITHIN + 1 time units (1024
// without WITHIN).
TEST(NfaTest, TheOptionsHelpStatesTheDefaultsTheEngineApplies) {
  std::string help;
  for (const plugin::OptionInfo& o : nfaPlugin()->engineOptions("nfa")) {
    help += std::string(o.name) + ": " + std::string(o.help) + "\n";
  }
  EXPECT_NE(help.find("construction: batched|per_event: build matches in batches of "
                      "batch_period time units (P2's batched construction; the default)"),
            std::string::npos)
      << help;
  EXPECT_NE(help.find("default: the WITHIN span + 1, or 1024 for a query without WITHIN"),
            std::string::npos)
      << help;
  const plugin::DetectorOptions none;
  for (const auto& [text, stream, before, at_boundary] :
       {std::tuple{"PATTERN SEQ(A a, B b, D d) WITHIN 8", std::string("a1 b3 d5 c8 c9"), 8, 9},
        std::tuple{"PATTERN SEQ(A a, B b)", std::string("a1 b2 c1023 c1024"), 1023, 1024}}) {
    auto q = pattern::parseQuery(text);
    ASSERT_TRUE(q.isOk());
    MatchRecorder sink;
    auto d = nfaPlugin()->createDetector("nfa", *q, none, sink);
    ASSERT_TRUE(d.isOk()) << d.status().message();
    for (const EventPtr& e : letters(stream)) {
      ASSERT_TRUE((*d)->onEvent(e).isOk());
      if (e->ts() == before) {
        EXPECT_EQ(sink.size(), 0u) << text;
      }
      if (e->ts() == at_boundary) {
        EXPECT_EQ(sink.size(), 1u) << text;
      }
    }
  }
}

TEST(NfaTest, PerEventConstructsOnTheAcceptingEventBatchedAtTheBoundary) {
  auto q = pattern::parseQuery("PATTERN SEQ(A a, B b, D d) WITHIN 8");
  ASSERT_TRUE(q.isOk());
  const auto events = letters(kP2Stream);
  for (const auto& [options, after_d5, after_d7, after_d9] :
       {std::tuple{kPerEvent, 1u, 4u, 7u}, std::tuple{kBatched, 0u, 0u, 4u}}) {
    MatchRecorder sink;
    auto d = nfaPlugin()->createDetector("nfa", *q, *plugin::DetectorOptions::parse(options), sink);
    ASSERT_TRUE(d.isOk());
    for (size_t i = 0; i < events.size(); ++i) {
      ASSERT_TRUE((*d)->onEvent(events[i]).isOk());
      if (events[i]->ts() == 5) {
        EXPECT_EQ(sink.size(), after_d5) << options[0];
      }
      if (events[i]->ts() == 7) {
        EXPECT_EQ(sink.size(), after_d7) << options[0];
      }
      // Batched: ts 9 reaches the boundary 9 (P2's "t % W == 0") and
      // constructs d5, d7 before d9 is pushed.
      if (events[i]->ts() == 9) {
        EXPECT_EQ(sink.size(), after_d9) << options[0];
      }
    }
    ASSERT_TRUE((*d)->flush().isOk());
    EXPECT_EQ(sink.sortedTs(), kP2Matches);
    // Flushing again, or more events after a flush, repeats nothing.
    ASSERT_TRUE((*d)->flush().isOk());
    EXPECT_EQ(sink.size(), 7u);
  }
}

TEST(NfaTest, SkipTillNextMatchTakesTheFirstQualifyingEvent) {
  const std::string q = "PATTERN SEQ(A a, B b, D d) WITHIN 8 STRATEGY skip_till_next_match";
  // The run from a1 takes b3 then d5; the run from a4 takes b6 then d7.
  const TsList expected = {{1, 3, 5}, {4, 6, 7}};
  EXPECT_EQ(matchTs(q, kP2Stream, kPerEvent), expected);
  EXPECT_EQ(matchTs(q, kP2Stream, kBatched), expected);
  // "first qualifying" honours predicates between variables.
  MatchRecorder sink;
  std::vector<EventPtr> events = {
      EventBuilder("A").at(1).set("p", 5).build(), EventBuilder("B").at(2).set("p", 4).build(),
      EventBuilder("B").at(3).set("p", 5).build(), EventBuilder("B").at(4).set("p", 5).build()};
  ASSERT_TRUE(runQuery("PATTERN SEQ(A a, B b) WHERE a.p = b.p STRATEGY skip-till-next-match",
                       events, kPerEvent, sink)
                  .isOk());
  EXPECT_EQ(sink.sortedTs(), (TsList{{1, 3}}));
}

TEST(NfaTest, SkipTillNextMatchRunDiesOutsideTheWindow) {
  // The first B after a1 is b5, outside WITHIN 3: the run dies, although b3
  // of a later run... there is none; and a2's run takes b5 (span 3).
  const std::string q = "PATTERN SEQ(A a, B b) WITHIN 3 STRATEGY skip_till_next_match";
  EXPECT_EQ(matchTs(q, "a1 a2 c3 b5 b6", kPerEvent), (TsList{{2, 5}}));
  EXPECT_EQ(matchTs(q, "a1 a2 c3 b5 b6", kBatched), (TsList{{2, 5}}));
}

TEST(NfaTest, StrictContiguityNeedsAdjacentEvents) {
  const std::string q = "PATTERN SEQ(A a, B b, D d) STRATEGY strict_contiguity";
  const std::string stream = "a1 b2 d3 a4 c5 b6 d7 a8 b9 d10";
  EXPECT_EQ(matchTs(q, stream, kPerEvent), (TsList{{1, 2, 3}, {8, 9, 10}}));
  EXPECT_EQ(matchTs(q, stream, kBatched), (TsList{{1, 2, 3}, {8, 9, 10}}));
  // Adjacency is within a partition: the interleaved other key does not break it.
  std::vector<EventPtr> events;
  int ts = 0;
  for (const char* spec : {"A1", "A2", "B1", "B2", "D2", "D1"}) {
    events.push_back(
        EventBuilder(std::string(1, spec[0])).at(++ts).set("k", Value(spec + 1)).build());
  }
  MatchRecorder sink;
  ASSERT_TRUE(runQuery(q + " PARTITION BY k", events, kPerEvent, sink).isOk());
  EXPECT_EQ(sink.sortedTs(), (TsList{{1, 3, 6}, {2, 4, 5}}));
  MatchRecorder unpartitioned;
  ASSERT_TRUE(runQuery(q, events, kBatched, unpartitioned).isOk());
  EXPECT_TRUE(unpartitioned.empty());
}

TEST(NfaTest, KleenePlusWithIterationPredicateAndAggregate) {
  std::vector<EventPtr> events = {EventBuilder("A").at(1).build()};
  const int prices[] = {3, 5, 4, 6};
  for (int i = 0; i < 4; ++i) {
    events.push_back(EventBuilder("B").at(2 + i).set("price", prices[i]).build());
  }
  events.push_back(EventBuilder("D").at(6).build());
  const std::string q =
      "PATTERN SEQ(A a, B+ b[], D d) WHERE b[i].price > b[i-1].price AND count(b[]) >= 2";
  // Increasing runs of at least two prices among 3 5 4 6 (ts 2..5).
  const TsList any = {{1, 2, 3, 5, 6}, {1, 2, 3, 6}, {1, 2, 4, 5, 6}, {1, 2, 4, 6},
                      {1, 2, 5, 6},    {1, 3, 5, 6}, {1, 4, 5, 6}};
  for (const auto& options : {kPerEvent, kBatched}) {
    MatchRecorder sink(true);
    ASSERT_TRUE(runQuery(q, events, options, sink).isOk());
    EXPECT_EQ(sink.sortedTs(), any);
    for (const auto& m : sink.matches()) {
      ASSERT_EQ(m.element_ends.size(), 3u);
      EXPECT_EQ(m.elementEnd(0) - m.elementBegin(0), 1u);
      EXPECT_EQ(m.elementEnd(1) - m.elementBegin(1), m.ts.size() - 2);
    }
  }
  // skip_till_next_match: b takes 3, then greedily the next larger, 5, and
  // then 6 (4 is not larger than 5): prefixes [3,5] and [3,5,6].
  MatchRecorder next;
  ASSERT_TRUE(runQuery(q + " STRATEGY skip_till_next_match", events, kBatched, next).isOk());
  EXPECT_EQ(next.sortedTs(), (TsList{{1, 2, 3, 5, 6}, {1, 2, 3, 6}}));
}

TEST(NfaTest, NegationRejectsCandidatesWithAQualifyingEventBetween) {
  const std::string q = "PATTERN SEQ(A a, NOT(C c), D d) WHERE c.p > a.p WITHIN 10";
  std::vector<EventPtr> events = {EventBuilder("A").at(1).set("p", 5).build(),
                                  EventBuilder("C").at(2).set("p", 4).build(),
                                  EventBuilder("D").at(3).build(),
                                  EventBuilder("A").at(4).set("p", 1).build(),
                                  EventBuilder("C").at(5).set("p", 3).build(),
                                  EventBuilder("D").at(6).build()};
  // c5 (p 3) exceeds a1.p? no (5); it exceeds a4.p (1): only a4 is blocked before d6.
  for (const auto& options : {kPerEvent, kBatched}) {
    MatchRecorder sink;
    ASSERT_TRUE(runQuery(q, events, options, sink).isOk());
    EXPECT_EQ(sink.sortedTs(), (TsList{{1, 3}, {1, 6}}));
  }
  // The interval is open: a C at the same ts as a or d does not block.
  EXPECT_EQ(matchTs("PATTERN SEQ(A a, NOT(C), D d)", "a1 c1 d3 c3", kPerEvent), (TsList{{1, 3}}));
  EXPECT_EQ(matchTs("PATTERN SEQ(A a, NOT(C), D d)", "a1 c2 d3", kBatched), TsList{});
}

TEST(NfaTest, PartitionsAreIndependent) {
  std::vector<EventPtr> events;
  int ts = 0;
  for (const char* spec : {"Ax", "Ay", "By", "Bx", "Dx", "Bz", "Dz"}) {
    events.push_back(
        EventBuilder(std::string(1, spec[0])).at(++ts).set("sym", Value(spec + 1)).build());
  }
  const std::string q = "PATTERN SEQ(A a, B b, D d) WITHIN 10 PARTITION BY sym";
  for (const auto& options : {kPerEvent, kBatched}) {
    MatchRecorder sink;
    ASSERT_TRUE(runQuery(q, events, options, sink).isOk());
    EXPECT_EQ(sink.sortedTs(), (TsList{{1, 4, 5}}));
  }
}

TEST(NfaTest, PartitionByKeyReadsTheEventsKeyFieldWithoutSuchAttribute) {
  std::vector<EventPtr> events = {
      EventBuilder("A").at(1).key(Value("k1")).build(),
      EventBuilder("A").at(2).key(Value("k2")).build(),
      EventBuilder("B").at(3).key(Value("k2")).build(),
      EventBuilder("B").at(4).set("key", "k1").build(),  // the attribute wins
      EventBuilder("B").at(5).build()};                  // null key: its own partition
  for (const auto& options : {kPerEvent, kBatched}) {
    MatchRecorder sink;
    ASSERT_TRUE(runQuery("PATTERN SEQ(A a, B b) PARTITION BY key", events, options, sink).isOk());
    EXPECT_EQ(sink.sortedTs(), (TsList{{1, 4}, {2, 3}}));
  }
}

TEST(NfaTest, ReturnBuildsTheCompositeEvent) {
  std::vector<EventPtr> events = {
      EventBuilder("Stock").at(1).set("symbol", "IBM").set("price", 10).build(),
      EventBuilder("Stock").at(2).set("symbol", "SUN").set("price", 10).build(),
      EventBuilder("Stock").at(3).set("symbol", "HP").set("price", 11).build()};
  const std::string q =
      "PATTERN SEQ(Stock a, Stock b) WHERE a.price = b.price AND a.symbol != b.symbol "
      "WITHIN 1000 RETURN EqualPrices(a.symbol, b.symbol, a.price)";
  MatchRecorder sink(true);
  ASSERT_TRUE(runQuery(q, events, kBatched, sink).isOk());
  ASSERT_EQ(sink.size(), 1u);
  const EventPtr c = sink.matches()[0].composite;  // a copy: matches() returns a temporary
  EXPECT_EQ(c->type().name(), "EqualPrices");
  EXPECT_EQ(c->find(Symbol::intern("a_symbol"))->asString(), "IBM");
  EXPECT_EQ(c->find(Symbol::intern("b_symbol"))->asString(), "SUN");
  EXPECT_EQ(c->find(Symbol::intern("a_price"))->asInt(), 10);
  EXPECT_EQ(c->start(), 1);
  EXPECT_EQ(c->end(), 2);
  ASSERT_EQ(c->constituents().size(), 2u);
  EXPECT_EQ(c->constituents()[0], events[0]);
}

TEST(NfaTest, SingleElementAndNestedSequences) {
  EXPECT_EQ(matchTs("PATTERN A a WHERE a.ts > 1", "a1 b2 a3 a4", kBatched), (TsList{{3}, {4}}));
  EXPECT_EQ(matchTs("PATTERN A a ; (B b ; D d) WITHIN 8", kP2Stream, kPerEvent), kP2Matches);
  // Unnamed elements bind events too; they just cannot be named in WHERE.
  EXPECT_EQ(matchTs("PATTERN SEQ(A, B, D) WITHIN 8", kP2Stream, kBatched), kP2Matches);
}

TEST(NfaTest, RejectsAlgebraOperatorsAndWhatItCannotRun) {
  const std::pair<const char*, const char*> cases[] = {
      {"PATTERN OR(A a, B b)", "disjunction"},
      {"PATTERN AND(A a, B b)", "conjunction"},
      {"PATTERN A a ~ B b", "concatenation"},
      {"PATTERN A a || B b", "concurrency"},
      {"PATTERN A a - B b", "negation '-'"},
      {"PATTERN (A a)*", "iteration"},
      {"PATTERN (A a)[a.x > 1]", "selection"},
      {"PATTERN AGG(SEQ(A a, B+ b[]), count(b[]) > 1)", "aggregation"},
      {"PATTERN WITHIN(SEQ(A a, B b), 5)", "time restriction"},
      {"PATTERN SEQ(A a, B* b[], D d)", "Kleene star"},
      {"PATTERN SEQ(A a, B b) CONTEXT recent", "CONTEXT recent"},
      {"PATTERN SEQ(A a, NOT(C c), NOT(D e), B b) WHERE c.x = e.x", "at most one negated"},
      {"PATTERN SEQ(A a, NOT(C c), B+ b[]) WHERE c.x = b[i].x", "cannot use b[i]"},
  };
  for (const auto& [query, what] : cases) {
    MatchRecorder sink;
    Status s = runQuery(query, {}, {}, sink);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << query;
    EXPECT_THAT(s.message(), HasSubstr(what)) << query;
  }
}

TEST(NfaTest, RejectsBadOptions) {
  const std::pair<std::vector<std::string>, const char*> cases[] = {
      {{"construction=sometimes"}, "expected per_event or batched"},
      {{"batch_period=0"}, "positive integer"},
      {{"batch_period=ten"}, "positive integer"},
      {{"colour=red"}, "no option 'colour'"},
  };
  for (const auto& [options, what] : cases) {
    MatchRecorder sink;
    Status s = runQuery("PATTERN SEQ(A a, B b)", {}, options, sink);
    EXPECT_THAT(s.message(), HasSubstr(what)) << options[0];
  }
}

// Behind the host's time handling (bus/host/time/reorder.h), as every host
// runs a detector.
TEST(NfaTest, OutOfOrderEventsAreRejectedOrReordered) {
  const auto events = letters("a1 b3 b2 d4");
  auto q = pattern::parseQuery("PATTERN SEQ(A a, B b, D d)");
  ASSERT_TRUE(q.isOk());
  auto run = [&](const std::vector<std::string>& options, Timestamp slack, MatchRecorder& sink) {
    auto d = nfaPlugin()->createDetector("nfa", *q, *plugin::DetectorOptions::parse(options), sink);
    EXPECT_TRUE(d.isOk()) << d.status().message();
    plugin::ReorderingDetector ordered(std::move(d).value(), slack);
    for (const EventPtr& e : events) {
      if (Status s = ordered.onEvent(e); !s) return s;
    }
    return ordered.flush();
  };
  MatchRecorder strict;
  Status s = run(kBatched, 0, strict);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("ts 2 arrived after ts 3"));
  for (const auto& construction : {"construction=per_event", "construction=batched"}) {
    MatchRecorder sink;
    ASSERT_TRUE(run({construction}, 1, sink).isOk());
    EXPECT_EQ(sink.sortedTs(), (TsList{{1, 2, 4}, {1, 3, 4}}));
  }
}

TEST(NfaTest, ClusteredMatchesRespectEachMembersWindow) {
  // d10, d11, d12 share the link to b3 (one cluster); a1 is within 10 of
  // d10 and d11 but not of d12.
  const std::string q = "PATTERN SEQ(A a, B b, D d) WHERE d.ts != 99 WITHIN 10";
  const TsList expected = {{1, 3, 10}, {1, 3, 11}, {2, 3, 10}, {2, 3, 11}, {2, 3, 12}};
  EXPECT_EQ(matchTs(q, "a1 a2 b3 d10 d11 d12", kPerEvent), expected);
  EXPECT_EQ(matchTs(q, "a1 a2 b3 d10 d11 d12", kBatched), expected);
}

std::unique_ptr<plugin::GuardedDetector> nfaDetector(const std::string& query, MatchRecorder& sink,
                                                     const std::vector<std::string>& options = {}) {
  auto q = pattern::parseQuery(query);
  EXPECT_TRUE(q.isOk()) << q.status().message();
  auto d = nfaPlugin()->createDetector("nfa", *q, *plugin::DetectorOptions::parse(options), sink);
  EXPECT_TRUE(d.isOk()) << d.status().message();
  return std::move(d).value();
}

uint64_t held(const plugin::Detector& d) {
  const std::optional<plugin::DetectorState> s = d.state();
  EXPECT_TRUE(s.has_value());
  return s ? s->partial_matches : 0;
}

// The stacks of P2's example: a1, b3, a4, b6 wait for a D; c2 and c8 are of
// no element. skip_till_any_match looks at an accepting event once: per-event
// construction drops each D at once, batched construction at the batch
// boundary (ts 9 here) or flush(), so it held six at most.
TEST(NfaTest, StateCountsTheEventsInTheStacksUntilTheyExpire) {
  for (const auto& [options, peak] : {std::pair{kPerEvent, 4u}, std::pair{kBatched, 6u}}) {
    SCOPED_TRACE(options.front());
    MatchRecorder sink;
    auto d = nfaDetector("PATTERN SEQ(A a, B b, D d) WITHIN 8", sink, options);
    EXPECT_EQ(held(*d), 0u);
    const std::vector<EventPtr> events = letters(kP2Stream);
    ASSERT_TRUE(d->onEvents(std::span(events).first(3)));  // a1 c2 b3
    EXPECT_EQ(held(*d), 2u);
    ASSERT_TRUE(d->onEvents(std::span(events).subspan(3)));
    ASSERT_TRUE(d->flush());
    EXPECT_EQ(sink.size(), kP2Matches.size());
    EXPECT_EQ(held(*d), 4u);
    // Beyond the window every one of them expires; only the new A is held.
    ASSERT_TRUE(d->onEvent(EventBuilder("A").at(20).build()));
    EXPECT_EQ(held(*d), 1u);
    EXPECT_EQ(d->state()->peak_partial_matches, peak);
    // A B with no A before it in the window starts nothing.
    ASSERT_TRUE(d->onEvent(EventBuilder("B").at(40).build()));
    EXPECT_EQ(held(*d), 0u);
  }
}

TEST(NfaTest, StateCountsEveryPartition) {
  std::vector<EventPtr> events;
  int ts = 0;
  for (const char* spec : {"Ax", "Ay", "By", "Bx", "Dx", "Bz", "Dz"}) {
    events.push_back(
        EventBuilder(std::string(1, spec[0])).at(++ts).set("sym", Value(spec + 1)).build());
  }
  MatchRecorder sink;
  auto d = nfaDetector("PATTERN SEQ(A a, B b, D d) WITHIN 10 PARTITION BY sym", sink);
  ASSERT_TRUE(d->onEvents(events));
  // x: A, B and D, which waits for batched construction; y: A, B; z: a B
  // and a D with nothing before them.
  EXPECT_EQ(held(*d), 5u);
  ASSERT_TRUE(d->flush());
  EXPECT_EQ(held(*d), 4u);
}

// An event less likely than the bound never enters a stack: no match can
// contain it.
TEST(NfaTest, ProbabilityBoundKeepsFewerEventsInTheStacks) {
  const std::vector<EventPtr> events = {EventBuilder("A").at(1).probability(0.5).build(),
                                        EventBuilder("A").at(2).probability(0.95).build(),
                                        EventBuilder("B").at(3).probability(0.5).build(),
                                        EventBuilder("B").at(4).probability(0.95).build()};
  MatchRecorder all_sink, likely_sink;
  auto all = nfaDetector("PATTERN SEQ(A a, B b, D d) WITHIN 8", all_sink);
  auto likely = nfaDetector("PATTERN SEQ(A a, B b, D d) WITHIN 8 PROBABILITY >= 0.9", likely_sink);
  ASSERT_TRUE(all->onEvents(events));
  ASSERT_TRUE(likely->onEvents(events));
  EXPECT_EQ(held(*all), 4u);
  EXPECT_EQ(held(*likely), 2u);
  EXPECT_EQ(likely->state()->peak_partial_matches, 2u);
}

}  // namespace
}  // namespace cepbus::plugins::nfa::testing
