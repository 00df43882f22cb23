// The detector's state under the recent semantics stays bounded on a long
// stream (P1: |Q|, |S| below k per subexpression), while the unrestricted
// semantics without a time bound keeps every pending instance. Compiled
// against the plugin's sources to read the retained state.

#include "plugins/algebra/algebra_detector.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "bus/core/pattern/parser.h"
#include "plugins/algebra/algebra_plan.h"

namespace cepbus::plugins::algebra {
namespace {

class CountingSink : public plugin::MatchSink {
 public:
  void onMatch(const plugin::Match&) override { ++matches; }
  size_t matches = 0;
};

struct StreamRun {
  size_t max_retained = 0;
  size_t matches = 0;
};

StreamRun runStream(const std::string& query, int events) {
  auto q = pattern::parseQuery(query);
  EXPECT_TRUE(q.isOk()) << q.status().message();
  auto plan = compilePlan(*q, plugin::DetectorOptions());
  EXPECT_TRUE(plan.isOk()) << plan.status().message();
  CountingSink sink;
  AlgebraDetector d(*plan, sink);
  std::mt19937 rng(3);
  StreamRun r;
  for (int i = 0; i < events; ++i) {
    const std::string type(1, static_cast<char>('A' + rng() % 6));
    EXPECT_TRUE(d.onEvent(EventBuilder(type).at(i).build()).isOk());
    r.max_retained = std::max(r.max_retained, d.retainedInstances());
  }
  EXPECT_TRUE(d.flush().isOk());
  r.matches = sink.matches;
  return r;
}

TEST(AlgebraDetectorState, RecentStateIsBoundedWithoutATimeBound) {
  const std::string expr = "((A ; B) + (C | D)) ; (((A ; E) ~ (E ; F)) - B) ; (C || C)";
  const StreamRun recent = runStream("PATTERN " + expr + " CONTEXT recent", 50000);
  EXPECT_GT(recent.matches, 100u);
  // 19 subexpressions; each keeps at most a few instances per operand.
  EXPECT_LE(recent.max_retained, 40u);
  // Unrestricted keeps every A for the B that may follow.
  const StreamRun all = runStream("PATTERN A ; B CONTEXT unrestricted", 3000);
  EXPECT_GT(all.max_retained, 300u);
}

TEST(AlgebraDetectorState, PredicateOverIterationKeepsItsRunInsideTheBound) {
  const StreamRun r =
      runStream("PATTERN SEQ(A a, AGG(B+ b[], count(b[]) >= 2), C c) WITHIN 30", 50000);
  EXPECT_GT(r.matches, 100u);
  EXPECT_LE(r.max_retained, 40u);
}

// A tick closes when a later timestamp arrives (or at flush), so every
// event of a timestamp is seen before the instances ending there are chosen.
TEST(AlgebraDetectorState, ReportsATickWhenItClosesAndRejectsOutOfOrderEvents) {
  auto q = pattern::parseQuery("PATTERN A ; B");
  ASSERT_TRUE(q.isOk());
  auto plan = compilePlan(*q, plugin::DetectorOptions());
  ASSERT_TRUE(plan.isOk());
  CountingSink sink;
  AlgebraDetector d(*plan, sink);
  ASSERT_TRUE(d.onEvent(EventBuilder("A").at(1).build()).isOk());
  ASSERT_TRUE(d.onEvent(EventBuilder("B").at(2).build()).isOk());
  EXPECT_EQ(sink.matches, 0u);
  ASSERT_TRUE(d.onEvent(EventBuilder("C").at(3).build()).isOk());
  EXPECT_EQ(sink.matches, 1u);
  ASSERT_TRUE(d.onEvent(EventBuilder("B").at(4).build()).isOk());
  EXPECT_FALSE(d.onEvent(EventBuilder("B").at(2).build()).isOk());
  ASSERT_TRUE(d.flush().isOk());
  EXPECT_EQ(sink.matches, 2u);
}

}  // namespace
}  // namespace cepbus::plugins::algebra
