#include "bus/host/detection/engine_choice.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "bus/core/pattern/parser.h"

namespace cepbus::plugin {
namespace {

// A probe over engines that accept unless named in `refusing`; records the
// order in which it was asked.
struct FakeEngines {
  std::set<std::string, std::less<>> refusing;
  std::vector<std::string> asked;

  EngineProbe probe() {
    return [this](std::string_view engine) {
      asked.emplace_back(engine);
      if (refusing.contains(engine))
        return Status::invalidArgument(std::string(engine) + " says no");
      return Status::ok();
    };
  }
};

TEST(EngineChoiceTest, FewPatternsPreferOneNfaPerPattern) {
  FakeEngines engines;
  auto choice = chooseEngine(PatternSetShape{kMergeFromPatterns - 1}, engines.probe());
  ASSERT_TRUE(choice.isOk()) << choice.status().toString();
  EXPECT_EQ(choice->engine, "nfa");
  EXPECT_EQ(engines.asked, (std::vector<std::string>{"nfa"}));  // no detector made in vain
  EXPECT_NE(choice->reason.find("with no filter on its first variable, one NFA"), std::string::npos)
      << choice->reason;
}

TEST(EngineChoiceTest, ManyPatternsPreferTheMergedNet) {
  FakeEngines engines;
  auto choice = chooseEngine(PatternSetShape{40}, engines.probe());
  ASSERT_TRUE(choice.isOk());
  EXPECT_EQ(choice->engine, "petri");
  EXPECT_EQ(choice->reason, "auto: 40 patterns, merged Petri net from " +
                                std::to_string(kMergeFromPatterns) + " patterns");
}

TEST(EngineChoiceTest, TheCrossoverItselfMerges) {
  FakeEngines engines;
  EXPECT_EQ(chooseEngine(PatternSetShape{kMergeFromPatterns}, engines.probe())->engine, "petri");
}

TEST(EngineChoiceTest, AnEngineThatRefusesIsPassedOverAndTheReasonSaysWhy) {
  FakeEngines engines{{"petri"}, {}};
  auto choice = chooseEngine(PatternSetShape{50}, engines.probe());
  ASSERT_TRUE(choice.isOk());
  EXPECT_EQ(choice->engine, "nfa");
  EXPECT_NE(choice->reason.find("petri refuses: petri says no"), std::string::npos)
      << choice->reason;
  EXPECT_TRUE(choice->reason.ends_with("; nfa runs it")) << choice->reason;
}

TEST(EngineChoiceTest, WhatOnlyAlgebraRunsGoesToAlgebraThenWhatOnlyJoinRunsToJoin) {
  FakeEngines algebra_only{{"nfa", "petri", "join"}, {}};
  EXPECT_EQ(chooseEngine(PatternSetShape{1}, algebra_only.probe())->engine, "algebra");
  EXPECT_EQ(algebra_only.asked, (std::vector<std::string>{"nfa", "petri", "algebra"}));
  FakeEngines join_only{{"nfa", "petri", "algebra"}, {}};
  EXPECT_EQ(chooseEngine(PatternSetShape{3}, join_only.probe())->engine, "join");
}

TEST(EngineChoiceTest, NoEngineAcceptingIsAnErrorListingEveryRefusal) {
  FakeEngines none{{"nfa", "petri", "algebra", "join"}, {}};
  auto choice = chooseEngine(PatternSetShape{1}, none.probe());
  ASSERT_FALSE(choice.isOk());
  EXPECT_EQ(choice.status().code(), Status::Code::kInvalidArgument);
  for (const char* engine : {"nfa", "petri", "algebra", "join"}) {
    EXPECT_NE(
        choice.status().message().find(std::string(engine) + " refuses: " + engine + " says no"),
        std::string::npos)
        << choice.status().message();
  }
}

TEST(EngineChoiceTest, EveryCandidateListIsTheSameFourEnginesOnce) {
  for (size_t n : {size_t{1}, kMergeFromPatterns, size_t{1000}}) {
    for (bool filtered : {false, true}) {
      const std::vector<std::string_view> c = autoCandidates(PatternSetShape{n, filtered});
      EXPECT_EQ(std::set<std::string_view>(c.begin(), c.end()),
                (std::set<std::string_view>{"nfa", "petri", "algebra", "join"}));
      EXPECT_EQ(c.size(), 4u);
    }
  }
}

pattern::Query parsed(const char* text) {
  auto q = pattern::parseQuery(text);
  EXPECT_TRUE(q.isOk()) << text;
  return *q;
}

TEST(EngineChoiceTest, ALonePatternWhoseFirstVariableIsFilteredPrefersOnePetriNet) {
  const pattern::Query q = parsed("PATTERN SEQ(A a, B b) WHERE a.x = 3 AND a.y = b.y WITHIN 9");
  const pattern::Query* one = &q;
  const PatternSetShape shape = shapeOf({&one, 1});
  EXPECT_EQ(shape.patterns, 1u);
  EXPECT_TRUE(shape.filtered_start);
  FakeEngines engines;
  auto choice = chooseEngine(shape, engines.probe());
  ASSERT_TRUE(choice.isOk());
  EXPECT_EQ(choice->engine, "petri");
  EXPECT_EQ(choice->reason,
            "auto: 1 pattern whose first variable a predicate of its own filters, "
            "one Petri net");
}

TEST(EngineChoiceTest, OnlyAPredicateOverTheFirstVariableAloneFiltersTheStart) {
  for (const char* text : {
           "PATTERN SEQ(A a, B b) WITHIN 9",                           // no WHERE
           "PATTERN SEQ(A a, B b) WHERE b.x = 3 WITHIN 9",             // the last variable
           "PATTERN SEQ(A a, B b) WHERE a.x = b.x WITHIN 9",           // two variables
           "PATTERN SEQ(A a, B b) WHERE a.x = 3 OR b.x = 3 WITHIN 9",  // not a conjunct of a
           "PATTERN SEQ(A+ a[], B b) WHERE a[1].x = 3 WITHIN 9",       // a Kleene start
       }) {
    const pattern::Query q = parsed(text);
    const pattern::Query* one = &q;
    EXPECT_FALSE(shapeOf({&one, 1}).filtered_start) << text;
  }
  const pattern::Query filtered = parsed("PATTERN SEQ(A a, B b) WHERE a.x = 3 WITHIN 9");
  const pattern::Query open = parsed("PATTERN SEQ(A a, B b) WITHIN 9");
  const pattern::Query* both[] = {&filtered, &open};
  EXPECT_FALSE(shapeOf(both).filtered_start);  // every pattern must be filtered
  const pattern::Query* twice[] = {&filtered, &filtered};
  EXPECT_TRUE(shapeOf(twice).filtered_start);
  EXPECT_EQ(shapeOf(twice).patterns, 2u);
}

TEST(EngineChoiceTest, WindowQueriesGoToTheWindowEngineAlone) {
  const pattern::Query window =
      parsed("FROM T t WHERE t.x = 3 WINDOW TUMBLING 10 GROUP BY t.k RETURN R(count(t))");
  const pattern::Query pattern = parsed("PATTERN SEQ(A a, B b) WITHIN 9");
  const pattern::Query* one = &window;
  EXPECT_TRUE(shapeOf({&one, 1}).windowed);
  const pattern::Query* mixed[] = {&pattern, &window};
  EXPECT_TRUE(shapeOf(mixed).windowed);
  const pattern::Query* none = &pattern;
  EXPECT_FALSE(shapeOf({&none, 1}).windowed);
  FakeEngines engines;
  auto choice = chooseEngine(shapeOf({&one, 1}), engines.probe());
  ASSERT_TRUE(choice.isOk());
  EXPECT_EQ(choice->engine, "window");
  EXPECT_EQ(engines.asked, std::vector<std::string>{"window"});
  EXPECT_EQ(choice->reason, "auto: a window query (FROM ... WINDOW), the window engine");
  // Without the window engine, the refusal says so rather than trying a pattern engine.
  FakeEngines without{{"window"}, {}};
  auto refused = chooseEngine(shapeOf({&one, 1}), without.probe());
  ASSERT_FALSE(refused.isOk());
  EXPECT_EQ(without.asked, std::vector<std::string>{"window"});
}

// The trial settles only what the rule guesses from the text: nfa against petri.
TEST(EngineChoiceTest, NfaAndPetriAreTriedAgainstEachOther) {
  EXPECT_EQ(trialChallengers("nfa"), std::vector<std::string_view>{"petri"});
  EXPECT_EQ(trialChallengers("petri"), std::vector<std::string_view>{"nfa"});
  EXPECT_TRUE(trialChallengers("algebra").empty());
  EXPECT_TRUE(trialChallengers("join").empty());
}

}  // namespace
}  // namespace cepbus::plugin
