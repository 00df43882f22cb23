#include "bus/app/engine_comparison.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

namespace cepbus::app {
namespace {

std::vector<RecordedMatch> sorted(std::vector<RecordedMatch> m) {
  std::sort(m.begin(), m.end(), streamOrder);
  return m;
}

TEST(EngineComparisonTest, OrdersMatchesByWhereTheyEndInTheStream) {
  const auto m = sorted({{0, {1, 9}}, {0, {4, 5}}, {1, {2, 5}}, {0, {2, 5}}});
  EXPECT_EQ(m, (std::vector<RecordedMatch>{{0, {2, 5}}, {1, {2, 5}}, {0, {4, 5}}, {0, {1, 9}}}));
}

TEST(EngineComparisonTest, TheSameMultisetInAnotherOrderHasNoDifference) {
  EXPECT_FALSE(firstDifference(sorted({{0, {1, 2}}, {0, {1, 2}}, {0, {3, 4}}}),
                               sorted({{0, {3, 4}}, {0, {1, 2}}, {0, {1, 2}}})));
  EXPECT_FALSE(firstDifference({}, {}));
}

TEST(EngineComparisonTest, NamesTheEarliestMatchCountedDifferently) {
  // Missing from the other side, reported twice, only on the other side:
  // the earliest end wins, whichever side has it.
  const auto ref = sorted({{0, {1, 3}}, {0, {2, 6}}, {0, {5, 8}}});
  auto d = firstDifference(ref, sorted({{0, {1, 3}}, {0, {5, 8}}}));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->match, (RecordedMatch{0, {2, 6}}));
  EXPECT_EQ(d->in_reference, 1u);
  EXPECT_EQ(d->in_other, 0u);
  d = firstDifference(ref, sorted({{0, {1, 3}}, {0, {1, 3}}, {0, {2, 6}}, {0, {5, 8}}}));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->match, (RecordedMatch{0, {1, 3}}));
  EXPECT_EQ(d->in_other, 2u);
  d = firstDifference(ref, sorted({{0, {1, 3}}, {0, {2, 6}}, {0, {5, 8}}, {1, {5, 8}}}));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->match, (RecordedMatch{1, {5, 8}}));
  EXPECT_EQ(d->in_reference, 0u);
}

// A run that returns is read whole, even past what a pipe buffers, with the
// counter it advanced.
TEST(RunInChildTest, ReturnsTheChildsTextAndProgress) {
  auto outcome = runInChild(
      [](std::atomic<uint64_t>& progress) {
        progress.store(7);
        return std::string(1 << 20, 'x') + "end";
      },
      0);
  ASSERT_TRUE(outcome) << outcome.status().message();
  EXPECT_FALSE(outcome->timed_out);
  EXPECT_EQ(outcome->progress, 7u);
  EXPECT_EQ(outcome->output.size(), (1u << 20) + 3);
  EXPECT_EQ(outcome->output.substr(outcome->output.size() - 3), "end");
}

// A run that never returns is stopped at its deadline, with how far it got.
TEST(RunInChildTest, StopsARunStillGoingAtItsDeadline) {
  auto outcome = runInChild(
      [](std::atomic<uint64_t>& progress) -> std::string {
        progress.store(3);
        while (true) ::pause();
      },
      0.2);
  ASSERT_TRUE(outcome) << outcome.status().message();
  EXPECT_TRUE(outcome->timed_out);
  EXPECT_EQ(outcome->progress, 3u);
  EXPECT_TRUE(outcome->output.empty());
}

TEST(RunInChildTest, AChildThatDiesIsAnErrorNamingHow) {
  auto outcome = runInChild([](std::atomic<uint64_t>&) -> std::string { std::abort(); }, 0);
  ASSERT_FALSE(outcome);
  EXPECT_NE(outcome.status().message().find("signal " + std::to_string(SIGABRT)), std::string::npos)
      << outcome.status().message();
}

}  // namespace
}  // namespace cepbus::app
