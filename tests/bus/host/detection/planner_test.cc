#include "bus/host/detection/planner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/bus/host/detection/fake_engines.h"

namespace cepbus::detection {
namespace {

using testing::detectorsMade;
using testing::fakeLoader;
using ::testing::HasSubstr;
using testing::request;

constexpr const char* kAB = "PATTERN SEQ(A a, B b)";
constexpr const char* kAC = "PATTERN SEQ(A a, C c)";

PlanOptions noTrial() {
  PlanOptions o;
  o.trial = false;
  return o;
}

// The groups of a plan as "engine: member member ...".
std::vector<std::string> groupsOf(const Plan& plan) {
  std::vector<std::string> out;
  for (const DetectionGroup& g : plan.groups) {
    std::string s = g.engine + ":";
    for (size_t m : g.members) s += " " + std::to_string(m);
    out.push_back(s);
  }
  return out;
}

TEST(PlannerTest, QueriesThatSeeTheSameEventsTheSameWayShareADetector) {
  auto loader = fakeLoader();
  std::vector<QueryRequest> requests = {
      request("a", "nfa", kAB),
      request("b", "nfa", kAC),
      request("other-input", "nfa", kAB),
      request("own", "nfa", kAB),
      request("slack", "nfa", kAB, {"slack=2"}),
      request("c", "nfa", kAC, {"output=x"}),   // a per-query service option: shares
      request("d", "nfa", kAC, {"mode=fast"}),  // a service option that must agree: does not
  };
  requests[2].inputs = {"elsewhere"};
  requests[3].share = false;
  requests[1].inputs = {"in", "in2"};  // the same multiset as d's, in another order
  requests[6].inputs = {"in2", "in"};
  PlanOptions options = noTrial();
  options.service_options = {{"output", true}, {"mode", false}};
  auto plan = detection::plan(requests, options, loader);
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_EQ(groupsOf(*plan), (std::vector<std::string>{"nfa: 0 5", "nfa: 1", "nfa: 2", "nfa: 3",
                                                       "nfa: 4", "nfa: 6"}));
  // The service's options never reach the engine (the fake refuses options
  // it does not know); the host's slack goes to the time handling.
  EXPECT_EQ(plan->groups[4].recipe.maxDelay(), 2);
  EXPECT_EQ(plan->groups[0].recipe.maxDelay(), 0);
  EXPECT_EQ(plan->groups[0].recipe.queries(), 2u);
  EXPECT_TRUE(plan->groups[0].reason.empty());
  EXPECT_TRUE(plan->warnings.empty());
}

TEST(PlannerTest, AutoSplitsASetOnlyWhereThePreferredEngineRefuses) {
  auto loader = fakeLoader();
  // Three patterns prefer the merged Petri net, which refuses c: a and b
  // stay on it as a set, c is decided alone (one pattern without a filter:
  // nfa), not moved with them to an engine that runs all three.
  const std::vector<QueryRequest> requests = {
      request("a", "auto", kAB),
      request("b", "auto", kAC),
      request("c", "auto", "PATTERN SEQ(A a, No_petri n)"),
  };
  auto plan = detection::plan(requests, noTrial(), loader);
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_EQ(groupsOf(*plan), (std::vector<std::string>{"petri: 0 1", "nfa: 2"}));
  EXPECT_EQ(plan->groups[0].reason, "auto: 2 patterns, merged Petri net from 2 patterns");
  EXPECT_EQ(plan->groups[1].reason,
            "auto: 1 pattern with no filter on its first variable, one NFA");
}

TEST(PlannerTest, AnEngineThatRunsEachButNotTheSetGivesEachItsOwnDetector) {
  auto loader = fakeLoader();
  const std::vector<QueryRequest> requests = {
      request("a", "nfa", kAB),
      request("b", "nfa", "PATTERN SEQ(A a, Alone b)"),
  };
  auto plan = detection::plan(requests, noTrial(), loader);
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_EQ(groupsOf(*plan), (std::vector<std::string>{"nfa: 0", "nfa: 1"}));
  ASSERT_EQ(plan->warnings.size(), 1u);
  EXPECT_EQ(plan->warnings[0],
            "queries a, b: engine nfa runs each but cannot share a detector between them (fake nfa "
            "runs Alone by itself); each gets its own");
}

TEST(PlannerTest, QueriesNamingAnEngineJoinTheAutoSetThatWentToIt) {
  auto loader = fakeLoader();
  const std::vector<QueryRequest> requests = {
      request("a", "auto", kAB),
      request("named", "petri", kAB),
      request("b", "auto", kAC),
      request("elsewhere", "nfa", kAC),
  };
  auto plan = detection::plan(requests, PlanOptions(), loader);
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_EQ(groupsOf(*plan), (std::vector<std::string>{"petri: 0 1 2", "nfa: 3"}));
  // The auto queries' reason stays; a named engine pins the set: no trial.
  EXPECT_EQ(plan->groups[0].reason, "auto: 2 patterns, merged Petri net from 2 patterns");
  EXPECT_FALSE(plan->groups[0].recipe.onTrial());
}

TEST(PlannerTest, EveryQueryThatCannotRunIsNamedAtItsWhereInOrder) {
  auto loader = fakeLoader();
  const std::vector<QueryRequest> requests = {
      request("ok", "nfa", kAB, {}, 3),
      request("refused", "nfa", "PATTERN SEQ(A a, No_nfa n)", {}, 7),
      request("none", "auto", "PATTERN SEQ(No_nfa a, No_petri b, No_algebra c, No_join d)", {}, 9),
      request("unknown", "warp", kAB, {}, 12),
      request("option", "petri", kAB, {"colour=red"}, 15),
  };
  auto plan = detection::plan(requests, noTrial(), loader);
  ASSERT_FALSE(plan);
  const std::string& m = plan.status().message();
  EXPECT_THAT(m, HasSubstr("q.xml:7: engine \"nfa\" cannot run the query: fake nfa refuses type "
                           "No_nfa\n"));
  EXPECT_THAT(m, HasSubstr("q.xml:9: engine auto: no engine runs the query; nfa refuses: fake "
                           "nfa refuses type No_nfa; petri refuses: fake petri refuses type "
                           "No_petri; algebra refuses: "));
  EXPECT_THAT(m, HasSubstr("join refuses: fake join refuses type No_join\n"));
  EXPECT_THAT(m, HasSubstr("q.xml:12: unknown engine \"warp\": plugin 'warp' not found"));
  EXPECT_THAT(m, HasSubstr("q.xml:15: engine \"petri\" cannot run the query: "));
  EXPECT_THAT(m, HasSubstr("no option 'colour'"));
  EXPECT_LT(m.find("q.xml:7:"), m.find("q.xml:9:"));
  EXPECT_LT(m.find("q.xml:9:"), m.find("q.xml:12:"));
  EXPECT_LT(m.find("q.xml:12:"), m.find("q.xml:15:"));
  EXPECT_EQ(m.find("q.xml:3:"), std::string::npos);

  // A bad host option is the query's error before any engine is asked.
  const std::vector<QueryRequest> slack = {request("a", "nfa", kAB, {"slack=-3"}, 4),
                                           request("b", "nfa", kAB, {"slack=x"}, 5)};
  auto bad = detection::plan(slack, noTrial(), loader);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.status().message(),
            "q.xml:4: option slack=-3: expected a non-negative integer\n"
            "q.xml:5: option slack=x: expected a non-negative integer");
}

TEST(PlannerTest, OneDetectorPutsTheEnginesErrorAtTheQueryItNames) {
  auto loader = fakeLoader();
  PlanOptions one = noTrial();
  one.one_detector = true;
  std::vector<QueryRequest> requests = {
      request("a", "nfa", kAB),
      request("b", "nfa", "PATTERN SEQ(A a, No_nfa n)"),
  };
  requests[0].where = "p.txt:1 (pattern 'a')";
  requests[1].where = "p.txt:2 (pattern 'b')";
  requests[1].inputs = {"elsewhere"};  // not shared, but one detector all the same
  auto plan = detection::plan(requests, one, loader);
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.status().message(), "p.txt:2 (pattern 'b'): fake nfa refuses type No_nfa");

