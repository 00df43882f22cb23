#include "services/cluster/stream_reader_watch.h"

#include <gtest/gtest.h>

namespace cepbus::services::cluster {
namespace {

using std::chrono::seconds;
using Action = StreamReaderWatch::Action;

class StreamReaderWatchTest : public ::testing::Test {
 protected:
  StreamReaderWatch::Time at(int s) const { return start_ + seconds(s); }

  const StreamReaderWatch::Time start_ = StreamReaderWatch::Time() + seconds(1000);
  // Silence 10 s, grace 2 s.
  StreamReaderWatch watch_{seconds(10), seconds(2), start_};
};

TEST_F(StreamReaderWatchTest, AReaderThatReadsIsLeftAlone) {
  for (int s = 1; s <= 60; ++s) {
    watch_.read(at(s));
    EXPECT_EQ(watch_.tick(at(s), 100 + s), Action::kNone) << s;
  }
}

TEST_F(StreamReaderWatchTest, TheFirstSilenceReopensTheNextAlsoProbes) {
  EXPECT_EQ(watch_.tick(at(9), 50), Action::kNone);
  EXPECT_EQ(watch_.tick(at(10), 50), Action::kReopen);
  EXPECT_EQ(watch_.tick(at(19), 50), Action::kNone);
  EXPECT_EQ(watch_.tick(at(20), 50), Action::kReopenAndProbe);
  EXPECT_TRUE(watch_.probing());
}

TEST_F(StreamReaderWatchTest, AnIdleStreamIsProbedOncePerSilenceAndNeverLeft) {
  uint64_t read_to = 50;
  int probes = 0;
  for (int s = 1; s <= 100; ++s) {
    const Action action = watch_.tick(at(s), read_to);
    ASSERT_NE(action, Action::kSwitchBroker) << s;
    if (action == Action::kReopenAndProbe) {
      ++probes;
      // The last chunk starts below what the reader needs next: all read.
      watch_.probed(read_to - 3, at(s));
    }
  }
  EXPECT_EQ(probes, 9);  // at 20, 30, ..., 100
}

TEST_F(StreamReaderWatchTest, ATailPastTheReaderThatItDoesNotReadSwitchesTheBroker) {
  watch_.tick(at(10), 50);
  ASSERT_EQ(watch_.tick(at(20), 50), Action::kReopenAndProbe);
  watch_.probed(80, at(20));                          // the stream holds offsets 50..80 at least
  EXPECT_EQ(watch_.tick(at(21), 50), Action::kNone);  // within the grace
  EXPECT_EQ(watch_.tick(at(22), 50), Action::kSwitchBroker);
}

TEST_F(StreamReaderWatchTest, ATailTheReaderCatchesUpWithinTheGraceIsFine) {
  watch_.tick(at(10), 50);
  ASSERT_EQ(watch_.tick(at(20), 50), Action::kReopenAndProbe);
  watch_.probed(80, at(20));
  watch_.read(at(21));
  EXPECT_EQ(watch_.tick(at(22), 81), Action::kNone);
  EXPECT_EQ(watch_.tick(at(30), 81), Action::kNone);
}

TEST_F(StreamReaderWatchTest, ASilentProbeOnAStreamThatHoldsEventsSwitchesTheBroker) {
  watch_.tick(at(10), 50);
  ASSERT_EQ(watch_.tick(at(20), 50), Action::kReopenAndProbe);
  EXPECT_EQ(watch_.tick(at(29), 50), Action::kNone);
  EXPECT_EQ(watch_.tick(at(30), 50), Action::kSwitchBroker);
}

TEST_F(StreamReaderWatchTest, ASilentProbeOnAStreamNeverReadMayBeAnEmptyStream) {
  watch_.tick(at(10), 0);
  ASSERT_EQ(watch_.tick(at(20), 0), Action::kReopenAndProbe);
  // No answer is what an empty stream gives too: probed again, kept.
  EXPECT_EQ(watch_.tick(at(30), 0), Action::kReopenAndProbe);
  EXPECT_EQ(watch_.tick(at(40), 0), Action::kReopenAndProbe);
}

TEST_F(StreamReaderWatchTest, AReadBetweenSilencesStartsTheCountAgain) {
  EXPECT_EQ(watch_.tick(at(10), 50), Action::kReopen);
  watch_.read(at(15));
  EXPECT_EQ(watch_.tick(at(25), 51), Action::kReopen);
  EXPECT_EQ(watch_.tick(at(35), 51), Action::kReopenAndProbe);
}

}  // namespace
}  // namespace cepbus::services::cluster
