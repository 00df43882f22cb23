#include "bus/host/detection/edge_negation.h"

#include <gtest/gtest.h>

#include "bus/core/pattern/parser.h"
#include "tests/bus/host/detection/match_sink_fakes.h"
#include "tests/testing/snapshot_bytes.h"

namespace cepbus::detection {
namespace {

using cepbus::testing::refusedCorruptions;
using cepbus::testing::restoreBytes;
using cepbus::testing::snapshotBytes;
using match_fakes::RecordingSink;
using match_fakes::report;
using Ts = std::vector<std::vector<Timestamp>>;

pattern::Query parse(const char* text) {
  Result<pattern::Query> q = pattern::parseQuery(text);
  EXPECT_TRUE(q.isOk()) << text << ": " << q.status().toString();
  return q.isOk() ? *q : pattern::Query{};
}

EventPtr event(const char* type, Timestamp ts, int64_t id, int64_t key = 0) {
  return EventBuilder(type).at(ts).set("id", Value(id)).set("key", Value(key)).build();
}

// An engine for SEQ(A a) (one positive element, no edge NOT): each A is a
// match; `batched` holds them back until flush(), as an engine that
// constructs in batches does.
class OneElementEngine final : public plugin::Detector {
 public:
  OneElementEngine(plugin::MatchSink& sink, bool batched) : sink_(sink), batched_(batched) {}
  Status onEvent(const EventPtr& event) override {
    if (event->type() != Symbol::intern("A")) return Status::ok();
    pending_.push_back(event);
    return batched_ ? Status::ok() : flush();
  }
  Status flush() override {
    for (const EventPtr& e : pending_) report(sink_, {e});
    pending_.clear();
    return Status::ok();
  }
  // Its pending events, so that the rules in front of it can be checkpointed.
  uint32_t snapshotVersion() const override { return 1; }
  Status snapshot(plugin::SnapshotWriter& out) const override {
    out.varint(pending_.size());
    for (const EventPtr& e : pending_) out.event(e);
    return Status::ok();
  }
  Status restore(plugin::SnapshotReader& in) override {
    const uint64_t n = in.count();
    for (uint64_t i = 0; i < n && in.ok(); ++i) {
      pending_.push_back(in.event());
      if (pending_.back() == nullptr) in.fail("a pending event is missing");
    }
    return in.status();
  }

 private:
  plugin::MatchSink& sink_;
  const bool batched_;
  std::vector<EventPtr> pending_;
};

// Makes OneElementEngine detectors; refuses a query with NOT at an edge, as
// an engine without edge negation does, and records what it was asked.
struct FakeEngine {
  bool batched = false;
  bool refuse_rest = false;  // also refuse the query without its edge NOT
  std::vector<pattern::Query> asked;