  requests.pop_back();
  requests.push_back(request("c", "nfa", kAC));
  requests.back().inputs = {"elsewhere"};
  auto both = detection::plan(requests, one, loader);
  ASSERT_TRUE(both) << both.status().message();
  EXPECT_EQ(groupsOf(*both), (std::vector<std::string>{"nfa: 0 1"}));

  // One query made by create() alone: its where opens the engine's message.
  std::vector<QueryRequest> single = {request("", "nfa", "PATTERN SEQ(A a, No_nfa n)")};
  single[0].where = "--query";
  EXPECT_EQ(detection::plan(single, one, loader).status().message(),
            "--query: fake nfa refuses type No_nfa");
  single[0].engine = "warp";
  EXPECT_THAT(detection::plan(single, one, loader).status().message(),
              ::testing::StartsWith("plugin 'warp' not found"));
}

// Engine auto's probe of nfa or petri makes the trial's detector: each
// engine is built once, and the group's first detection takes it.
TEST(PlannerTest, AutosTrialBuildsEachEngineOnce) {
  auto loader = fakeLoader();
  const std::vector<QueryRequest> requests = {request("a", "auto", kAB), request("b", "auto", kAC)};
  const int petri = detectorsMade("petri");
  const int nfa = detectorsMade("nfa");
  auto plan = detection::plan(requests, PlanOptions(), loader);
  ASSERT_TRUE(plan) << plan.status().message();
  ASSERT_EQ(plan->groups.size(), 1u);
  DetectionGroup& group = plan->groups[0];
  EXPECT_EQ(group.engine, "petri");
  EXPECT_TRUE(group.recipe.onTrial());
  EXPECT_EQ(group.reason,
            "auto: 2 patterns, merged Petri net from 2 patterns; trial against nfa over 4096 "
            "events after the first 256, or 10 ms of CPU");
  EXPECT_EQ(detectorsMade("petri") - petri, 2);  // one detector per query of the set
  EXPECT_EQ(detectorsMade("nfa") - nfa, 2);
  testing::RecordingSink sink;
  auto detection = Detection::create(group, sink);
  ASSERT_TRUE(detection) << detection.status().message();
  EXPECT_TRUE((*detection)->onTrial());
  EXPECT_EQ((*detection)->engine(), "petri");
  EXPECT_EQ(detectorsMade("petri") - petri, 2);

  // The challenger refuses: no trial, and the prior's detector is made
  // again to run alone.
  const std::vector<QueryRequest> no_nfa = {request("a", "auto", "PATTERN SEQ(A a, No_nfa b)"),
                                            request("b", "auto", kAC)};
  auto alone = detection::plan(no_nfa, PlanOptions(), loader);
  ASSERT_TRUE(alone) << alone.status().message();
  EXPECT_EQ(groupsOf(*alone), (std::vector<std::string>{"petri: 0 1"}));
  EXPECT_FALSE(alone->groups[0].recipe.onTrial());
  EXPECT_EQ(alone->groups[0].reason, "auto: 2 patterns, merged Petri net from 2 patterns");

  // Without the trial (--export) the pick alone.
  auto untried = detection::plan(requests, noTrial(), loader);
  ASSERT_TRUE(untried);
  EXPECT_FALSE(untried->groups[0].recipe.onTrial());
}

TEST(PlannerTest, AGroupKnowsWhatItsEngineSaysAboutEachQuery) {
  auto loader = fakeLoader();
  const std::vector<QueryRequest> requests = {
      request("a", "auto", "PATTERN SEQ(A a, No_nfa b, No_petri c)")};
  auto plan = detection::plan(requests, PlanOptions(), loader);
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_EQ(plan->groups[0].engine, "algebra");
  EXPECT_THAT(plan->groups[0].reason, HasSubstr("nfa refuses: fake nfa refuses type No_nfa"));
  EXPECT_EQ(plan->groups[0].recipe.notices(0),
            std::vector<std::string>{"fake algebra reads it as recent"});
}

TEST(PlannerTest, NamesOfManyQueriesAreShortened) {
  EXPECT_EQ(namesOf({"a", "b", "c"}), "a, b, c");
  EXPECT_EQ(namesOf({"q1", "q2", "q3", "q4"}), "q1..q4 (4)");
}

}  // namespace
}  // namespace cepbus::detection
