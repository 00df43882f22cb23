#include "bus/host/detection/gate_rule.h"

#include <gtest/gtest.h>

#include "bus/core/pattern/parser.h"
#include "tests/bus/host/detection/match_sink_fakes.h"

namespace cepbus::detection {
namespace {

using match_fakes::reading;
using match_fakes::RecordingSink;
using match_fakes::report;
using Ts = std::vector<std::vector<Timestamp>>;

TEST(GateRuleTest, FirstEveryPassesTheFirstMatchOfEachIntervalAfterTheLastPassed) {
  RecordingSink out;
  auto rule = GateRule::firstEvery(10, MatchKeyer(), 0, out);
  for (Timestamp end : {1, 3, 5, 11, 12, 13, 25}) report(*rule, {reading(end - 1), reading(end)});
  rule->onTime(100);
  // 1 passes; 3 and 5 are within 10 of it; 11 is not; 12, 13 are within 10
  // of 11; 25 is not.
  EXPECT_EQ(out.got, (Ts{{0, 1}, {10, 11}, {24, 25}}));
  EXPECT_EQ(rule->suppressed(), 4u);
  EXPECT_EQ(out.composed_alerts, 3u);  // the composite made when the match was reported
}

TEST(GateRuleTest, FirstEveryWaitsForTimeToPassAndTakesTheFirstOfMatchesEndingTogether) {
  RecordingSink out;
  auto rule = GateRule::firstEvery(10, MatchKeyer(), 0, out);
  report(*rule, {reading(3), reading(5)});
  report(*rule, {reading(1), reading(5)});  // reported second, first in order
  rule->onTime(4);
  EXPECT_TRUE(out.got.empty());  // a match ending at 5 may still come
  rule->onTime(5);
  EXPECT_EQ(out.got, (Ts{{1, 5}}));
  EXPECT_EQ(rule->suppressed(), 1u);
}

TEST(GateRuleTest, FirstEveryTakesMatchesInEndOrderWhateverTheReportOrder) {
  RecordingSink out;
  auto rule = GateRule::firstEvery(10, MatchKeyer(), 0, out);
  report(*rule, {reading(7), reading(12)});
  report(*rule, {reading(2), reading(4)});  // ends first, reported late
  rule->onTime(20);
  EXPECT_EQ(out.got, (Ts{{2, 4}}));  // 12 is within 10 of 4
}

TEST(GateRuleTest, FirstEveryPerKeyKeepsAGatePerValue) {
  Result<pattern::Query> q = pattern::parseQuery(
      "PATTERN SEQ(T a, T b) WHERE a.sensor = b.sensor EMIT FIRST EVERY 10 PER a.sensor");
  ASSERT_TRUE(q.isOk()) << q.status().toString();
  auto keyer = MatchKeyer::ofExpr(*q, *q->emit->per);
  ASSERT_TRUE(keyer.isOk());
  RecordingSink out;
  auto rule = GateRule::firstEvery(10, std::move(keyer).value(), 0, out);
  report(*rule, {reading(1, "x"), reading(2, "x")});
  report(*rule, {reading(2, "y"), reading(3, "y")});
  report(*rule, {reading(3, "x"), reading(4, "x")});
  report(*rule, {reading(4, "y"), reading(5, "y")});
  rule->onTime(10);
  EXPECT_EQ(out.got, (Ts{{1, 2}, {2, 3}}));
  EXPECT_EQ(rule->suppressed(), 2u);
}

TEST(GateRuleTest, SkipPastLastEventPassesOnlyMatchesStartingAfterTheLastPassedEnds) {
  RecordingSink out;
  auto rule = GateRule::skipPastLastEvent(MatchKeyer(), std::nullopt, 0, out);
  report(*rule, {reading(1), reading(2)});
  report(*rule, {reading(2), reading(3)});  // shares 2
  report(*rule, {reading(1), reading(4)});  // starts before 2
  report(*rule, {reading(3), reading(4)});  // ends with the one above, starts after 2
  report(*rule, {reading(4), reading(6)});  // shares 4
  report(*rule, {reading(5), reading(7)});
  rule->onTime(10);
  EXPECT_EQ(out.got, (Ts{{1, 2}, {3, 4}, {5, 7}}));
  EXPECT_EQ(rule->suppressed(), 3u);
}

TEST(GateRuleTest, SkipPastLastEventWaitsForATrailingNegationsSpan) {
  RecordingSink out;
  auto rule = GateRule::skipPastLastEvent(MatchKeyer(), std::nullopt, 5, out);
  report(*rule, {reading(4), reading(6)});
  rule->onTime(10);
  EXPECT_TRUE(out.got.empty());  // a match ending at 6 may be decided up to 11
  report(*rule, {reading(2), reading(3)});
  rule->onTime(11);
  EXPECT_EQ(out.got, (Ts{{2, 3}, {4, 6}}));
}

TEST(GateRuleTest, SkipPastLastEventKeepsAPartitionEach) {
  RecordingSink out;
  auto rule =
      GateRule::skipPastLastEvent(MatchKeyer::ofPartition({"sensor"}), std::nullopt, 0, out);
  report(*rule, {reading(1, "x"), reading(3, "x")});
  report(*rule, {reading(2, "y"), reading(4, "y")});  // overlaps x's, another partition
  report(*rule, {reading(3, "x"), reading(5, "x")});
  rule->onTime(10);
  EXPECT_EQ(out.got, (Ts{{1, 3}, {2, 4}}));
}

TEST(GateRuleTest, KeysWhoseGateNoLaterMatchMeetsAreForgotten) {
  RecordingSink out;
  auto first = GateRule::firstEvery(10, MatchKeyer::ofPartition({"sensor"}), 0, out);
  auto skip = GateRule::skipPastLastEvent(MatchKeyer::ofPartition({"sensor"}), 5, 0, out);
  auto skip_unbounded =
      GateRule::skipPastLastEvent(MatchKeyer::ofPartition({"sensor"}), std::nullopt, 0, out);
  for (int k = 0; k < 1000; ++k) {
    const std::string sensor = "s" + std::to_string(k);
    for (GateRule* rule : {first.get(), skip.get(), skip_unbounded.get()}) {
      report(*rule, {reading(k, sensor), reading(k + 1, sensor)});
    }
  }
  for (GateRule* rule : {first.get(), skip.get(), skip_unbounded.get()}) rule->onTime(1000);
  // FIRST: a gate at end + 10 stops nothing after 1000 for the keys of ends
  // up to 990; SKIP with WITHIN 5: a gate at end + 1 for ends up to 995.
  EXPECT_LT(first->keys(), 20u);
  EXPECT_LT(skip->keys(), 10u);
  EXPECT_EQ(skip_unbounded->keys(), 1000u);  // without WITHIN a match may start anywhere before
  // A forgotten key's next match passes as a new key's would.
  report(*first, {reading(1500, "s0"), reading(1501, "s0")});
  first->onTime(2000);
  EXPECT_EQ(out.got.back(), (std::vector<Timestamp>{1500, 1501}));
}

}  // namespace
}  // namespace cepbus::detection
