// The detection host's time on the real engines (loaded through the plugin
// ABI from build/plugins): a trailing negation's match comes out when the
// watermark passes its window, with no later event released to the engine,
// and not before; the end of the stream lets time pass to the end; engine
// auto picks an engine that runs it. On the nfa the engine runs NOT at an
// edge itself, on petri and algebra the host's edge negation does.

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "bus/host/detection/detection.h"
#include "bus/host/detection/planner.h"
#include "bus/host/loader/plugin_loader.h"
#include "tests/plugins/built_engines.h"
#include "tests/plugins/nfa/random_queries.h"
#include "tests/plugins/nfa/reference_matcher.h"

namespace cepbus::detection {
namespace {

class Recording final : public DetectionSink {
 public:
  void onMatch(size_t member, const plugin::Match& match) override {
    std::vector<Timestamp> ts;
    std::vector<EventId> id;
    for (size_t i = 0; i < match.size(); ++i) {
      ts.push_back(match.ts(i));
      id.push_back(match.event(i)->id());
    }
    matches.push_back(std::move(ts));
    ids.push_back(std::move(id));
    members.push_back(member);
  }
  void onLate(const EventPtr& event, Timestamp /*newest*/) override { late.push_back(event); }

  std::vector<std::vector<Timestamp>> matches;
  std::vector<std::vector<EventId>> ids;
  std::vector<size_t> members;  // of each match
  std::vector<EventPtr> late;
};

plugin::PluginLoader& loader() {
  static plugin::PluginLoader l({std::string(CEPBUS_TEST_BUILD_DIR) + "/plugins"});
  return l;
}

QueryRequest request(const std::string& engine, const std::string& text,
                     std::vector<std::string> options, std::string name = "q") {
  QueryRequest r;
  r.name = std::move(name);
  auto query = pattern::parseQuery(text);
  EXPECT_TRUE(query) << query.status().message();
  if (query) r.query = std::move(query).value();
  r.engine = engine;
  auto parsed = plugin::DetectorOptions::parse(options);
  EXPECT_TRUE(parsed) << parsed.status().message();
  if (parsed) r.options = std::move(parsed).value();
  r.inputs = {"in"};
  r.where = "test";
  return r;
}

EventPtr ev(const char* type, Timestamp ts) { return EventBuilder(type).at(ts).build(); }

struct Running {
  Plan plan;
  Recording sink;
  std::unique_ptr<Detection> detection;
};

// One detection of the queries `texts` (named q0, q1, ...) sharing one
// detector of `engine`, with the host options `options`.
// With `may_refuse`, an engine's refusal is no failure: nullptr.
std::unique_ptr<Running> run(const std::string& engine, const std::vector<std::string>& texts,
                             const std::vector<std::string>& options,
                             plugin::EventTime time = plugin::EventTime::kNewestEvent,
                             bool may_refuse = false) {
  auto r = std::make_unique<Running>();
  std::vector<QueryRequest> requests;
  for (size_t i = 0; i < texts.size(); ++i) {
    requests.push_back(request(engine, texts[i], options, "q" + std::to_string(i)));
  }
  PlanOptions plan_options;
  plan_options.one_detector = true;
  auto plan = detection::plan(requests, plan_options, loader());
  EXPECT_TRUE(plan || may_refuse) << plan.status().message();
  if (!plan) return nullptr;
  r->plan = std::move(plan).value();
  auto d = Detection::create(r->plan.groups[0], r->sink, time);
  EXPECT_TRUE(d) << d.status().message();
  if (!d) return nullptr;
  r->detection = std::move(d).value();
  return r;
}

std::unique_ptr<Running> run(const std::string& engine, const std::string& text,
                             const std::vector<std::string>& options) {
  return run(engine, std::vector<std::string>{text}, options);
}

TEST(DetectionAbsenceTest, ATrailingNegationsMatchComesOutWhenTheWatermarkPassesItsWindow) {
  // max_delay 5: after X at 15 the watermark is 10 and a C at 10 may still
  // come; after X at 16 no event at or before 10 can, and a's window (0, 10]
  // is closed. Neither X reaches the engine (the delay holds them back).
  const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
      {"nfa", {"max_delay=5", "construction=per_event"}},
      {"nfa", {"max_delay=5", "construction=batched"}},
      {"petri", {"max_delay=5"}},
      {"algebra", {"max_delay=5"}}};
  for (const auto& [engine, options] : runs) {
    const std::string construction = engine + " " + options.back();
    auto r = run(engine, "PATTERN SEQ(A a, NOT(C c)) WITHIN 10", options);
    ASSERT_NE(r, nullptr);
    Detection& d = *r->detection;
    ASSERT_TRUE(d.onEvent(ev("A", 0)));
    ASSERT_TRUE(d.onEvent(ev("X", 15)));
    EXPECT_TRUE(r->sink.matches.empty()) << construction;
    ASSERT_TRUE(d.onEvent(ev("X", 16)));
    EXPECT_EQ(r->sink.matches, (std::vector<std::vector<Timestamp>>{{0}})) << construction;
    EXPECT_EQ(d.released(), 0) << construction;
  }
}

TEST(DetectionAbsenceTest, WithTheHostKeepingTimeTheMatchComesOutWhenTimeAloneMoves) {
  // The bus's case: the host's source clock says what time it is. Events
  // move no time; advancing past a's window releases nothing new and still
  // decides the match, and a C within the window cancels the next one.
  auto r = run("nfa", std::vector<std::string>{"PATTERN SEQ(A a, NOT(C c)) WITHIN 10"},
               {"max_delay=2"}, plugin::EventTime::kOwner);
  ASSERT_NE(r, nullptr);
  Detection& d = *r->detection;
  ASSERT_TRUE(d.onEvent(ev("A", 0)));
  ASSERT_TRUE(d.advanceTo(0));
  ASSERT_TRUE(d.onEvent(ev("A", 30)));
  ASSERT_TRUE(d.onEvent(ev("C", 35)));
  ASSERT_TRUE(d.advanceTo(12));  // watermark 10: a C at 10 may still come
  EXPECT_TRUE(r->sink.matches.empty());
  ASSERT_TRUE(d.advanceTo(13));
  EXPECT_EQ(r->sink.matches, (std::vector<std::vector<Timestamp>>{{0}}));
  EXPECT_EQ(d.stats().watermark, 11);
  ASSERT_TRUE(d.advanceTo(1000));
  EXPECT_EQ(r->sink.matches.size(), 1u);  // the A at 30 was cancelled
  ASSERT_TRUE(d.onEvent(ev("A", 998)));   // behind the host's time, within D
  ASSERT_TRUE(d.onEvent(ev("A", 990)));   // more than D behind it: late
  EXPECT_EQ(r->sink.late.size(), 1u);
}

TEST(DetectionAbsenceTest, ACancellingEventWithinTheDelayStillCancels) {
  auto r = run("nfa", "PATTERN SEQ(A a, NOT(C c)) WITHIN 10", {"max_delay=5"});
  ASSERT_NE(r, nullptr);
  Detection& d = *r->detection;
  ASSERT_TRUE(d.onEvent(ev("A", 0)));
  ASSERT_TRUE(d.onEvent(ev("X", 15)));
  ASSERT_TRUE(d.onEvent(ev("C", 10)));  // behind the newest, within the delay
  ASSERT_TRUE(d.onEvent(ev("X", 40)));
  ASSERT_TRUE(d.flush());
  EXPECT_TRUE(r->sink.matches.empty());
  EXPECT_TRUE(r->sink.late.empty());
}

TEST(DetectionAbsenceTest, APauseKeepsTheMatchAndTheEndOfTheStreamReportsIt) {
  auto r = run("nfa", "PATTERN SEQ(A a, B b, NOT(C c)) WITHIN 10", {"max_delay=2"});
  ASSERT_NE(r, nullptr);
  Detection& d = *r->detection;
  ASSERT_TRUE(d.onEvents(std::vector<EventPtr>{ev("A", 1), ev("B", 3), ev("X", 6)}));
  ASSERT_TRUE(d.flushReleased());  // a pause: a C may still come
  EXPECT_TRUE(r->sink.matches.empty());
  ASSERT_TRUE(d.flush());  // the end: time passes to the end
  EXPECT_EQ(r->sink.matches, (std::vector<std::vector<Timestamp>>{{1, 3}}));
}

TEST(DetectionAbsenceTest, EveryQueryOfASharedDetectorHearsTheWatermark) {
  // The petri engine merges the queries into one net behind one edge negation.
  for (const char* engine : {"nfa", "petri"}) {
    auto r = run(engine,
                 std::vector<std::string>{"PATTERN SEQ(A a, NOT(C c)) WITHIN 10",
                                          "PATTERN SEQ(A a, NOT(D d)) WITHIN 20"},
                 {"max_delay=5"});
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(r->detection->members(), 2u);
    ASSERT_TRUE(r->detection->onEvent(ev("A", 0)));
    ASSERT_TRUE(r->detection->onEvent(ev("X", 16)));  // time passed 10
    EXPECT_EQ(r->sink.members, (std::vector<size_t>{0})) << engine;
    ASSERT_TRUE(r->detection->onEvent(ev("D", 18)));  // within q1's window: cancels it
    ASSERT_TRUE(r->detection->onEvent(ev("A", 19)));
    ASSERT_TRUE(r->detection->onEvent(ev("X", 35)));  // time passed 29: the A at 19's
    EXPECT_EQ(r->sink.members, (std::vector<size_t>{0, 0})) << engine;
    ASSERT_TRUE(r->detection->flush());
    EXPECT_EQ(r->sink.members, (std::vector<size_t>{0, 0, 1})) << engine;
  }
}

// Random queries with NOT at either end (and between), each over a random
// stream that arrives out of order within a random delay D, run with
// max_delay=D: the matches are the reference's over the events sorted by ts
// (equal ts in arrival order), and none is lost however the watermark moves.
// In a third of the cases some events arrive far behind: exactly those more
// than D behind the newest event taken before them are late (they reach the
// late sink in arrival order, and neither match nor cancel), and the matches
// are the reference's over the rest. CEPBUS_DIFFERENTIAL_CASES=N (and
// CEPBUS_DIFFERENTIAL_SEED=S) runs more than the suite's 400 cases.
TEST(DetectionAbsenceTest, ReorderedStreamsWithinTheDelayGiveTheSortedStreamsMatches) {
  const auto seed =
      static_cast<uint32_t>(plugins::testing::envOr("CEPBUS_DIFFERENTIAL_SEED", 20261207));
  const uint64_t cases = plugins::testing::envOr("CEPBUS_DIFFERENTIAL_CASES", 400);
  plugins::nfa::testing::Generator gen(seed);
  std::mt19937 rng(seed);
  int compared = 0, with_matches = 0, with_late = 0, failures = 0;
  std::map<std::string, int> compared_on;
  for (uint64_t i = 0; i < cases && failures < 3; ++i) {
    bool kleene = false;
    const std::string text = gen.query(kleene, false, /*edge_negations=*/true);
    const std::vector<EventPtr> sorted = gen.events(gen.uniform(4, kleene ? 12 : 20));
    const Timestamp delay = gen.uniform(0, 6);
    const bool stragglers = i % 3 == 2;
    // Each event arrives at ts + u, u in [0, D]: never more than D behind an
    // earlier arrival, so never late; a straggler (one in six, in a third of
    // the cases) arrives up to 3D + 6 after its ts, and may be late.
    std::vector<std::pair<Timestamp, size_t>> arrival;
    for (size_t k = 0; k < sorted.size(); ++k) {
      const Timestamp u = stragglers && rng() % 6 == 0
                              ? delay + 1 + static_cast<Timestamp>(rng() % (2 * delay + 6))
                              : static_cast<Timestamp>(rng() % (delay + 1));
      arrival.emplace_back(sorted[k]->ts() + u, k);
    }
    std::stable_sort(arrival.begin(), arrival.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<EventPtr> arrived;
    for (const auto& [at, k] : arrival) arrived.push_back(sorted[k]);
    // The definition of late: more than D behind the newest event taken.
    std::vector<EventPtr> taken, late;
    Timestamp newest = INT64_MIN;
    for (const EventPtr& e : arrived) {
      if (newest != INT64_MIN && e->ts() < newest - delay) {
        late.push_back(e);
      } else {
        taken.push_back(e);
        newest = std::max(newest, e->ts());
      }
    }
    with_late += late.empty() ? 0 : 1;
    std::vector<EventPtr> in_order = taken;
    std::stable_sort(in_order.begin(), in_order.end(),
                     [](const EventPtr& a, const EventPtr& b) { return a->ts() < b->ts(); });
    auto q = pattern::parseQuery(text);
    ASSERT_TRUE(q) << text;
    auto expected = plugins::nfa::testing::ReferenceMatcher(*q).run(in_order);
    std::sort(expected.begin(), expected.end());
    const std::string max_delay = "max_delay=" + std::to_string(delay);
    const std::vector<std::pair<std::string, std::vector<std::string>>> runs = {
        {"nfa", {max_delay, "construction=per_event"}},
        {"nfa", {max_delay, "construction=batched"}},
        {"petri", {max_delay}},
        {"algebra", {max_delay}}};
    for (const auto& [engine, options] : runs) {
      const std::string construction = engine + " " + options.back();
      // The petri and algebra engines refuse some of what the nfa runs.
      // Algebra under its default CONTEXT recent keeps fewer matches than
      // the reference (a query with NOT at an edge runs unrestricted anyway).
      const std::string query = engine == "algebra" ? text + " CONTEXT unrestricted" : text;
      auto r = run(engine, {query}, options, plugin::EventTime::kNewestEvent, engine != "nfa");
      if (r == nullptr && engine != "nfa") continue;
      ASSERT_NE(r, nullptr) << text;
      ++compared_on[engine];
      // Half the cases one event at a time, half in one batch.
      if (i % 2 == 0) {
        for (const EventPtr& e : arrived) ASSERT_TRUE(r->detection->onEvent(e)) << text;
      } else {
        ASSERT_TRUE(r->detection->onEvents(arrived)) << text;
      }
      ASSERT_TRUE(r->detection->flush()) << text;
      std::vector<std::vector<EventId>> got = r->sink.ids;
      std::sort(got.begin(), got.end());
      ++compared;
      with_matches += expected.empty() ? 0 : 1;
      EXPECT_EQ(r->sink.late, late)
          << text << " (" << construction << ", max_delay " << delay << ")";
      if (got != expected) {
        ++failures;
        ADD_FAILURE() << text << " (" << construction << ", max_delay " << delay << "): expected "
                      << expected.size() << " matches, got " << got.size();
      }
    }
  }
  EXPECT_GT(with_matches, compared / 4);
  EXPECT_GT(with_late, static_cast<int>(cases / 10));
  EXPECT_GT(compared_on["petri"], static_cast<int>(cases * 3 / 8));
  EXPECT_GT(compared_on["algebra"], static_cast<int>(cases * 3 / 8));
  std::cout << "compared " << compared << " runs (" << with_matches << " with matches), "
            << with_late << " cases with late events; nfa " << compared_on["nfa"] << ", petri "
            << compared_on["petri"] << ", algebra " << compared_on["algebra"] << "\n";
}

// Engine auto's rule holds for NOT at an edge too, now that every pattern
// engine runs it: a filtered start goes to petri, the rest to the nfa.
TEST(DetectionAbsenceTest, EngineAutoPicksByItsRuleForNegationAtAnEdge) {
  const std::pair<const char*, const char*> cases[] = {
      {"PATTERN SEQ(A a, NOT(C c)) WHERE a.x = 1 WITHIN 10", "petri"},
      {"PATTERN SEQ(NOT(C c), A a, B b) WITHIN 10", "nfa"}};
  for (const auto& [text, engine] : cases) {
    auto r = run("auto", text, {});
    ASSERT_NE(r, nullptr) << text;
    EXPECT_EQ(r->plan.groups[0].engine, engine) << text;
    Detection& d = *r->detection;
    for (const auto& [type, ts] : {std::pair{"C", 0}, std::pair{"A", 20}, std::pair{"B", 21}}) {
      ASSERT_TRUE(d.onEvent(EventBuilder(type).at(ts).set("x", Value(int64_t{1})).build()));
    }
    ASSERT_TRUE(d.flush());
    // The C at 0 is more than 10 before the end: neither negates.
    EXPECT_EQ(r->sink.matches.size(), 1u) << text;
  }
}

}  // namespace
}  // namespace cepbus::detection
