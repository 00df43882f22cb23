#include "bus/host/descriptor/element_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "bus/host/descriptor/parser.h"
#include "tests/testing/descriptor_errors.h"

namespace cepbus::descriptor {
namespace {

using ::testing::ElementsAre;

// A service's element as a test registers it: <tag size=N>, reporting a
// bad size through the element like any parser.
struct Sized {
  std::string tag;
  uint64_t size = 0;
  Location where;
};
class SizedElement final : public ElementParser {
 public:
  SizedElement(std::string_view parent, std::string tag) : parent_(parent), tag_(std::move(tag)) {}
  std::string_view parent() const override { return parent_; }
  std::string_view tag() const override { return tag_; }
  std::any parse(const Element& e) const override {
    e.allowAttributes({"size"});
    e.noChildren();
    return Sized{tag_, e.integer("size", 1, 100).value_or(0), e.where()};
  }

 private:
  const std::string_view parent_;
  const std::string tag_;
};

// <listeners><gauge> and <cepbus><fleet>.
const ElementParsers& parsers() {
  static const ElementParsers made = [] {
    ElementParsers p;
    EXPECT_TRUE(p.add(std::make_unique<SizedElement>(kListenersElement, "gauge")).isOk());
    EXPECT_TRUE(p.add(std::make_unique<SizedElement>(kRootElement, "fleet")).isOk());
    return p;
  }();
  return made;
}

TEST(ElementParsersTest, FindsEachParserByItsParentAndTag) {
  EXPECT_EQ(parsers().find(kListenersElement, "gauge")->tag(), "gauge");
  EXPECT_EQ(parsers().find(kRootElement, "fleet")->parent(), kRootElement);
  EXPECT_EQ(parsers().find(kRootElement, "gauge"), nullptr);
  EXPECT_THAT(parsers().tags(kListenersElement), ElementsAre("gauge"));
}

TEST(ElementParsersTest, ASecondParserForTheSameElementIsRefused) {
  ElementParsers p;
  ASSERT_TRUE(p.add(std::make_unique<SizedElement>(kRootElement, "fleet")).isOk());
  const Status again = p.add(std::make_unique<SizedElement>(kRootElement, "fleet"));
  EXPECT_EQ(again.code(), Status::Code::kAlreadyExists);
  EXPECT_TRUE(p.add(std::make_unique<SizedElement>(kListenersElement, "fleet")).isOk());
}

TEST(ElementParsersTest, TheParserOfAServicesElementReadsItIntoTheDescriptor) {
  auto d = parseDescriptorString(R"(<cepbus name="t">
  <listeners><gauge size="3"/></listeners>
  <fleet size="7"/>
</cepbus>)",
                                 "t.xml", nullptr, {}, &parsers());
  ASSERT_TRUE(d.isOk()) << d.status().toString();
  ASSERT_EQ(d->elements.size(), 2u);
  EXPECT_EQ(d->elements[0].parent, "listeners");
  EXPECT_EQ(d->elements[0].tag, "gauge");
  EXPECT_EQ(d->elements[1].parent, "cepbus");
  EXPECT_EQ(d->elements[1].where.line, 3);
  const auto* gauge = std::any_cast<Sized>(&d->elements[0].config);
  ASSERT_NE(gauge, nullptr);
  EXPECT_EQ(gauge->size, 3u);
  EXPECT_EQ(gauge->where.toString(), "t.xml:2");
  // element<T>() finds a configuration by its type; none of another type.
  EXPECT_EQ(d->element<Sized>()->tag, "gauge");
  EXPECT_EQ(d->element<std::string>(), nullptr);
}

TEST(ElementParsersTest, WhatAParserReportsFailsTheDescriptorAtItsLine) {
  EXPECT_THAT(
      testing::descriptorErrors(R"(<cepbus name="t">
<listeners>
  <gauge size="0" colour="red"/>
</listeners>
</cepbus>)",
                                &parsers()),
      ElementsAre("t.xml:3: <gauge>: unknown attribute \"colour\"; expected one of \"size\"",
                  "t.xml:3: <gauge>: attribute \"size\" must be between 1 and 100, got \"0\""));
}

TEST(ElementParsersTest, AServicesElementComesOnceAndTyposGetASuggestion) {
  EXPECT_THAT(testing::descriptorErrors(R"(<cepbus name="t">
<listeners><gauge/><gauge/><gage/></listeners>
<flet/>
</cepbus>)",
                                        &parsers()),
              ElementsAre("t.xml:2: <gauge> appears twice in <listeners> (first at line 2)",
                          "t.xml:2: unknown element <gage> in <listeners> (did you mean <gauge>?)",
                          "t.xml:3: unknown element <flet> in <cepbus name=\"t\"> (did you mean "
                          "<fleet>?)"));
}

TEST(ElementParsersTest, WithoutItsParserAServicesElementIsUnknown) {
  EXPECT_THAT(testing::descriptorErrors(
                  "<cepbus name=\"t\">\n<listeners><gauge size=\"3\"/></listeners>\n</cepbus>"),
              ElementsAre("t.xml:2: unknown element <gauge> in <listeners>; <listeners> has no "
                          "child elements"));
}

}  // namespace
}  // namespace cepbus::descriptor
