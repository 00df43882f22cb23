#include "bus/host/detection/input_vocabulary.h"

#include <gtest/gtest.h>

#include "bus/core/pattern/parser.h"

namespace cepbus::detection {
namespace {

EventPtr temp(double value, std::string_view sensor) {
  return EventBuilder("Temp").at(1).set("value", Value(value)).set("sensor", Value(sensor)).build();
}

// The warnings for `text` over events of type Temp (value, sensor) and
// Humid (level).
std::vector<std::string> warningsFor(std::string_view text) {
  auto query = pattern::parseQuery(text);
  EXPECT_TRUE(query.isOk()) << query.status().message();
  if (!query) return {};
  InputVocabulary vocabulary;
  vocabulary.observe(
      std::vector<EventPtr>{temp(20, "s1"), temp(21, "s2"),
                            EventBuilder("Humid").at(2).set("level", Value(3.0)).build()});
  return vocabulary.unknownNames(namesUsedBy(*query, text));
}

TEST(InputVocabularyTest, NoWarningWhenEveryNameOccurs) {
  EXPECT_TRUE(warningsFor("PATTERN SEQ(Temp a, Humid h, Temp b) WHERE b.value > a.value "
                          "AND h.level > 1 PARTITION BY sensor RETURN R(a.value, b.ts)")
                  .empty());
}

TEST(InputVocabularyTest, MisspelledAttributeNamedAtItsColumnWithSuggestion) {
  EXPECT_EQ(
      warningsFor("PATTERN SEQ(Temp a, Temp b)\nWHERE b.vlaue > a.value"),
      std::vector<std::string>{
          "line 2, column 7: attribute 'vlaue' never occurred on a Temp event in the input; did "
          "you mean 'value'?"});
}

TEST(InputVocabularyTest, AttributeOfAnotherTypeIsUnknownOnThisOne) {
  // `level` occurs, but on Humid events, not on the Temp events `a` binds.
  EXPECT_EQ(
      warningsFor("PATTERN SEQ(Temp a, Temp b) WHERE a.level > 1"),
      std::vector<std::string>{
          "line 1, column 35: attribute 'level' never occurred on a Temp event in the input"});
}

TEST(InputVocabularyTest, UnknownTypeWarnedOnceAndItsAttributesNotAtAll) {
  EXPECT_EQ(warningsFor("PATTERN SEQ(Temp a, Tmep b, Tmep c) WHERE b.anything > a.value"),
            std::vector<std::string>{
                "line 1, column 21: event type 'Tmep' never occurred in the input; did you mean "
                "'Temp'?"});
}

TEST(InputVocabularyTest, PartitionKeyReturnAndAggregateAttributes) {
  const std::vector<std::string> w = warningsFor(
      "PATTERN SEQ(Temp a, Temp+ b[]) WHERE avg(b[].valeu) > 1\n"
      "PARTITION BY sensor, sensr RETURN R(a.vlaue)");
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0],
            "line 1, column 38: attribute 'valeu' never occurred on a Temp event in the "
            "input; did you mean 'value'?");
  EXPECT_EQ(w[1],
            "line 2, column 37: attribute 'vlaue' never occurred on a Temp event in the "
            "input; did you mean 'value'?");
  EXPECT_EQ(w[2],
            "line 2, column 22: PARTITION BY key 'sensr' never occurred on a Temp event in "
            "the input; did you mean 'sensor'?");
}

TEST(InputVocabularyTest, NamesUsedListsEachNameOnceAtItsFirstMention) {
  const std::string text =
      "PATTERN SEQ(Temp a, Temp b) WHERE a.value < b.value PARTITION BY sensor";
  auto query = pattern::parseQuery(text);
  ASSERT_TRUE(query.isOk());
  const std::vector<NameUse> uses = namesUsedBy(*query, text);
  ASSERT_EQ(uses.size(), 3u);
  EXPECT_EQ(uses[0].kind, NameUse::Kind::kEventType);
  EXPECT_EQ(uses[0].pos.column, 13);
  EXPECT_EQ(uses[1].kind, NameUse::Kind::kAttribute);
  EXPECT_EQ(uses[1].type, "Temp");
  EXPECT_EQ(uses[1].pos.column, 35);
  EXPECT_EQ(uses[2].kind, NameUse::Kind::kPartitionKey);
  EXPECT_EQ(uses[2].pos.column, 66);
}

TEST(InputVocabularyTest, CountsWhatItObserved) {
  InputVocabulary vocabulary;
  EXPECT_FALSE(vocabulary.hadType(Symbol::intern("Temp")));
  vocabulary.observe(*temp(1, "s"));
  EXPECT_EQ(vocabulary.events(), 1u);
  EXPECT_TRUE(vocabulary.hadType(Symbol::intern("Temp")));
}

}  // namespace
}  // namespace cepbus::detection
