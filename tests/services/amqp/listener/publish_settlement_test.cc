#include "services/amqp/listener/publish_settlement.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace cepbus::services::amqp {
namespace {

flows::SendOutcome outcome(uint32_t targets) {
  flows::SendOutcome out;
  out.targets = targets;
  return out;
}

TEST(PublishVerdictTest, AcceptedAtOnceWhenEveryTargetTookIt) {
  flows::SendOutcome out = outcome(2);
  out.delivered = 1;
  out.queued = 1;
  const PublishVerdict v = PublishVerdict::of(out, /*journaled=*/false);
  EXPECT_FALSE(v.refused);
  EXPECT_EQ(v.commits, 0u);
  EXPECT_FALSE(v.pause);
}

TEST(PublishVerdictTest, NobodySubscribingIsNoRefusal) {
  EXPECT_FALSE(PublishVerdict::of(outcome(0), false).refused);
}

TEST(PublishVerdictTest, ARejectedOrFailedTargetReleasesItAndPausesTheLink) {
  flows::SendOutcome rejected = outcome(2);
  rejected.queued = 1;
  rejected.rejected = 1;
  PublishVerdict v = PublishVerdict::of(rejected, true);
  EXPECT_TRUE(v.refused);
  EXPECT_TRUE(v.pause);

  flows::SendOutcome failed = outcome(1);
  failed.failed = 1;
  EXPECT_TRUE(PublishVerdict::of(failed, false).refused);

  // Refused before any target was reached (e.g. the route is paused).
  flows::SendOutcome unrouted = outcome(0);
  unrouted.status = Status::unavailable("paused");
  EXPECT_TRUE(PublishVerdict::of(unrouted, false).refused);
}

TEST(PublishVerdictTest, OnAJournaledRouteItWaitsForEachJournalingTarget) {
  flows::SendOutcome out = outcome(4);
  out.queued = 3;  // one of them degraded: not journaled for it
  out.degraded = 1;
  out.duplicates = 1;  // journaled already: its commit comes all the same
  const PublishVerdict v = PublishVerdict::of(out, /*journaled=*/true);
  EXPECT_FALSE(v.refused);
  EXPECT_EQ(v.commits, 3u);
  EXPECT_TRUE(v.pause);  // degraded: its stage is congested
  EXPECT_EQ(PublishVerdict::of(out, /*journaled=*/false).commits, 0u);
}

void hear(PublishSettlement& s, flows::OutcomeKind kind, std::string_view target = "t") {
  s.onOutcome(flows::Exchange{}, flows::Outcome{kind, target, Status::ok(), nullptr});
}

TEST(PublishSettlementTest, CollectsTheCongestedTargetsDuringThePublish) {
  PublishSettlement s;
  hear(s, flows::OutcomeKind::kRejected, "a");
  hear(s, flows::OutcomeKind::kAccepted, "b");
  hear(s, flows::OutcomeKind::kDegraded, "c");
  EXPECT_EQ(s.published(), (std::vector<std::string>{"a", "c"}));
  hear(s, flows::OutcomeKind::kRejected, "d");  // a failed commit, not congestion
  EXPECT_TRUE(s.published().empty());
}

TEST(PublishSettlementTest, SettlesOnceEveryCommitIsIn) {
  PublishSettlement s;
  s.published();
  int settled = 0;
  std::optional<bool> accepted;
  s.awaitCommits(2, [&](bool a) {
    ++settled;
    accepted = a;
  });
  hear(s, flows::OutcomeKind::kAccepted);
  EXPECT_EQ(settled, 0);
  hear(s, flows::OutcomeKind::kAccepted);
  EXPECT_EQ(settled, 1);
  EXPECT_EQ(accepted, true);
  hear(s, flows::OutcomeKind::kAccepted);
  EXPECT_EQ(settled, 1);
}

TEST(PublishSettlementTest, CommitsHeardBeforeThePublishReturnedCount) {
  PublishSettlement s;
  hear(s, flows::OutcomeKind::kAccepted);  // acknowledged while it was published
  s.published();
  std::optional<bool> accepted;
  s.awaitCommits(1, [&](bool a) { accepted = a; });
  EXPECT_EQ(accepted, true);  // at once
}

TEST(PublishSettlementTest, AFailedCommitReleasesIt) {
  PublishSettlement s;
  s.published();
  std::optional<bool> accepted;
  s.awaitCommits(2, [&](bool a) { accepted = a; });
  hear(s, flows::OutcomeKind::kAccepted);
  hear(s, flows::OutcomeKind::kRejected);
  EXPECT_EQ(accepted, false);
}

TEST(PublishSettlementTest, RejectionsDuringThePublishAreNotFailedCommits) {
  PublishSettlement s;
  hear(s, flows::OutcomeKind::kRejected, "a");
  s.published();
  std::optional<bool> accepted;
  s.awaitCommits(1, [&](bool a) { accepted = a; });
  EXPECT_FALSE(accepted.has_value());
  hear(s, flows::OutcomeKind::kAccepted);
  EXPECT_EQ(accepted, true);
}

TEST(PublishSettlementTest, SettlesExactlyOnceWhenCommitsRace) {
  constexpr int kThreads = 8;
  for (int round = 0; round < 50; ++round) {
    PublishSettlement s;
    s.published();
    std::atomic<int> settled{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&s] { hear(s, flows::OutcomeKind::kAccepted); });
    }
    s.awaitCommits(kThreads, [&](bool a) {
      EXPECT_TRUE(a);
      settled.fetch_add(1);
    });
    for (auto& t : threads) t.join();
    EXPECT_EQ(settled.load(), 1);
  }
}

}  // namespace
}  // namespace cepbus::services::amqp
