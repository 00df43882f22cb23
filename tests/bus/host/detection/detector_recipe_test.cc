#include "bus/host/detection/detector_recipe.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/bus/host/detection/fake_engines.h"

namespace cepbus::detection {
namespace {

using testing::event;

// Records what reaches it, by member.
class Members final : public MemberSink {
 public:
  void onMatch(size_t member, const plugin::Match& match) override {
    seen.emplace_back(member, match.ts(match.size() - 1));
  }
  std::vector<std::pair<size_t, Timestamp>> seen;
};

DetectorRecipe::Queries queries(std::initializer_list<const char*> texts) {
  auto out = std::make_shared<std::vector<plugin::NamedQuery>>();
  for (const char* text : texts) {
    auto q = pattern::parseQuery(text);
    EXPECT_TRUE(q) << q.status().message();
    out->push_back({"q" + std::to_string(out->size()), std::move(q).value()});
  }
  return out;
}

EngineRef engine(plugin::PluginLoader& loader, const std::string& name) {
  auto plugin = loader.load(name);
  EXPECT_TRUE(plugin) << plugin.status().message();
  return EngineRef{*plugin, name};
}

TEST(DetectorRecipeTest, MakesANewDetectorEachTimeReportingToItsRelay) {
  auto loader = testing::fakeLoader();
  const DetectorRecipe recipe(engine(loader, "nfa"),
                              queries({"PATTERN SEQ(A a, B b)", "PATTERN SEQ(A a, C c)"}),
                              plugin::DetectorOptions(), false, 0);
  auto first = recipe.make();
  auto second = recipe.make();
  ASSERT_TRUE(first && second);
  Members one;
  Members two;
  first->relay->attach(one);
  second->relay->attach(two);
  ASSERT_TRUE(first->detector->onEvent(event("A", 1)));
  ASSERT_TRUE(first->detector->onEvent(event("C", 2)));
  ASSERT_TRUE(second->detector->onEvent(event("B", 3)));
  EXPECT_EQ(one.seen, (std::vector<std::pair<size_t, Timestamp>>{{1, 2}}));
  EXPECT_TRUE(two.seen.empty());
  EXPECT_EQ(first->trial, nullptr);
  EXPECT_FALSE(recipe.onTrial());
  EXPECT_EQ(recipe.describeTrial(), "");
}

TEST(DetectorRecipeTest, ATrialKeepsTheChallengersThatAcceptForEveryDetector) {
  auto loader = testing::fakeLoader();
  DetectorRecipe recipe(engine(loader, "petri"), queries({"PATTERN SEQ(A a, B b)"}),
                        plugin::DetectorOptions(), false, 0);
  auto made = recipe.putOnTrial({engine(loader, "nfa"), engine(loader, "algebra")}, {});
  ASSERT_TRUE(made) << made.status().message();
  ASSERT_TRUE(*made);
  EXPECT_NE((*made)->trial, nullptr);
  EXPECT_EQ((*made)->trial->running(), "petri");
  EXPECT_EQ(recipe.describeTrial(),
            "trial against nfa, algebra over 4096 events after the first 256, or 10 ms of CPU");
  auto again = recipe.make();
  ASSERT_TRUE(again);
  EXPECT_NE(again->trial, nullptr);

  DetectorRecipe refused(engine(loader, "petri"), queries({"PATTERN SEQ(A a, No_nfa b)"}),
                         plugin::DetectorOptions(), false, 0);
  auto alone = refused.putOnTrial({engine(loader, "nfa")}, {});
  ASSERT_TRUE(alone);
  EXPECT_FALSE(*alone);  // no challenger runs it: no trial
  EXPECT_FALSE(refused.onTrial());
  EXPECT_EQ(refused.make()->trial, nullptr);

  DetectorRecipe prior(engine(loader, "petri"), queries({"PATTERN SEQ(A a, No_petri b)"}),
                       plugin::DetectorOptions(), false, 0);
  auto no = prior.putOnTrial({engine(loader, "nfa")}, {});
  ASSERT_FALSE(no);
  EXPECT_EQ(no.status().message(), "fake petri refuses type No_petri");
}

}  // namespace
}  // namespace cepbus::detection
