#include "bus/host/detection/last_every_rule.h"

#include <gtest/gtest.h>

#include "bus/core/plugin/detector.h"
#include "tests/bus/host/detection/match_sink_fakes.h"

namespace cepbus::detection {
namespace {

using match_fakes::reading;
using match_fakes::RecordingSink;
using match_fakes::report;
using Ts = std::vector<std::vector<Timestamp>>;

TEST(LastEveryRuleTest, PassesTheLastMatchOfEachAlignedIntervalOnceTimePassesItsEnd) {
  RecordingSink out;
  LastEveryRule rule(10, MatchKeyer(), 0, out);
  for (Timestamp end : {1, 4, 9, 10, 15, 31}) report(rule, {reading(end - 1), reading(end)});
  rule.onTime(8);
  EXPECT_TRUE(out.got.empty());
  rule.onTime(9);  // [0, 10) has passed
  EXPECT_EQ(out.got, (Ts{{8, 9}}));
  rule.onTime(29);
  EXPECT_EQ(out.got, (Ts{{8, 9}, {14, 15}}));
  rule.onTime(plugin::Detector::kEndOfTime);
  EXPECT_EQ(out.got, (Ts{{8, 9}, {14, 15}, {30, 31}}));
  EXPECT_EQ(rule.suppressed(), 3u);
  EXPECT_EQ(out.composed_alerts, 3u);
}

TEST(LastEveryRuleTest, TakesTheLastInOrderWhateverTheReportOrder) {
  RecordingSink out;
  LastEveryRule rule(10, MatchKeyer(), 0, out);
  report(rule, {reading(3), reading(7)});
  report(rule, {reading(5), reading(7)});
  report(rule, {reading(1), reading(7)});
  report(rule, {reading(2), reading(6)});
  rule.onTime(9);
  EXPECT_EQ(out.got, (Ts{{5, 7}}));
}

TEST(LastEveryRuleTest, IntervalsAreAlignedBelowZeroToo) {
  RecordingSink out;
  LastEveryRule rule(10, MatchKeyer(), 0, out);
  report(rule, {reading(-12), reading(-11)});
  report(rule, {reading(-3), reading(-1)});
  rule.onTime(-11);
  EXPECT_EQ(out.got, (Ts{{-12, -11}}));  // [-20, -10) has passed
  rule.onTime(-1);
  EXPECT_EQ(out.got, (Ts{{-12, -11}, {-3, -1}}));
}

TEST(LastEveryRuleTest, KeysHaveIntervalsOfTheirOwn) {
  RecordingSink out;
  LastEveryRule rule(10, MatchKeyer::ofPartition({"sensor"}), 0, out);
  report(rule, {reading(1, "x"), reading(2, "x")});
  report(rule, {reading(1, "y"), reading(3, "y")});
  report(rule, {reading(2, "x"), reading(5, "x")});
  rule.onTime(9);
  EXPECT_EQ(out.got, (Ts{{1, 3}, {2, 5}}));
}

TEST(LastEveryRuleTest, KeysHoldingNothingAreForgotten) {
  RecordingSink out;
  LastEveryRule rule(10, MatchKeyer::ofPartition({"sensor"}), 0, out);
  for (int k = 0; k < 1000; ++k) {
    report(rule, {reading(k, "s" + std::to_string(k)), reading(k + 1, "s" + std::to_string(k))});
  }
  rule.onTime(plugin::Detector::kEndOfTime);
  EXPECT_EQ(out.got.size(), 1000u);
  EXPECT_EQ(rule.keys(), 0u);
}

}  // namespace
}  // namespace cepbus::detection
