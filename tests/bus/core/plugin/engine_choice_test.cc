#include "bus/core/plugin/engine_choice.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

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
  auto choice = chooseEngine(kMergeFromPatterns - 1, engines.probe());
  ASSERT_TRUE(choice.isOk()) << choice.status().toString();
  EXPECT_EQ(choice->engine, "nfa");
  EXPECT_EQ(engines.asked, (std::vector<std::string>{"nfa"}));  // no detector made in vain
  EXPECT_NE(choice->reason.find("one NFA per pattern"), std::string::npos) << choice->reason;
}

TEST(EngineChoiceTest, ManyPatternsPreferTheMergedNet) {
  FakeEngines engines;
  auto choice = chooseEngine(40, engines.probe());
  ASSERT_TRUE(choice.isOk());
  EXPECT_EQ(choice->engine, "petri");
  EXPECT_EQ(choice->reason, "auto: 40 patterns, merged Petri net from " +
                                std::to_string(kMergeFromPatterns) + " patterns");
}

TEST(EngineChoiceTest, TheCrossoverItselfMerges) {
  FakeEngines engines;
  EXPECT_EQ(chooseEngine(kMergeFromPatterns, engines.probe())->engine, "petri");
}

TEST(EngineChoiceTest, AnEngineThatRefusesIsPassedOverAndTheReasonSaysWhy) {
  FakeEngines engines{{"petri"}, {}};
  auto choice = chooseEngine(50, engines.probe());
  ASSERT_TRUE(choice.isOk());
  EXPECT_EQ(choice->engine, "nfa");
  EXPECT_NE(choice->reason.find("petri refuses: petri says no"), std::string::npos)
      << choice->reason;
  EXPECT_TRUE(choice->reason.ends_with("; nfa runs it")) << choice->reason;
}

TEST(EngineChoiceTest, WhatOnlyAlgebraRunsGoesToAlgebraThenWhatOnlyJoinRunsToJoin) {
  FakeEngines algebra_only{{"nfa", "petri", "join"}, {}};
  EXPECT_EQ(chooseEngine(1, algebra_only.probe())->engine, "algebra");
  EXPECT_EQ(algebra_only.asked, (std::vector<std::string>{"nfa", "petri", "algebra"}));
  FakeEngines join_only{{"nfa", "petri", "algebra"}, {}};
  EXPECT_EQ(chooseEngine(3, join_only.probe())->engine, "join");
}

TEST(EngineChoiceTest, NoEngineAcceptingIsAnErrorListingEveryRefusal) {
  FakeEngines none{{"nfa", "petri", "algebra", "join"}, {}};
  auto choice = chooseEngine(1, none.probe());
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
    const std::vector<std::string_view> c = autoCandidates(n);
    EXPECT_EQ(std::set<std::string_view>(c.begin(), c.end()),
              (std::set<std::string_view>{"nfa", "petri", "algebra", "join"}));
    EXPECT_EQ(c.size(), 4u);
  }
}

}  // namespace
}  // namespace cepbus::plugin