  MakeEngineDetector maker() {
    return [this](std::span<const plugin::NamedQuery> queries, plugin::MatchSink& one,
                  plugin::MultiMatchSink&) -> Result<std::unique_ptr<plugin::GuardedDetector>> {
      asked.push_back(queries.front().query);
      if (hasEdgeNegation(queries.front().query)) {
        return Status::invalidArgument("the fake engine does not run NOT at an edge");
      }
      if (refuse_rest) return Status::invalidArgument("the fake engine refuses the rest");
      return std::make_unique<plugin::GuardedDetector>(
          "fake", nullptr, std::make_unique<OneElementEngine>(one, batched));
    };
  }
};

struct NoMembers final : plugin::MultiMatchSink {
  void onMatch(size_t, const plugin::Match&) override { ADD_FAILURE() << "one query, no members"; }
};

std::unique_ptr<plugin::GuardedDetector> make(const char* text, FakeEngine& engine,
                                              RecordingSink& sink) {
  static NoMembers no_members;
  const std::vector<plugin::NamedQuery> queries = {{"q", parse(text)}};
  auto made = EdgeNegation::makeDetector(queries, engine.maker(), sink, no_members, false);
  EXPECT_TRUE(made.isOk()) << made.status().toString();
  return made.isOk() ? std::move(made).value() : nullptr;
}

TEST(EdgeNegationTest, ASnapshotCarriesKeptEventsAndHeldMatchesIntoANewOne) {
  const char* query =
      "PATTERN SEQ(NOT(D d), A a, NOT(C c)) WHERE d.key = a.key AND c.id = a.id WITHIN 6";
  const std::vector<EventPtr> events = {
      event("D", 0, 9, 1),  event("A", 1, 1, 1),  event("A", 2, 2, 0), event("C", 4, 1),
      event("A", 5, 3, 1),  event("D", 6, 9, 0),  event("A", 7, 4, 0), event("C", 9, 3),
      event("A", 12, 5, 1), event("A", 13, 6, 0), event("C", 15, 6)};
  auto feed = [&](plugin::Detector& d, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      ASSERT_TRUE(d.onEvent(events[i]).isOk());
      if (i % 3 == 2) {
        ASSERT_TRUE(d.onWatermark(events[i]->ts() - 1).isOk());
      }
    }
  };
  for (const bool batched : {false, true}) {
    FakeEngine engine;
    engine.batched = batched;
    RecordingSink whole;
    auto one = make(query, engine, whole);
    feed(*one, 0, events.size());
    ASSERT_TRUE(one->onWatermark(plugin::Detector::kEndOfTime).isOk());
    ASSERT_FALSE(whole.got.empty());
    for (size_t split = 0; split <= events.size(); ++split) {
      RecordingSink a, b;
      auto first = make(query, engine, a);
      feed(*first, 0, split);
      auto bytes = snapshotBytes(*first);
      ASSERT_TRUE(bytes.isOk()) << bytes.status().toString();
      auto second = make(query, engine, b);
      const Status restored = restoreBytes(*second, *bytes);
      ASSERT_TRUE(restored.isOk()) << restored.toString();
      feed(*second, split, events.size());
      ASSERT_TRUE(second->onWatermark(plugin::Detector::kEndOfTime).isOk());
      Ts got = a.got;
      got.insert(got.end(), b.got.begin(), b.got.end());
      EXPECT_EQ(got, whole.got) << (batched ? "batched, " : "") << "split after " << split;
    }
  }
}

TEST(EdgeNegationTest, ACorruptedSnapshotIsRefusedOrHarmlessNeverACrash) {
  const char* query = "PATTERN SEQ(NOT(D d), A a, NOT(C c)) WHERE c.id = a.id WITHIN 6";
  FakeEngine engine;
  RecordingSink sink;
  auto d = make(query, engine, sink);
  for (const EventPtr& e :
       {event("D", 0, 1), event("A", 1, 1), event("A", 2, 2), event("C", 3, 2)}) {
    ASSERT_TRUE(d->onEvent(e).isOk());
  }
  auto bytes = snapshotBytes(*d);
  ASSERT_TRUE(bytes.isOk());
  const size_t refused = refusedCorruptions(*bytes, 0x03, [&](const std::string& bad) {
    RecordingSink out;
    auto fresh = make(query, engine, out);
    if (!restoreBytes(*fresh, bad).isOk()) return false;
    (void)fresh->onEvent(event("A", 5, 3));
    (void)fresh->onWatermark(plugin::Detector::kEndOfTime);
    return true;
  });
  EXPECT_GT(refused, 0u);
}

TEST(EdgeNegationTest, TheEngineRunsThePatternWithoutItsEdgeNotsAndTheirConjuncts) {
  const pattern::Query q = parse(
      "PATTERN SEQ(NOT(C c), A a, NOT(D m), B b, NOT(D d)) WHERE c.id = a.id AND a.x = b.x AND "
      "d.id = b.id AND m.id = a.id WITHIN 10");
  const pattern::Query rest = withoutEdgeNegation(q);
  ASSERT_EQ(rest.pattern->children.size(), 3u);  // the NOT in the middle stays
  EXPECT_EQ(rest.pattern->children[1]->kind, pattern::PatternKind::kNot);
  ASSERT_EQ(rest.variables.size(), 3u);
  EXPECT_EQ(rest.variables[0].name, "a");
  EXPECT_EQ(rest.variables[1].name, "m");
  EXPECT_EQ(rest.variables[2].name, "b");
  const auto conjuncts = pattern::splitConjuncts(rest.where);
  ASSERT_EQ(conjuncts.size(), 2u);
  EXPECT_EQ(pattern::variablesOf(*conjuncts[0]), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(pattern::variablesOf(*conjuncts[1]), (std::vector<std::string>{"m", "a"}));
  EXPECT_EQ(rest.context, pattern::Context::kUnrestricted);
  EXPECT_EQ(*rest.within, 10);
  EXPECT_FALSE(hasEdgeNegation(rest));
}

TEST(EdgeNegationTest, AnEngineThatRunsTheQueryGetsItAsWritten) {
  FakeEngine engine;
  RecordingSink sink;
  auto detector = make("PATTERN SEQ(A a) WITHIN 5", engine, sink);
  ASSERT_EQ(engine.asked.size(), 1u);
  ASSERT_TRUE(detector->onEvent(event("A", 1, 1)).isOk());
  EXPECT_EQ(sink.got, (Ts{{1}}));
}

TEST(EdgeNegationTest, ATrailingNotLetsAMatchOutWhenTimePassesItsSpanUnlessACancelsIt) {
  for (const bool batched : {false, true}) {
    SCOPED_TRACE(batched ? "engine reporting at flush" : "engine reporting at once");
    FakeEngine engine;
    engine.batched = batched;
    RecordingSink sink;
    auto detector = make("PATTERN SEQ(A a, NOT(C c)) WHERE c.id = a.id WITHIN 10", engine, sink);
    ASSERT_EQ(engine.asked.size(), 2u);  // the full query, refused, then the rest
    EXPECT_EQ(engine.asked[1].pattern->children.size(), 1u);
    EXPECT_EQ(engine.asked[1].where, nullptr);
    for (const EventPtr& e : {event("A", 0, 1), event("A", 1, 2), event("A", 2, 3),
                              event("C", 2, 3), event("C", 5, 1), event("C", 11, 2)}) {
      ASSERT_TRUE(detector->onEvent(e).isOk());
    }
    // a@0 is cancelled by C(id 1) at 5; a@2 is not by C(id 3) at its own
    // ts; a@1's span (1, 11] holds C(id 2) at 11, its last ts.
    ASSERT_TRUE(detector->onWatermark(11).isOk());
    EXPECT_TRUE(sink.got.empty());
    ASSERT_TRUE(detector->onEvent(event("X", 12, 0)).isOk());
    EXPECT_TRUE(sink.got.empty());  // a@2's span ends at 12: a C at 12 may still come
    ASSERT_TRUE(detector->onWatermark(12).isOk());
    EXPECT_EQ(sink.got, (Ts{{2}}));
    EXPECT_EQ(sink.composed_alerts, 1u);  // the engine's composite, kept while held
  }
}

TEST(EdgeNegationTest, TheEndOfTimeLetsOutWhatWaitsAndANewStreamStartsOver) {
  FakeEngine engine;
  engine.batched = true;
  RecordingSink sink;
  auto detector = make("PATTERN SEQ(A a, NOT(C c)) WITHIN 100", engine, sink);
  ASSERT_TRUE(detector->onEvent(event("C", 1, 0)).isOk());
  ASSERT_TRUE(detector->onEvent(event("A", 3, 0)).isOk());
  ASSERT_TRUE(detector->onWatermark(plugin::Detector::kEndOfTime).isOk());
  ASSERT_TRUE(detector->flush().isOk());
  EXPECT_EQ(sink.got, (Ts{{3}}));
  // Time starts over: a C of the old stream cancels nothing.
  ASSERT_TRUE(detector->onEvent(event("A", 0, 0)).isOk());
  ASSERT_TRUE(detector->onWatermark(plugin::Detector::kEndOfTime).isOk());
  ASSERT_TRUE(detector->flush().isOk());
  EXPECT_EQ(sink.got, (Ts{{3}, {0}}));
}

TEST(EdgeNegationTest, ALeadingNotLooksBackWithinTheWindowInTheMatchsPartition) {
  for (const bool batched : {false, true}) {
    SCOPED_TRACE(batched ? "engine reporting at flush" : "engine reporting at once");
    FakeEngine engine;
    engine.batched = batched;
    RecordingSink sink;
    auto detector = make("PATTERN SEQ(NOT(C c), A a) WHERE c.id = a.id WITHIN 5 PARTITION BY key",
                         engine, sink);
    for (const EventPtr& e :
         {event("C", 0, 1), event("C", 1, 2, /*key=*/1), event("A", 1, 1), event("A", 5, 1),
          event("A", 6, 1), event("A", 6, 2), event("A", 7, 3)}) {
      ASSERT_TRUE(detector->onEvent(e).isOk());
    }
    ASSERT_TRUE(detector->onWatermark(plugin::Detector::kEndOfTime).isOk());
    ASSERT_TRUE(detector->flush().isOk());
    // C(id 1) at 0 negates a@1 and a@5 ([0, 5) holds it), not a@6 ([1, 6)
    // does not); C(id 2) is in another partition.
    EXPECT_EQ(sink.got, (Ts{{6}, {6}, {7}}));
  }
}

TEST(EdgeNegationTest, WhatItKeepsIsBoundedByTheWindowNotTheStream) {
  const pattern::Query q = parse("PATTERN SEQ(NOT(C n), A a, NOT(C c)) WITHIN 20");
  RecordingSink sink;
  NoMembers no_members;
  const std::vector<plugin::NamedQuery> queries = {{"q", q}};
  auto negation = EdgeNegation::create(queries, sink, no_members, false);
  ASSERT_TRUE(negation.isOk()) << negation.status().toString();
  EdgeNegation* rules = negation->get();
  auto detector = EdgeNegation::wrap(std::move(negation).value(),
                                     std::make_unique<OneElementEngine>(*rules, true));
  size_t most_kept = 0;
  size_t most_held = 0;
  for (Timestamp ts = 0; ts < 100000; ++ts) {
    // A C every 50: the As far from one are let out.
    ASSERT_TRUE(detector->onEvent(event(ts % 50 == 0 ? "C" : "A", ts, 0)).isOk());
    if (ts % 7 == 0) {
      ASSERT_TRUE(detector->onWatermark(ts - 1).isOk());
    }
    most_kept = std::max(most_kept, rules->kept());
    most_held = std::max(most_held, rules->held());
  }
  EXPECT_LE(most_kept, 4u);                      // the Cs of about 2 W
  EXPECT_LE(most_held, 40u);                     // the As of W plus a watermark's lag
  EXPECT_GT(sink.got.size(), 100000u / 50 * 8);  // 9 of every 50 As (21 ... 29 after a C)
}

TEST(EdgeNegationTest, WhatTheHostCannotRunIsRefusedWithItsReason) {
  FakeEngine engine;
  RecordingSink sink;
  NoMembers no_members;
  auto refusal = [&](const char* text, bool no_within = false) {
    std::vector<plugin::NamedQuery> queries = {{"q", parse(text)}};
    // The parser refuses a trailing NOT without WITHIN; a tree made otherwise
    // may still lack it.
    if (no_within) queries[0].query.within.reset();
    auto made = EdgeNegation::makeDetector(queries, engine.maker(), sink, no_members, false);
    EXPECT_FALSE(made.isOk()) << text;
    return made.isOk() ? std::string() : made.status().message();
  };
  EXPECT_NE(refusal("PATTERN SEQ(A a, NOT(C c)) WITHIN 5", true).find("needs WITHIN n"),
            std::string::npos);
  EXPECT_NE(refusal("PATTERN SEQ(A a, NOT(C c)) WITHIN 5 CONTEXT recent")
                .find("query 'q': line 1, column "),
            std::string::npos);
  EXPECT_NE(refusal("PATTERN SEQ(A a, NOT(C c)) WITHIN 5 CONTEXT recent")
                .find("NOT(C) at the start or the end of a pattern does not run under CONTEXT "
                      "recent"),
            std::string::npos);
  EXPECT_NE(refusal("PATTERN SEQ(NOT(D d), A a, NOT(C c)) WHERE c.id = d.id WITHIN 5")
                .find("a predicate may name at most one negated variable"),
            std::string::npos);
  // What the engine still refuses without the edge NOT: its own reason.
  engine.refuse_rest = true;
  EXPECT_EQ(refusal("PATTERN SEQ(A a, NOT(C c)) WITHIN 5"), "the fake engine refuses the rest");
}

// Several queries of one detector: each match keeps its member, and only the
// queries with an edge NOT are checked.
TEST(EdgeNegationTest, EachMemberIsCheckedByItsOwnQuery) {
  struct Members final : plugin::MultiMatchSink {
    void onMatch(size_t member, const plugin::Match& match) override {
      got[member].push_back({match.ts(0)});
    }
    Ts got[2];
  } members;
  RecordingSink unused;
  const std::vector<plugin::NamedQuery> queries = {
      {"plain", parse("PATTERN SEQ(A a) WITHIN 5")},
      {"absent", parse("PATTERN SEQ(A a, NOT(C c)) WITHIN 5")}};
  auto negation = EdgeNegation::create(queries, unused, members, true);
  ASSERT_TRUE(negation.isOk()) << negation.status().toString();
  EdgeNegation* rules = negation->get();
  // The engine reports every A to both members.
  class Both final : public plugin::Detector {
   public:
    explicit Both(plugin::MultiMatchSink& sink) : sink_(sink) {}
    Status onEvent(const EventPtr& event) override {
      if (event->type() != Symbol::intern("A")) return Status::ok();
      for (size_t m = 0; m < 2; ++m) {
        static const match_fakes::AlertComposer composer;
        const EventPtr* pointer = &event;
        const uint32_t end = 1;
        sink_.onMatch(m, plugin::Match(std::span(&pointer, 1), std::span(&end, 1), &composer));
      }
      return Status::ok();
    }
    Status flush() override { return Status::ok(); }

   private:
    plugin::MultiMatchSink& sink_;
  };
  auto detector = EdgeNegation::wrap(std::move(negation).value(), std::make_unique<Both>(*rules));
  ASSERT_TRUE(detector->onEvent(event("A", 1, 0)).isOk());
  ASSERT_TRUE(detector->onEvent(event("A", 2, 0)).isOk());
  ASSERT_TRUE(detector->onEvent(event("C", 4, 0)).isOk());
  ASSERT_TRUE(detector->onWatermark(plugin::Detector::kEndOfTime).isOk());
  EXPECT_EQ(members.got[0], (Ts{{1}, {2}}));
  EXPECT_TRUE(members.got[1].empty());
  EXPECT_TRUE(unused.got.empty());
}

}  // namespace
}  // namespace cepbus::detection
