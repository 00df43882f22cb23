#include "services/cluster/stream_checkpoint.h"

#include <gtest/gtest.h>

namespace cepbus::services::cluster {
namespace {

TEST(LeaseToken, CarriesAnOffset) {
  EXPECT_EQ(leaseTokenOffset(leaseTokenBody(0)), 0u);
  EXPECT_EQ(leaseTokenOffset(leaseTokenBody(18446744073709551615u)), 18446744073709551615u);
  EXPECT_EQ(leaseTokenOffset("{\"offset\":-1}"), std::nullopt);
  EXPECT_EQ(leaseTokenOffset("{\"offset\":\"3\"}"), std::nullopt);
  EXPECT_EQ(leaseTokenOffset("[3]"), std::nullopt);
  EXPECT_EQ(leaseTokenOffset("not json"), std::nullopt);
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
