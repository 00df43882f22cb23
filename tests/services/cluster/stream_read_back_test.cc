#include "services/cluster/stream_read_back.h"

#include <gtest/gtest.h>

#include <chrono>

namespace cepbus::services::cluster {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using WallTime = StreamReadBack::WallTime;

const WallTime kT0 = WallTime() + seconds(1'800'000'000);

std::vector<size_t> missingMessages(const StreamReadBack::Outcome& outcome) {
  std::vector<size_t> out;
  for (const StreamReadBack::Missing& m : outcome.missing) out.push_back(m.message);
  return out;
}

TEST(StreamReadBackTest, MessageIdsCarryTheRunAndThePlanIndex) {
  StreamReadBack a(0x1234), b(0x5678);
  EXPECT_EQ(a.messageId(7), "cepbus:0000000000001234:7");
  a.sent(7, 0, kT0);
  b.sent(7, 0, kT0);
  a.beginRound(milliseconds(0));
  // Another run's message 7, and ids that only look alike, are not ours.
  EXPECT_FALSE(a.read(0, b.messageId(7)));
  EXPECT_FALSE(a.read(0, a.messageId(7) + "0"));
  EXPECT_FALSE(a.read(0, "cepbus:0000000000001234:"));
  EXPECT_FALSE(a.read(0, ""));
  EXPECT_TRUE(a.read(0, a.messageId(7)));
}

TEST(StreamReadBackTest, EachPartitionIsReadFromItsFirstUnconfirmedMessageLessTheSkew) {
  StreamReadBack r(1);
  r.sent(0, 1, kT0 + seconds(5));
  r.sent(1, 0, kT0 + seconds(3));
  r.sent(2, 1, kT0 + seconds(2));
  r.sent(0, 1, kT0 + seconds(9));  // sent again: the first time stays
  const auto reads = r.beginRound(milliseconds(1500));
  ASSERT_EQ(reads.size(), 2u);
  EXPECT_EQ(reads[0].partition, 0u);
  EXPECT_EQ(reads[0].from, kT0 + milliseconds(1500));
  EXPECT_EQ(reads[1].partition, 1u);
  EXPECT_EQ(reads[1].from, kT0 + milliseconds(500));
}

TEST(StreamReadBackTest, AReadIsCompleteOnceEveryMessageOfThePartitionWasSeen) {
  StreamReadBack r(1);
  for (size_t i = 0; i < 4; ++i) r.sent(i, static_cast<uint32_t>(i % 2), kT0);
  r.beginRound(milliseconds(0));
  EXPECT_FALSE(r.read(0, r.messageId(0)));
  EXPECT_FALSE(r.read(0, r.messageId(0)));  // a duplicate in the stream counts once
  EXPECT_FALSE(r.read(0, r.messageId(1)));  // partition 1's message, found in 0's stream
  EXPECT_TRUE(r.read(0, r.messageId(2)));
  EXPECT_FALSE(r.read(1, r.messageId(1)));
  const StreamReadBack::Outcome outcome = r.endRound();
  EXPECT_EQ(outcome.confirmed, 3u);
  EXPECT_EQ(missingMessages(outcome), std::vector<size_t>{3});
  EXPECT_FALSE(r.pending());
}

TEST(StreamReadBackTest, MissingMessagesComeInPlanOrderAndSayWhetherTheBrokerAcceptedThem) {
  StreamReadBack r(9);
  for (size_t i = 0; i < 6; ++i) r.sent(i, 0, kT0 + milliseconds(i));
  for (size_t i = 0; i < 4; ++i) r.accepted(i);  // 4 and 5 were in doubt
  r.beginRound(milliseconds(0));
  r.read(0, r.messageId(0));
  r.read(0, r.messageId(1));
  r.read(0, r.messageId(4));
  const StreamReadBack::Outcome outcome = r.endRound();
  ASSERT_EQ(outcome.missing.size(), 3u);
  EXPECT_EQ(missingMessages(outcome), (std::vector<size_t>{2, 3, 5}));
  EXPECT_TRUE(outcome.missing[0].accepted);
  EXPECT_TRUE(outcome.missing[1].accepted);
  EXPECT_FALSE(outcome.missing[2].accepted);
  EXPECT_EQ(outcome.confirmed, 3u);
}

// A round cut short by a failed connection starts over: what it had seen
// is looked for again (the next broker may hold another log).
TEST(StreamReadBackTest, ANewRoundForgetsWhatAnUnfinishedOneHadSeen) {
  StreamReadBack r(2);
  r.sent(0, 0, kT0);
  r.sent(1, 0, kT0);
  r.beginRound(milliseconds(0));
  r.read(0, r.messageId(0));
  r.beginRound(milliseconds(0));
  r.read(0, r.messageId(1));
  EXPECT_EQ(missingMessages(r.endRound()), std::vector<size_t>{0});
}

TEST(StreamReadBackTest, MissingMessagesArePendingAgainOnceResent) {
  StreamReadBack r(3);
  r.sent(0, 0, kT0);
  r.beginRound(milliseconds(0));
  ASSERT_EQ(missingMessages(r.endRound()), std::vector<size_t>{0});
  EXPECT_FALSE(r.pending());
  r.sent(0, 0, kT0 + seconds(1));
  EXPECT_TRUE(r.pending());
  const auto reads = r.beginRound(milliseconds(0));
  ASSERT_EQ(reads.size(), 1u);
  EXPECT_EQ(reads[0].from, kT0 + seconds(1));
  EXPECT_TRUE(r.read(0, r.messageId(0)));
  EXPECT_TRUE(r.endRound().missing.empty());
}

// A stream that delivered nothing at all, not even another publish's
// message, while the broker had accepted a message looked for there: the
// round says nothing about that stream.
TEST(StreamReadBackTest, APartitionWhoseStreamDeliveredNothingWhileAMessageWasAcceptedIsSilent) {
  StreamReadBack r(4);
  r.sent(0, 0, kT0);
  r.sent(1, 1, kT0);
  r.sent(2, 2, kT0);
  r.accepted(0);
  r.accepted(1);  // 2 is only in doubt: its stream may rightly be empty
  r.beginRound(milliseconds(0));
  r.read(0, "another publish's message");
  EXPECT_EQ(r.silent(), std::vector<uint32_t>{1});
  r.read(1, r.messageId(1));
  EXPECT_TRUE(r.silent().empty());
}

TEST(StreamReadBackTest, AnAbandonedRoundConfirmsWhatItSawAndKeepsTheRestPending) {
  StreamReadBack r(5);
  for (size_t i = 0; i < 3; ++i) {
    r.sent(i, static_cast<uint32_t>(i), kT0);
    r.accepted(i);
  }
  r.beginRound(milliseconds(0));
  r.read(0, r.messageId(0));
  ASSERT_EQ(r.silent(), (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(r.abandonRound(), 1u);
  EXPECT_TRUE(r.pending());
  // The next round (through another broker) looks for the other two only.
  const auto reads = r.beginRound(milliseconds(0));
  ASSERT_EQ(reads.size(), 2u);
  EXPECT_EQ(reads[0].partition, 1u);
  EXPECT_EQ(r.silent().size(), 2u);
  EXPECT_TRUE(r.read(1, r.messageId(1)));
  const StreamReadBack::Outcome outcome = r.endRound();
  EXPECT_EQ(outcome.confirmed, 1u);
  EXPECT_EQ(missingMessages(outcome), std::vector<size_t>{2});
}

}  // namespace
}  // namespace cepbus::services::cluster
