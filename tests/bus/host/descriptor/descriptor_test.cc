#include "bus/host/descriptor/descriptor.h"

#include <gtest/gtest.h>

namespace cepbus::descriptor {
namespace {

TEST(DescriptorModelTest, ErrorsAndLocationsPrintAsFileColonLine) {
  EXPECT_EQ((DescriptorError{"q.xml", 12, "bad"}).toString(), "q.xml:12: bad");
  EXPECT_EQ((DescriptorError{"q.xml", 0, "unreadable"}).toString(), "q.xml: unreadable");
  const Location where{"q.xml", 7};
  EXPECT_EQ(where.toString(), "q.xml:7");
  const DescriptorError e = where.error("query does not compile");
  EXPECT_EQ(e.file, "q.xml");
  EXPECT_EQ(e.line, 7);
  EXPECT_EQ(e.toString(), "q.xml:7: query does not compile");
}

TEST(DescriptorModelTest, EnumNamesAreTheDescriptorSpellings) {
  EXPECT_EQ(logLevelName(LogLevel::kInformation), "information");
  EXPECT_EQ(logLevelName(LogLevel::kTrace), "trace");
  EXPECT_EQ(flowName(FlowKind::kSt), "st");
  EXPECT_EQ(flowName(FlowKind::kSeda), "seda");
  EXPECT_EQ(flowName(FlowKind::kReliable), "reliable");
  EXPECT_EQ(qosName(Qos::kBestEffort), "best-effort");
  EXPECT_EQ(qosName(Qos::kReliable), "reliable");
}

TEST(DescriptorModelTest, LookUpsByName) {
  Descriptor d;
  d.stages.resize(2);
  d.stages[0].name = "a";
  d.stages[1].name = "b";
  d.stages[1].capacity = 8;
  ServiceUnit unit;
  unit.name = "u";
  unit.params.push_back(Param{"file", "x.jsonl", {}});
  unit.queries.emplace_back().name = "q";
  unit.queries[0].options.push_back(Param{"construction", "batched", {}});
  ServiceAssembly& sa = d.assemblies.emplace_back();
  sa.name = "sa";
  sa.units.push_back(unit);

  ASSERT_NE(d.stage("b"), nullptr);
  EXPECT_EQ(d.stage("b")->capacity, 8u);
  EXPECT_EQ(d.stage("c"), nullptr);
  ASSERT_NE(d.assembly("sa"), nullptr);
  EXPECT_EQ(d.assembly("other"), nullptr);
  const ServiceUnit* u = d.assembly("sa")->unit("u");
  ASSERT_NE(u, nullptr);
  EXPECT_EQ(d.assembly("sa")->unit("v"), nullptr);
  ASSERT_NE(u->param("file"), nullptr);
  EXPECT_EQ(u->param("file")->value, "x.jsonl");
  EXPECT_EQ(u->param("rate"), nullptr);
  ASSERT_NE(u->queries[0].option("construction"), nullptr);
  EXPECT_EQ(u->queries[0].option("construction")->value, "batched");
  EXPECT_EQ(u->queries[0].option("slack"), nullptr);
}

TEST(DescriptorModelTest, ResolvePathJoinsRelativePathsToTheBaseDir) {
  ServiceAssembly a;
  a.base_dir = "/srv/bus";
  EXPECT_EQ(a.resolvePath("data/x.jsonl"), std::filesystem::path("/srv/bus/data/x.jsonl"));
  EXPECT_EQ(a.resolvePath("/tmp/x.jsonl"), std::filesystem::path("/tmp/x.jsonl"));
  a.base_dir.clear();
  EXPECT_EQ(a.resolvePath("data/x.jsonl"), std::filesystem::path("data/x.jsonl"));
}

}  // namespace
}  // namespace cepbus::descriptor
