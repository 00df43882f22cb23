#include "services/service_factory_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace cepbus::services {
namespace {

using ::testing::HasSubstr;

descriptor::ServiceUnit unitWith(std::vector<descriptor::Param> params) {
  descriptor::ServiceUnit unit;
  unit.name = "sink";
  unit.type = "replay-sink";
  unit.where = {"bus.xml", 12};
  unit.params = std::move(params);
  return unit;
}

class NamedFactory final : public ServiceFactory {
 public:
  explicit NamedFactory(std::string type) : type_(std::move(type)) {}
  std::string_view type() const override { return type_; }
  Result<std::unique_ptr<Service>> create(const descriptor::ServiceAssembly&,
                                          const descriptor::ServiceUnit&,
                                          ServiceContext&) const override {
    return Status::unavailable("not for this test");
  }

 private:
  std::string type_;
};

TEST(ServiceFactoryRegistryTest, FindsFactoriesByTypeAndRefusesATypeTwice) {
  ServiceFactoryRegistry registry;
  ASSERT_TRUE(registry.add(std::make_unique<NamedFactory>("b")).isOk());
  ASSERT_TRUE(registry.add(std::make_unique<NamedFactory>("a")).isOk());
  EXPECT_EQ(registry.add(std::make_unique<NamedFactory>("a")).code(), Status::Code::kAlreadyExists);
  ASSERT_NE(registry.find("a"), nullptr);
  EXPECT_EQ(registry.find("a")->type(), "a");
  EXPECT_EQ(registry.find("c"), nullptr);
  EXPECT_EQ(registry.types(), (std::vector<std::string>{"a", "b"}));
}

TEST(ServiceFactoryRegistryTest, ARequiredParamIsFoundOrNamedWithTheUnitsLine) {
  const descriptor::ServiceUnit unit = unitWith({{"file", "out.jsonl", {"bus.xml", 13}}});
  auto file = requiredParam(unit, "replay-sink", "file");
  ASSERT_TRUE(file.isOk());
  EXPECT_EQ((*file)->value, "out.jsonl");

  auto missing = requiredParam(unit, "replay-sink", "format");
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), HasSubstr("bus.xml:12"));
  EXPECT_THAT(missing.status().message(),
              HasSubstr("replay-sink \"sink\": missing <param name=\"format\">"));
}

TEST(ServiceFactoryRegistryTest, ANumberParamIsCheckedAgainstItsRange) {
  const descriptor::ServiceUnit unit = unitWith({{"rate", "250.5", {"bus.xml", 13}},
                                                 {"big", "1e12", {"bus.xml", 14}},
                                                 {"word", "fast", {"bus.xml", 15}}});
  EXPECT_EQ(*numberParam(unit, "rate", 0, 0, 1e9), 250.5);
  EXPECT_EQ(*numberParam(unit, "absent", 7, 0, 1e9), 7);
  for (const char* bad : {"big", "word"}) {
    auto v = numberParam(unit, bad, 0, 0, 1e9);
    ASSERT_FALSE(v.isOk()) << bad;
    EXPECT_THAT(v.status().message(), HasSubstr(std::string("<param name=\"") + bad + "\">"));
  }
  EXPECT_THAT(numberParam(unit, "word", 0, 0, 1e9).status().message(), HasSubstr("bus.xml:15"));
}

TEST(ServiceFactoryRegistryTest, AnUnknownParamIsNamedWithTheOnesExpected) {
  const descriptor::ServiceUnit unit =
      unitWith({{"file", "x", {"bus.xml", 13}}, {"fiel", "y", {"bus.xml", 14}}});
  EXPECT_TRUE(checkParamNames(unit, "replay-sink", {"file", "fiel"}).isOk());
  const Status s = checkParamNames(unit, "replay-sink", {"file", "format"});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("bus.xml:14"));
  EXPECT_THAT(s.message(), HasSubstr("unknown param \"fiel\" (expected file, format)"));
}

}  // namespace
}  // namespace cepbus::services
