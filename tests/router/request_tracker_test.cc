#include "router/request_tracker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

#include "tests/flows/flow_test_util.h"

namespace cepbus::router {
namespace {

using flows::OutcomeKind;
using flows::testing::makeEvent;
using flows::testing::waitUntil;

TEST(RequestTrackerTest, CompletesOnceWithTheReply) {
  RequestTracker tracker;
  tracker.start();
  std::vector<flows::Outcome> got;
  auto id =
      tracker.track(std::chrono::seconds(30), [&](const flows::Outcome& o) { got.push_back(o); });
  ASSERT_TRUE(id.isOk());
  EventPtr answer = makeEvent(9);
  EXPECT_TRUE(tracker.complete(*id, flows::Outcome{OutcomeKind::kReply, {}, {}, answer}));
  EXPECT_FALSE(tracker.complete(*id, flows::Outcome{OutcomeKind::kReply, {}, {}, answer}));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].reply, answer);
  EXPECT_EQ(tracker.pending(), 0u);
  EXPECT_EQ(tracker.lateOutcomes(), 1u);
}

TEST(RequestTrackerTest, TimesOutWithATimeoutOutcome) {
  RequestTracker tracker;
  tracker.start();
  std::atomic<int> kind{-1};
  auto id = tracker.track(std::chrono::milliseconds(1),
                          [&](const flows::Outcome& o) { kind = static_cast<int>(o.kind); });
  ASSERT_TRUE(waitUntil([&] { return kind.load() >= 0; }));
  EXPECT_EQ(kind.load(), static_cast<int>(OutcomeKind::kTimeout));
  EXPECT_EQ(tracker.timeouts(), 1u);
  EXPECT_FALSE(tracker.complete(*id, flows::Outcome{OutcomeKind::kReply, {}, {}, nullptr}));
}

TEST(RequestTrackerTest, OnlyTerminalOutcomesComplete) {
  RequestTracker tracker;
  tracker.start();
  std::vector<OutcomeKind> got;
  auto id = tracker.track(std::chrono::seconds(30),
                          [&](const flows::Outcome& o) { got.push_back(o.kind); });
  flows::Exchange ex;
  ex.event = makeEvent(1);
  ex.correlation_id = *id;
  tracker.onOutcome(ex, flows::Outcome{OutcomeKind::kAccepted, "p", {}, nullptr});
  tracker.onOutcome(ex, flows::Outcome{OutcomeKind::kDegraded, "p", {}, nullptr});
  EXPECT_EQ(tracker.pending(), 1u);
  tracker.onOutcome(ex, flows::Outcome{OutcomeKind::kFault, "p", Status::internal("x"), nullptr});
  EXPECT_EQ(got, std::vector<OutcomeKind>{OutcomeKind::kFault});
}

TEST(RequestTrackerTest, StopFaultsPendingRequestsAndRefusesNewOnes) {
  RequestTracker tracker;
  EXPECT_EQ(tracker.track(std::chrono::seconds(1), [](const flows::Outcome&) {}).status().code(),
            Status::Code::kUnavailable);
  tracker.start();
  Status why;
  ASSERT_TRUE(tracker.track(std::chrono::hours(1), [&](const flows::Outcome& o) { why = o.status; })
                  .isOk());
  tracker.stop();
  tracker.stop();
  EXPECT_EQ(why.code(), Status::Code::kUnavailable);
  EXPECT_EQ(tracker.track(std::chrono::seconds(1), [](const flows::Outcome&) {}).status().code(),
            Status::Code::kUnavailable);
}

TEST(RequestTrackerTest, ConcurrentRequestsEachCompleteExactlyOnce) {
  RequestTracker tracker;
  tracker.start();
  constexpr int kThreads = 4, kEach = 500;
  std::atomic<int> replies{0}, timeouts{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        // Odd requests are answered, even ones time out almost at once.
        const bool answer = i % 2 == 1;
        auto id = tracker.track(answer ? std::chrono::hours(1) : std::chrono::microseconds(50),
                                [&](const flows::Outcome& o) {
                                  (o.kind == OutcomeKind::kReply ? replies : timeouts).fetch_add(1);
                                });
        if (answer) tracker.complete(*id, flows::Outcome{OutcomeKind::kReply, {}, {}, nullptr});
      }
    });
  }
  for (auto& th : threads) th.join();
  // A request leaves pending() before its timeout callback runs, so wait for
  // the callbacks themselves: a lost or doubled outcome shows in the counts.
  ASSERT_TRUE(waitUntil([&] { return replies.load() + timeouts.load() >= kThreads * kEach; }));
  EXPECT_EQ(tracker.pending(), 0u);
  EXPECT_EQ(replies.load(), kThreads * kEach / 2);
  EXPECT_EQ(timeouts.load(), kThreads * kEach / 2);
}

}  // namespace
}  // namespace cepbus::router
