#include "services/redeploy_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "bus/host/descriptor/parser.h"

namespace cepbus::services {
namespace {

descriptor::ServiceAssembly parse(std::string_view text) {
  auto assembly = descriptor::parseServiceAssembly(text, "new.xml");
  EXPECT_TRUE(assembly) << assembly.status().message();
  return assembly ? *assembly : descriptor::ServiceAssembly{};
}

constexpr std::string_view kDeployed = R"(<service-assembly name="plant">
  <service-unit name="cep" type="cep">
    <subscribe address="temp"/>
    <query name="hot" engine="nfa" input="temp" output="alerts">
      <text>PATTERN SEQ(Temp a, Temp b) WHERE b.value &gt; a.value WITHIN 10</text>
    </query>
    <query name="cold" engine="nfa" input="temp" output="alerts">
      <text>PATTERN Temp a WHERE a.value &lt; 0</text>
    </query>
  </service-unit>
  <service-unit name="sink" type="replay-sink">
    <param name="file" value="out.jsonl"/><subscribe address="alerts"/>
  </service-unit>
</service-assembly>)";

// What the running services hold: the deployed descriptor's queries, unless
// a test changed them (as the admin API's query edits would).
class RedeployPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    deployed_ = parse(kDeployed);
    running_["plant.cep"] = deployed_.unit("cep")->queries;
  }

  Result<RedeployPlan> plan(std::string_view next) {
    return planRedeploy(deployed_, parse(next), [this](std::string_view service) {
      const auto it = running_.find(std::string(service));
      return it != running_.end() ? std::optional<std::vector<descriptor::QuerySpec>>(it->second)
                                  : std::nullopt;
    });
  }

  static std::vector<std::string> steps(const RedeployPlan& p) {
    std::vector<std::string> out;
    for (const QueryStep& s : p.steps) {
      out.push_back(std::string(queryStepName(s.kind)) + " " + s.service + "/" + s.spec.name);
    }
    return out;
  }

  descriptor::ServiceAssembly deployed_;
  std::map<std::string, std::vector<descriptor::QuerySpec>> running_;
};

TEST_F(RedeployPlanTest, TheSameDescriptorKeepsEveryQuery) {
  const auto p = plan(kDeployed);
  ASSERT_TRUE(p) << p.status().message();
  EXPECT_TRUE(p->steps.empty());
  EXPECT_EQ(p->kept, (std::vector<std::string>{"plant.cep/hot", "plant.cep/cold"}));
}

TEST_F(RedeployPlanTest, AnEditedQueryIsReplacedAnAbsentOneRemovedANewOneAdded) {
  const auto p = plan(R"(<service-assembly name="plant">
  <service-unit name="cep" type="cep">
    <subscribe address="temp"/>
    <query name="hot" engine="nfa" input="temp" output="alerts">
      <text>PATTERN SEQ(Temp a, Temp b) WHERE b.value &gt; a.value WITHIN 60</text>
    </query>
    <query name="rising" engine="nfa" input="temp" output="alerts">
      <text>PATTERN SEQ(Temp a, Temp b, Temp c) WITHIN 5</text>
    </query>
  </service-unit>
  <service-unit name="sink" type="replay-sink">
    <param name="file" value="out.jsonl"/><subscribe address="alerts"/>
  </service-unit>
</service-assembly>)");
  ASSERT_TRUE(p) << p.status().message();
  // Removals first: a name or output freed is free before anything is added.
  EXPECT_EQ(steps(*p), (std::vector<std::string>{"removed plant.cep/cold", "replaced plant.cep/hot",
                                                 "added plant.cep/rising"}));
  EXPECT_NE(p->steps[1].spec.text.find("WITHIN 60"), std::string::npos);
  EXPECT_TRUE(p->kept.empty());
}

TEST_F(RedeployPlanTest, ItComparesWithTheQueriesAsTheyRunNotAsFirstDeployed) {
  // An edit over the admin API widened "hot" already: the descriptor that
  // says the same keeps it, and one that repeats the deployed text reverts it.
  descriptor::QuerySpec& hot = running_["plant.cep"][0];
  hot.text = "PATTERN SEQ(Temp a, Temp b) WHERE b.value > a.value WITHIN 60";
  auto reverted = plan(kDeployed);
  ASSERT_TRUE(reverted);
  EXPECT_EQ(steps(*reverted), std::vector<std::string>{"replaced plant.cep/hot"});
  // Only the text, output and options count, not where a query was written.
  running_["plant.cep"] = parse(kDeployed).unit("cep")->queries;
  for (auto& q : running_["plant.cep"]) q.where.line += 40;
  auto same = plan(kDeployed);
  ASSERT_TRUE(same);
  EXPECT_TRUE(same->steps.empty());
}

TEST_F(RedeployPlanTest, AnOptionOrOutputChangeIsAnEdit) {
  std::string next(kDeployed);
  const std::string from = R"(name="cold" engine="nfa" input="temp" output="alerts")";
  next.replace(next.find(from), from.size(),
               R"(name="cold" engine="nfa" input="temp" output="frost")");
  auto p = plan(next);
  ASSERT_TRUE(p);
  EXPECT_EQ(steps(*p), std::vector<std::string>{"replaced plant.cep/cold"});
}

TEST_F(RedeployPlanTest, AnythingButQueriesIsRefusedNamingTheUnitAndWhat) {
  struct Case {
    std::string from, to, says;
  };
  const std::vector<Case> cases = {
      {R"(value="out.jsonl")", R"(value="other.jsonl")", "\"sink\": its params differ"},
      {R"(<subscribe address="temp"/>)", R"(<subscribe address="heat"/>)",
       "\"cep\": its subscriptions differ"},
      {R"(type="replay-sink")", R"(type="replay-source")", "\"sink\": its type differs"},
      {R"(<service-unit name="sink")", R"(<service-unit name="drain")",
       "\"sink\" runs but is not in the new descriptor"},
      {"</service-assembly>",
       R"(<service-unit name="more" type="replay-sink"><param name="file" value="m.jsonl"/>
         </service-unit></service-assembly>)",
       "\"more\" is new"},
  };
  for (const Case& c : cases) {
    std::string next(kDeployed);
    next.replace(next.find(c.from), c.from.size(), c.to);
    const auto p = plan(next);
    ASSERT_FALSE(p) << c.to;
    EXPECT_EQ(p.status().code(), Status::Code::kRejected);
    EXPECT_NE(p.status().message().find(c.says), std::string::npos) << p.status().message();
    EXPECT_NE(p.status().message().find("new.xml:"), std::string::npos) << p.status().message();
    EXPECT_NE(p.status().message().find("undeploy and deploy"), std::string::npos);
  }
}

TEST_F(RedeployPlanTest, QueriesOnAUnitThatRunsNoneAreRefused) {
  running_.erase("plant.cep");
  const auto p = plan(kDeployed);
  ASSERT_FALSE(p);
  EXPECT_NE(p.status().message().find("runs no queries"), std::string::npos);
}

}  // namespace
}  // namespace cepbus::services
