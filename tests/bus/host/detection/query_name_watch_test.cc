#include "bus/host/detection/query_name_watch.h"

#include <gtest/gtest.h>

#include "bus/core/pattern/parser.h"

namespace cepbus::detection {
namespace {

EventPtr event(std::string_view type, std::string_view attr) {
  return EventBuilder(type).at(1).set(attr, Value(1.0)).build();
}

QueryNameWatch watchOf(const std::string& text, uint64_t sample) {
  auto query = pattern::parseQuery(text);
  EXPECT_TRUE(query.isOk()) << query.status().message();
  return QueryNameWatch(*query, text, sample);
}

TEST(QueryNameWatchTest, WarnsOnceWhenTheSampleIsComplete) {
  QueryNameWatch watch =
      watchOf("PATTERN SEQ(Temp a, Temp b) WHERE b.prize > a.prize RETURN R(a.value)", 3);
  EXPECT_TRUE(watch.onEvents(std::vector<EventPtr>{event("Temp", "price")}).empty());
  const std::vector<std::string> warnings = watch.onEvents(std::vector<EventPtr>{
      event("Temp", "price"), event("Temp", "price"), event("Temp", "price")});
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0],
            "line 1, column 35: attribute 'prize' never occurred on a Temp event in the first 3 "
            "events on its inputs; did you mean 'price'?");
  EXPECT_EQ(warnings[1],
            "line 1, column 62: attribute 'value' never occurred on a Temp event in the first 3 "
            "events on its inputs");
  EXPECT_TRUE(watch.onEvents(std::vector<EventPtr>{event("Temp", "price")}).empty());
}

TEST(QueryNameWatchTest, NoWarningWhenTheSampleHadEveryName) {
  QueryNameWatch watch = watchOf("PATTERN SEQ(Temp a, Temp b) WHERE b.price > a.price", 2);
  EXPECT_TRUE(watch.onEvents(std::vector<EventPtr>{event("Temp", "price"), event("Temp", "price")})
                  .empty());
  EXPECT_EQ(watch.missingAttribute(), 0u);
}

TEST(QueryNameWatchTest, CountsEventsOfItsTypesLackingAPredicateAttribute) {
  // RETURN's a.other is not read by a predicate; Humid events are not the
  // query's; the count goes on after the sample.
  QueryNameWatch watch =
      watchOf("PATTERN SEQ(Temp a, Temp b) WHERE b.price > a.price RETURN R(a.other)", 1);
  watch.onEvents(std::vector<EventPtr>{event("Temp", "price"), event("Temp", "prize"),
                                       event("Humid", "level")});
  EXPECT_EQ(watch.missingAttribute(), 1u);
  watch.onEvents(std::vector<EventPtr>{event("Temp", "value"), event("Temp", "value")});
  EXPECT_EQ(watch.missingAttribute(), 3u);
}

}  // namespace
}  // namespace cepbus::detection
