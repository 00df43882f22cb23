#include "bus/host/detection/detection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/bus/host/detection/fake_engines.h"

namespace cepbus::detection {
namespace {

using testing::event;
using testing::fakeLoader;
using ::testing::HasSubstr;
using testing::RecordingSink;
using testing::request;
using Seen = RecordingSink::Seen;

// The plan of `requests` (all in one group), or a failed test.
Plan planned(const std::vector<QueryRequest>& requests, PlanOptions options = {}) {
  auto loader = fakeLoader();
  options.one_detector = true;
  auto plan = detection::plan(requests, options, loader);
  EXPECT_TRUE(plan) << plan.status().message();
  if (!plan) throw std::runtime_error(plan.status().message());
  return std::move(plan).value();
}

std::unique_ptr<Detection> detectionOf(DetectionGroup& group, DetectionSink& sink) {
  auto made = Detection::create(group, sink);
  EXPECT_TRUE(made) << made.status().message();
  if (!made) throw std::runtime_error(made.status().message());
  return std::move(made).value();
}

std::vector<EventPtr> events(std::initializer_list<std::pair<const char*, Timestamp>> list) {
  std::vector<EventPtr> out;
  for (const auto& [type, ts] : list) out.push_back(event(type, ts));
  return out;
}

TEST(DetectionTest, EachMembersMatchesGoToItsSinkAndAreCounted) {
  Plan plan = planned({request("ab", "nfa", "PATTERN SEQ(A a, B b)"),
                       request("ac", "nfa", "PATTERN SEQ(A a, C c)")});
  RecordingSink sink;
  auto d = detectionOf(plan.groups[0], sink);
  EXPECT_EQ(d->members(), 2u);
  ASSERT_TRUE(d->onEvents(events({{"A", 1}, {"B", 2}, {"C", 3}, {"A", 4}, {"C", 5}})));
  EXPECT_EQ(sink.seen, (std::vector<Seen>{{0, {1, 2}}, {1, {1, 3}}, {1, {4, 5}}}));
  EXPECT_EQ(d->matches(0), 1u);
  EXPECT_EQ(d->matches(1), 2u);
  EXPECT_EQ(d->matches(7), 0u);
  EXPECT_EQ(d->engine(), "nfa");
  EXPECT_FALSE(d->onTrial());
}

TEST(DetectionTest, AMutedMemberHearsNothingMoreAndTheOthersRunOn) {
  Plan plan = planned({request("ab", "nfa", "PATTERN SEQ(A a, B b)"),
                       request("ab2", "nfa", "PATTERN SEQ(A a, B b)")});
  RecordingSink sink;
  auto d = detectionOf(plan.groups[0], sink);
  ASSERT_TRUE(d->onEvents(events({{"A", 1}, {"B", 2}})));
  d->mute(0);
  ASSERT_TRUE(d->onEvents(events({{"A", 3}, {"B", 4}})));
  EXPECT_EQ(sink.seen, (std::vector<Seen>{{0, {1, 2}}, {1, {1, 2}}, {1, {3, 4}}}));
  EXPECT_EQ(d->matches(0), 1u);
  EXPECT_EQ(d->matches(1), 2u);
}

// max_delay=D: events in timestamp order within D; a later one is late,
// reaches no member, is counted and goes to the sink's onLate() without an
// error; a pause keeps what the delay holds, the end of the stream releases
// it.
TEST(DetectionTest, TheMaxDelayReordersEventsWithinItAndSetsLaterOnesAside) {
  Plan strict = planned({request("a", "nfa", "PATTERN A a")});
  RecordingSink strict_sink;
  auto in_order = detectionOf(strict.groups[0], strict_sink);
  EXPECT_TRUE(in_order->onEvent(event("A", 10)));
  EXPECT_TRUE(in_order->onEvent(event("A", 10)));  // equal ts is in order
  EXPECT_TRUE(in_order->onEvent(event("A", 9)));   // late, no error
  EXPECT_EQ(strict_sink.seen.size(), 2u);
  EXPECT_EQ(strict_sink.late, (std::vector<std::pair<Timestamp, Timestamp>>{{9, 10}}));
  EXPECT_EQ(in_order->stats().late, 1u);
  EXPECT_EQ(in_order->stats().errors, 0u);
  EXPECT_EQ(in_order->stats().watermark, 10);

  Plan plan = planned({request("a", "nfa", "PATTERN A a", {"max_delay=5"})});
  RecordingSink sink;
  auto d = detectionOf(plan.groups[0], sink);
  EXPECT_EQ(d->released(), INT64_MIN);
  EXPECT_EQ(d->stats().watermark, INT64_MIN);
  EXPECT_TRUE(d->onEvent(event("A", 10)));
  EXPECT_TRUE(d->onEvent(event("A", 7)));  // 3 behind: reordered
  EXPECT_TRUE(sink.seen.empty());          // both still held back
  EXPECT_EQ(d->stats().watermark, 5);
  EXPECT_TRUE(d->flushReleased());  // a pause releases nothing
  EXPECT_TRUE(sink.seen.empty());
  EXPECT_TRUE(d->onEvent(event("A", 13)));  // releases ts <= 8
  EXPECT_EQ(sink.seen, (std::vector<Seen>{{0, {7}}}));
  EXPECT_EQ(d->released(), 7);
  EXPECT_FALSE(d->isLate(*event("A", 8)));
  EXPECT_TRUE(d->isLate(*event("A", 7)));
  EXPECT_TRUE(d->onEvent(event("A", 7)));  // 6 behind: late
  EXPECT_TRUE(d->flush());                 // the end: everything held goes
  EXPECT_EQ(sink.seen, (std::vector<Seen>{{0, {7}}, {0, {10}}, {0, {13}}}));
  EXPECT_EQ(sink.late, (std::vector<std::pair<Timestamp, Timestamp>>{{7, 13}}));
  EXPECT_EQ(d->released(), 13);
  const DetectionStats stats = d->stats();
  EXPECT_EQ(stats.consumed, 4u);  // the late one included
  EXPECT_EQ(stats.late, 1u);
  EXPECT_EQ(stats.errors, 0u);
  EXPECT_EQ(stats.watermark, 8);

  // In batches: what a batch makes ready goes on as one; slack=D is the
  // same option. The late A at 1 in the second batch matches nothing.
  Plan batched = planned({request("a", "nfa", "PATTERN SEQ(A a, B b)", {"slack=2"})});
  RecordingSink batch_sink;
  auto b = detectionOf(batched.groups[0], batch_sink);
  ASSERT_TRUE(b->onEvents(events({{"B", 3}, {"A", 1}, {"A", 2}, {"B", 5}, {"A", 4}, {"B", 8}})));
  EXPECT_EQ(batch_sink.seen, (std::vector<Seen>{{0, {1, 3}}, {0, {4, 5}}}));
  ASSERT_TRUE(b->onEvents(events({{"A", 1}, {"B", 9}})));
  EXPECT_EQ(batch_sink.late, (std::vector<std::pair<Timestamp, Timestamp>>{{1, 8}}));
  ASSERT_TRUE(b->flush());
  EXPECT_EQ(batch_sink.seen, (std::vector<Seen>{{0, {1, 3}}, {0, {4, 5}}}));
}

TEST(DetectionTest, MaxDelayAndSlackAreOneOptionGivenOnce) {
  auto loader = fakeLoader();
  PlanOptions options;
  options.one_detector = true;
  const std::vector<QueryRequest> both_requests = {
      request("a", "nfa", "PATTERN A a", {"max_delay=2", "slack=2"})};
  auto both = detection::plan(both_requests, options, loader);
  ASSERT_FALSE(both);
  EXPECT_THAT(both.status().message(), HasSubstr("options max_delay and slack: give one"));
  const std::vector<QueryRequest> bad_requests = {
      request("a", "nfa", "PATTERN A a", {"max_delay=-3"})};
  auto bad = detection::plan(bad_requests, options, loader);
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("option max_delay=-3: expected a non-negative integer"));
  // The engine never sees either: the fake engine refuses options it does not take.
  Plan plan = planned({request("a", "nfa", "PATTERN A a", {"max_delay=4"})});
  EXPECT_EQ(plan.groups[0].recipe.maxDelay(), 4);
}

TEST(DetectionTest, StatsCountEventsErrorsAndWhatTheEngineHolds) {
  Plan plan = planned({request("abc", "nfa", "PATTERN SEQ(A a, B b, C c)", {"fail_type=X"})});
  RecordingSink sink;
  auto d = detectionOf(plan.groups[0], sink);
  ASSERT_TRUE(d->onEvents(events({{"A", 1}, {"B", 2}})));
  DetectionStats s = d->stats();
  EXPECT_EQ(s.consumed, 2u);
  EXPECT_EQ(s.errors, 0u);
  ASSERT_TRUE(s.partial_matches);
  EXPECT_EQ(s.partial_matches->partial_matches, 2u);
  EXPECT_EQ(s.partial_matches->peak_partial_matches, 2u);
  // A batch with a refused event counts one error; the others are detected.
  Status refused = d->onEvents(events({{"X", 3}, {"X", 4}, {"C", 5}}));
  EXPECT_THAT(refused.message(), HasSubstr("fake nfa refuses type X"));
  s = d->stats();
  EXPECT_EQ(s.consumed, 5u);
  EXPECT_EQ(s.errors, 1u);
  EXPECT_EQ(s.partial_matches->partial_matches, 0u);
  EXPECT_EQ(s.partial_matches->peak_partial_matches, 2u);
  EXPECT_EQ(sink.seen, (std::vector<Seen>{{0, {1, 2, 5}}}));
  auto model = d->exportModel("json");
  ASSERT_TRUE(model) << model.status().message();
  EXPECT_EQ(*model, "{\"engine\":\"nfa\"}");
  EXPECT_FALSE(d->exportModel("dot"));
}

// Engine auto's trial runs inside the detection: the sink hears the prior's
// matches, then the kept engine's, none lost or doubled, and the outcome.
TEST(DetectionTest, AutosTrialKeepsOneEngineAndLosesNoMatch) {
  PlanOptions options;
  options.trial_limits.warmup_events = 4;
  options.trial_limits.events = 64;
  options.trial_limits.block_events = 16;
  Plan plan = planned({request("ab", "auto", "PATTERN SEQ(A a, B b)")}, options);
  DetectionGroup& group = plan.groups[0];
  EXPECT_EQ(group.engine, "nfa");
  ASSERT_TRUE(group.recipe.onTrial());
  RecordingSink sink;
  auto d = detectionOf(group, sink);
  ASSERT_TRUE(d->onTrial());
  EXPECT_EQ(d->engine(), "nfa");
  std::vector<Seen> expected;
  for (Timestamp ts = 1; ts <= 400; ts += 2) {
    ASSERT_TRUE(d->onEvents(events({{"A", ts}, {"B", ts + 1}})));
    expected.push_back({0, {ts, ts + 1}});
  }
  ASSERT_TRUE(d->flush());
  EXPECT_EQ(sink.seen, expected);
  const std::optional<plugin::TrialOutcome> outcome = d->trialOutcome();
  ASSERT_TRUE(outcome);
  EXPECT_EQ(sink.decided, std::vector<std::string>{outcome->kept});
  EXPECT_EQ(d->engine(), outcome->kept);
  ASSERT_EQ(outcome->measured.size(), 2u);
  EXPECT_EQ(outcome->measured[0].engine, "nfa");
  EXPECT_EQ(outcome->measured[1].engine, "petri");
  EXPECT_EQ(d->matches(0), expected.size());
}

// The planner's detector serves the first detection; every other one of
// the group (the cluster's partitions) gets a new one, with its own state.
TEST(DetectionTest, EveryDetectionOfAGroupHasItsOwnDetector) {
  Plan plan = planned({request("ab", "petri", "PATTERN SEQ(A a, B b)")});
  DetectionGroup& group = plan.groups[0];
  ASSERT_TRUE(group.made);
  const int before = testing::detectorsMade("petri");
  RecordingSink first_sink;
  auto first = detectionOf(group, first_sink);
  EXPECT_FALSE(group.made);
  EXPECT_EQ(testing::detectorsMade("petri"), before);
  RecordingSink second_sink;
  auto second = detectionOf(group, second_sink);
  EXPECT_EQ(testing::detectorsMade("petri"), before + 1);
  ASSERT_TRUE(first->onEvent(event("A", 1)));
  ASSERT_TRUE(second->onEvent(event("B", 2)));
  ASSERT_TRUE(first->onEvent(event("B", 3)));
  EXPECT_EQ(first_sink.seen, (std::vector<Seen>{{0, {1, 3}}}));
  EXPECT_TRUE(second_sink.seen.empty());
}

// A host that keeps the recipe alone (the cluster node's query, made again
// per partition and per stream) gets a new detector each time, with the
// recipe's engine, members and slack.
TEST(DetectionTest, ADetectionFromARecipeMakesItsOwnDetector) {
  Plan plan = planned({request("ab", "petri", "PATTERN SEQ(A a, B b)", {"slack=2"})});
  const DetectorRecipe& recipe = plan.groups[0].recipe;
  const int before = testing::detectorsMade("petri");
  RecordingSink first_sink, second_sink;
  auto first = Detection::create(recipe, first_sink);
  auto second = Detection::create(recipe, second_sink);
  ASSERT_TRUE(first) << first.status().message();
  ASSERT_TRUE(second) << second.status().message();
  EXPECT_EQ(testing::detectorsMade("petri"), before + 2);
  EXPECT_EQ((*first)->engine(), "petri");
  EXPECT_EQ((*first)->members(), 1u);
  ASSERT_TRUE((*first)->onEvent(event("B", 3)));
  ASSERT_TRUE((*first)->onEvent(event("A", 2)));  // within the slack: reordered
  ASSERT_TRUE((*second)->onEvent(event("A", 1)));
  ASSERT_TRUE((*first)->flush());
  EXPECT_EQ(first_sink.seen, (std::vector<Seen>{{0, {2, 3}}}));
  EXPECT_TRUE(second_sink.seen.empty());
}

}  // namespace
}  // namespace cepbus::detection
