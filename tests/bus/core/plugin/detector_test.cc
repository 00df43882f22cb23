#include "bus/core/plugin/detector.h"

#include <gtest/gtest.h>

namespace cepbus::plugin {
namespace {

DetectorOptions options(std::map<std::string, std::string, std::less<>> values) {
  return DetectorOptions(std::move(values));
}

TEST(DetectorOptionsTest, ParsesKeyValueItemsLaterOnesWin) {
  const std::vector<std::string> items = {"construction=per_event", "slack=3", "slack=4", "x="};
  auto o = DetectorOptions::parse(items);
  ASSERT_TRUE(o.isOk());
  EXPECT_EQ(*o->find("construction"), "per_event");
  EXPECT_EQ(*o->find("slack"), "4");
  EXPECT_EQ(*o->find("x"), "");
  EXPECT_EQ(o->find("nothing"), nullptr);
  EXPECT_EQ(o->without("slack").find("slack"), nullptr);
  EXPECT_NE(o->without("slack").find("construction"), nullptr);
}

TEST(DetectorOptionsTest, RejectsItemsWithoutKey) {
  for (const char* bad : {"novalue", "=3"}) {
    const std::vector<std::string> items = {bad};
    auto o = DetectorOptions::parse(items);
    ASSERT_FALSE(o.isOk()) << bad;
    EXPECT_NE(o.status().message().find(bad), std::string::npos);
  }
}

TEST(DetectorOptionsTest, CheckKnownNamesTheUnknownOptionAndTheKnownOnes) {
  DetectorOptions o({{"construction", "batched"}, {"colour", "red"}});
  static constexpr std::string_view kKnown[] = {"construction", "batch_period"};
  Status s = o.checkKnown(kKnown, "nfa");
  EXPECT_EQ(s.message(), "engine 'nfa' has no option 'colour' (known: construction, batch_period)");
  EXPECT_TRUE(options({{"construction", "x"}}).checkKnown(kKnown, "nfa").isOk());
}

class Composer : public MatchComposer {
 public:
  EventPtr compose(const Match& match) const override {
    EventBuilder b("Pair");
    for (size_t i = 0; i < match.size(); ++i) b.constituent(match.event(i));
    return b.build();
  }
};

TEST(MatchTest, ExposesElementsAndBuildsTheCompositeOnDemand) {
  const EventPtr a = EventBuilder("A").at(1).build();
  const EventPtr b1 = EventBuilder("B").at(2).build();
  const EventPtr b2 = EventBuilder("B").at(4).build();
  const EventPtr* events[] = {&a, &b1, &b2};
  const uint32_t ends[] = {1, 3};
  Composer composer;
  Match m(events, ends, &composer);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m.ts(2), 4);
  ASSERT_EQ(m.elementCount(), 2u);
  EXPECT_EQ(m.elementEvents(0).size(), 1u);
  ASSERT_EQ(m.elementEvents(1).size(), 2u);
  EXPECT_EQ(*m.elementEvents(1)[1], b2);
  const EventPtr c = m.composite();
  EXPECT_EQ(c->type().name(), "Pair");
  EXPECT_EQ(c->start(), 1);
  EXPECT_EQ(c->end(), 4);
  EXPECT_EQ(c->constituents().size(), 3u);
}

}  // namespace
}  // namespace cepbus::plugin
