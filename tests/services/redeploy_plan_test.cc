#include "services/redeploy_plan.h"

#include <gtest/gtest.h>

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

// A query host that runs `running` and, as a CEP unit does with its
// checkpoint_interval, gives every query of a unit an option of the unit's.
class FakeHost final : public QueryHost {
 public:
  std::vector<descriptor::QuerySpec> running;

  std::vector<descriptor::QuerySpec> querySpecs() const override { return running; }
  std::vector<descriptor::QuerySpec> unitQueries(
      const descriptor::ServiceAssembly&, const descriptor::ServiceUnit& unit) const override {
    std::vector<descriptor::QuerySpec> out = unit.queries;
    for (descriptor::QuerySpec& q : out) q.options.push_back({"from_unit", "1", {}});
    return out;
  }
  Status addQuery(const descriptor::QuerySpec&) override { return Status::ok(); }
  Status removeQuery(std::string_view) override { return Status::ok(); }
  Result<QueryEdit> replaceQuery(const descriptor::QuerySpec&) override { return QueryEdit{}; }
  std::vector<std::string> queries() const override { return {}; }
  std::optional<QueryStats> stats(std::string_view) const override { return std::nullopt; }
  std::string endpointName(std::string_view) const override { return {}; }
  Result<std::string> exportModel(std::string_view, std::string_view) const override {
    return Status::notFound("no model");
  }
};

// The CEP unit runs the deployed descriptor's queries as its host makes
// them, unless a test changed them (as the admin API's query edits would).
class RedeployPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    deployed_ = parse(kDeployed);
    cep_.running = cep_.unitQueries(deployed_, *deployed_.unit("cep"));
  }

  Result<RedeployPlan> plan(std::string_view next) {
    return planRedeploy(deployed_, parse(next), [this](std::string_view service) {
      return service == "plant.cep" && cep_runs_ ? &cep_ : nullptr;
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
  FakeHost cep_;
  bool cep_runs_ = true;
};

// Compared as the host runs them, the unit's own additions included: the
// same descriptor changes nothing.
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
  // As the host runs them: with what the unit gives each query.
  EXPECT_NE(p->steps[1].spec.option("from_unit"), nullptr);
  EXPECT_NE(p->steps[2].spec.option("from_unit"), nullptr);
  EXPECT_TRUE(p->kept.empty());
}

TEST_F(RedeployPlanTest, ItComparesWithTheQueriesAsTheyRunNotAsFirstDeployed) {
  // An edit over the admin API widened "hot" already: the descriptor that
  // says the same keeps it, and one that repeats the deployed text reverts it.
  descriptor::QuerySpec& hot = cep_.running[0];
  hot.text = "PATTERN SEQ(Temp a, Temp b) WHERE b.value > a.value WITHIN 60";
  auto reverted = plan(kDeployed);
  ASSERT_TRUE(reverted);
  EXPECT_EQ(steps(*reverted), std::vector<std::string>{"replaced plant.cep/hot"});
  // Only the text, output and options count, not where a query was written.
  cep_.running = cep_.unitQueries(deployed_, *deployed_.unit("cep"));
  for (auto& q : cep_.running) q.where.line += 40;
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
  cep_runs_ = false;
  const auto p = plan(kDeployed);
  ASSERT_FALSE(p);
  EXPECT_NE(p.status().message().find("runs no queries"), std::string::npos);
}

}  // namespace
}  // namespace cepbus::services
