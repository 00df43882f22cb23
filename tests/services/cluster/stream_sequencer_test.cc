#include "services/cluster/stream_sequencer.h"

#include <gtest/gtest.h>

#include <chrono>

#include "services/cluster/stream_read_back.h"

namespace cepbus::services::cluster {
namespace {

using std::chrono::milliseconds;
using Time = StreamSequencer::Time;
using Tag = StreamSequencer::Tag;

const Time kT0 = Time() + std::chrono::hours(1);

// Offers stream offset `offset` carrying place `seq` of run 1, and returns
// what comes out of the sequencer: the offered offset first when it is not
// held, then the released ones.
std::vector<uint64_t> offer(StreamSequencer& s, uint64_t offset, uint64_t seq, Time at = kT0) {
  const StreamSequencer::Offer o = s.offer(offset, Tag{1, seq}, at);
  std::vector<uint64_t> out = o.then;
  if (!o.held) out.insert(out.begin(), offset);
  return out;
}

using Offsets = std::vector<uint64_t>;

TEST(StreamSequencerTest, TagsComeFromThePublishersMessageIdAndSequence) {
  const std::string id = StreamReadBack(0xabcdef).messageId(42);
  const std::optional<Tag> tag = StreamSequencer::tagOf(id, 7);
  ASSERT_TRUE(tag);
  EXPECT_EQ(tag->run, 0xabcdefu);
  EXPECT_EQ(tag->seq, 7u);
  EXPECT_FALSE(StreamSequencer::tagOf(id, std::nullopt));
  EXPECT_FALSE(StreamSequencer::tagOf("order-42", 7));
  EXPECT_FALSE(StreamSequencer::tagOf("cepbus:xyz:42", 7));
  EXPECT_FALSE(StreamSequencer::tagOf("cepbus:0000000000abcdef", 7));
}

TEST(StreamSequencerTest, MessagesInOrderAndUntaggedOnesAreNeverHeld) {
  StreamSequencer s(100, milliseconds(1000));
  EXPECT_EQ(offer(s, 10, 0), Offsets{10});
  EXPECT_EQ(offer(s, 11, 1), Offsets{11});
  const StreamSequencer::Offer untagged = s.offer(12, std::nullopt, kT0);
  EXPECT_FALSE(untagged.held);
  EXPECT_TRUE(untagged.then.empty());
  EXPECT_EQ(offer(s, 13, 2), Offsets{13});
  EXPECT_EQ(s.held(), 0u);
}

// The case seen on RabbitMQ 3.10: place 1 refused, 2 and 3 stored, then 1
// resent by the read-back.
TEST(StreamSequencerTest, AMessageStoredAfterItsSuccessorsComesOutBeforeThem) {
  StreamSequencer s(100, milliseconds(1000));
  EXPECT_EQ(offer(s, 10, 0), Offsets{10});
  EXPECT_EQ(offer(s, 11, 2), Offsets{});
  EXPECT_EQ(offer(s, 12, 3), Offsets{});
  EXPECT_EQ(s.held(), 2u);
  EXPECT_EQ(offer(s, 13, 1), (Offsets{13, 11, 12}));
  EXPECT_EQ(s.held(), 0u);
  EXPECT_EQ(offer(s, 14, 4), Offsets{14});
  EXPECT_EQ(s.gaps(), 0u);
}

TEST(StreamSequencerTest, CopiesComeOutAtOnceOrWithTheMessageTheyCopy) {
  StreamSequencer s(100, milliseconds(1000));
  offer(s, 10, 0);
  offer(s, 11, 1);
  // A copy of a place already passed: the node drops it by event id.
  EXPECT_EQ(offer(s, 12, 0), Offsets{12});
  // Two copies of a held place come out together, in stream order.
  EXPECT_EQ(offer(s, 13, 3), Offsets{});
  EXPECT_EQ(offer(s, 14, 3), Offsets{});
  EXPECT_EQ(offer(s, 15, 2), (Offsets{15, 13, 14}));
  EXPECT_EQ(s.held(), 0u);
}

TEST(StreamSequencerTest, RunsAreSequencedApart) {
  StreamSequencer s(100, milliseconds(1000));
  EXPECT_FALSE(s.offer(10, Tag{1, 0}, kT0).held);
  EXPECT_FALSE(s.offer(11, Tag{2, 5}, kT0).held);  // a run starts where it is first seen
  EXPECT_TRUE(s.offer(12, Tag{1, 2}, kT0).held);
  EXPECT_FALSE(s.offer(13, Tag{2, 6}, kT0).held);  // run 2 is not held up by run 1's gap
  EXPECT_EQ(s.offer(14, Tag{1, 1}, kT0).then, Offsets{12});
}

TEST(StreamSequencerTest, AGapIsGivenUpAfterTheLongestHeldMessageWaitedMaxWait) {
  StreamSequencer s(100, milliseconds(1000));
  offer(s, 10, 0);
  EXPECT_EQ(offer(s, 11, 3, kT0), Offsets{});
  EXPECT_EQ(offer(s, 12, 2, kT0 + milliseconds(500)), Offsets{});
  EXPECT_TRUE(s.expire(kT0 + milliseconds(999)).empty());
  // Place 3 has waited 1 s (place 2, the first held, only 0.5 s).
  EXPECT_EQ(s.expire(kT0 + milliseconds(1000)), (Offsets{12, 11}));
  EXPECT_EQ(s.gaps(), 1u);
  EXPECT_EQ(s.held(), 0u);
  // The run goes on from there; the missing place, if it comes, is late.
  EXPECT_EQ(offer(s, 13, 4), Offsets{13});
  EXPECT_EQ(offer(s, 14, 1), Offsets{14});
}

TEST(StreamSequencerTest, HoldingMoreThanMaxHeldGivesTheFirstGapUp) {
  StreamSequencer s(2, milliseconds(60000));
  offer(s, 10, 0);
  EXPECT_EQ(offer(s, 11, 2), Offsets{});
  EXPECT_EQ(offer(s, 12, 4), Offsets{});
  // A third held message: the gap at 1 is given up, then 3 is still missing.
  EXPECT_EQ(offer(s, 13, 5), Offsets{11});
  EXPECT_EQ(s.gaps(), 1u);
  EXPECT_EQ(s.held(), 2u);
  EXPECT_EQ(offer(s, 14, 3), (Offsets{14, 12, 13}));
}

TEST(StreamSequencerTest, TheOfferedMessageMayComeOutWithTheGapItForcesOpen) {
  StreamSequencer s(1, milliseconds(60000));
  offer(s, 10, 0);
  EXPECT_EQ(offer(s, 11, 3), Offsets{});
  const StreamSequencer::Offer o = s.offer(12, Tag{1, 4}, kT0);
  EXPECT_TRUE(o.held);
  EXPECT_EQ(o.then, (Offsets{11, 12}));
  EXPECT_EQ(s.gaps(), 2u);
}

TEST(StreamSequencerTest, RunsLongQuietAreForgotten) {
  StreamSequencer s(100, milliseconds(1000));
  offer(s, 10, 5);
  s.expire(kT0 + milliseconds(10'000));
  // Forgotten: place 2 starts the run again instead of being a copy.
  const StreamSequencer::Offer o = s.offer(11, Tag{1, 2}, kT0 + milliseconds(10'001));
  EXPECT_FALSE(o.held);
  EXPECT_TRUE(s.offer(12, Tag{1, 4}, kT0 + milliseconds(10'002)).held);
}

}  // namespace
}  // namespace cepbus::services::cluster
