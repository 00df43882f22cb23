#include "services/cluster/stream_checkpoint.h"

#include <gtest/gtest.h>

namespace cepbus::services::cluster {
namespace {

TEST(LeaseToken, CarriesWhereToResumeAndHowFarItsWriterRead) {
  const auto first = parseLeaseToken(leaseTokenBody(LeaseMark{}));
  ASSERT_TRUE(first);
  EXPECT_EQ(first->resume_from, 0u);
  EXPECT_EQ(first->read_to, 0u);
  const auto big = parseLeaseToken(leaseTokenBody(LeaseMark{7, 18446744073709551615u}));
  ASSERT_TRUE(big);
  EXPECT_EQ(big->resume_from, 7u);
  EXPECT_EQ(big->read_to, 18446744073709551615u);
  // Without "read" (a hand-made first token): nothing to count as replayed.
  const auto bare = parseLeaseToken("{\"offset\":12}");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->read_to, 12u);
  EXPECT_EQ(parseLeaseToken("{\"offset\":-1}"), std::nullopt);
  EXPECT_EQ(parseLeaseToken("{\"offset\":\"3\"}"), std::nullopt);
  EXPECT_EQ(parseLeaseToken("{\"offset\":5,\"read\":4}"), std::nullopt);  // read before resume
  EXPECT_EQ(parseLeaseToken("[3]"), std::nullopt);
  EXPECT_EQ(parseLeaseToken("not json"), std::nullopt);
}

TEST(StreamCheckpoint, ResumesFromTheOldestHeldMessage) {
  StreamCheckpoint c(10);
  EXPECT_EQ(c.resumeFrom(), 10u);
  EXPECT_EQ(c.due(), std::nullopt);  // nothing read: the lease is right
  for (uint64_t o = 10; o < 15; ++o) EXPECT_EQ(c.read(o), 0u);
  EXPECT_EQ(c.resumeFrom(), 10u);
  c.done(11);  // out of every window, but 10 still needs replaying
  EXPECT_EQ(c.resumeFrom(), 10u);
  EXPECT_EQ(c.due(), std::nullopt);
  c.done(10);
  EXPECT_EQ(c.resumeFrom(), 12u);
  EXPECT_EQ(c.due(), 12u);
  for (uint64_t o = 12; o < 15; ++o) c.done(o);
  // Nothing held: a successor starts after the last message read.
  EXPECT_EQ(c.resumeFrom(), 15u);
  EXPECT_EQ(c.held(), 0u);
}

TEST(StreamCheckpoint, OneTokenOnItsWayAtATimeAndNeverBackwards) {
  StreamCheckpoint c(0);
  c.read(0);
  c.read(1);
  c.done(0);
  ASSERT_EQ(c.due(), 1u);
  c.sending(1);
  c.done(1);
  EXPECT_EQ(c.due(), std::nullopt);  // the first is still on its way
  c.sent(false);                     // refused: the lease still says 0
  EXPECT_EQ(c.token(), 0u);
  ASSERT_EQ(c.due(), 2u);
  c.sending(2);
  c.sent(true);
  EXPECT_EQ(c.token(), 2u);
  EXPECT_EQ(c.due(), std::nullopt);
  // A late answer for an older offset does not move the lease back.
  c.sending(1);
  c.sent(true);
  EXPECT_EQ(c.token(), 2u);
}

TEST(StreamCheckpoint, CountsWhatRetentionDroppedBeforeTheFirstMessage) {
  StreamCheckpoint c(100);
  EXPECT_EQ(c.read(130), 30u);
  EXPECT_EQ(c.read(132), 0u);  // only the first message can show a gap
  EXPECT_EQ(c.resumeFrom(), 130u);
}

}  // namespace
}  // namespace cepbus::services::cluster
