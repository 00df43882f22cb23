#include "services/amqp/listener/handshake_deadlines.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace cepbus::services::amqp {
namespace {

using std::chrono::milliseconds;
using Seen = HandshakeDeadlines::Seen;

const HandshakeDeadlines::Clock::time_point kT0{};

TEST(HandshakeDeadlinesTest, ASocketIsDueOnceTheTimeoutHasPassedSinceItWasFirstSeen) {
  HandshakeDeadlines d(milliseconds(1000));
  EXPECT_TRUE(d.expired(kT0, {{1, false}}).empty());
  EXPECT_EQ(d.nextDue(), kT0 + milliseconds(1000));
  EXPECT_TRUE(d.expired(kT0 + milliseconds(999), {{1, false}}).empty());
  EXPECT_EQ(d.expired(kT0 + milliseconds(1000), {{1, false}}), std::vector<uint64_t>{1});
  // Its end is under way: not returned again while it is still listed.
  EXPECT_TRUE(d.expired(kT0 + milliseconds(1500), {{1, false}}).empty());
  EXPECT_FALSE(d.nextDue().has_value());
}

TEST(HandshakeDeadlinesTest, EachSocketHasItsOwnDeadline) {
  HandshakeDeadlines d(milliseconds(1000));
  EXPECT_TRUE(d.expired(kT0, {{1, false}}).empty());
  EXPECT_TRUE(d.expired(kT0 + milliseconds(400), {{1, false}, {2, false}}).empty());
  EXPECT_EQ(d.nextDue(), kT0 + milliseconds(1000));
  EXPECT_EQ(d.expired(kT0 + milliseconds(1000), {{1, false}, {2, false}}),
            std::vector<uint64_t>{1});
  EXPECT_EQ(d.nextDue(), kT0 + milliseconds(1400));
  EXPECT_EQ(d.expired(kT0 + milliseconds(1400), {{1, false}, {2, false}}),
            std::vector<uint64_t>{2});
}

TEST(HandshakeDeadlinesTest, AnAuthenticatedSocketIsNeverDue) {
  HandshakeDeadlines d(milliseconds(1000));
  EXPECT_TRUE(d.expired(kT0, {{1, false}, {2, true}}).empty());
  // Authenticated before its deadline: forgotten.
  EXPECT_TRUE(d.expired(kT0 + milliseconds(500), {{1, true}, {2, true}}).empty());
  EXPECT_FALSE(d.nextDue().has_value());
  EXPECT_TRUE(d.expired(kT0 + milliseconds(5000), {{1, true}, {2, true}}).empty());
}

TEST(HandshakeDeadlinesTest, ASocketThatWentIsForgottenAndItsIdMayComeBackAsANewOne) {
  HandshakeDeadlines d(milliseconds(1000));
  EXPECT_TRUE(d.expired(kT0, {{1, false}}).empty());
  EXPECT_TRUE(d.expired(kT0 + milliseconds(600), {}).empty());
  EXPECT_FALSE(d.nextDue().has_value());
  // The same inode, a new socket: its time starts now.
  EXPECT_TRUE(d.expired(kT0 + milliseconds(1200), {{1, false}}).empty());
  EXPECT_EQ(d.nextDue(), kT0 + milliseconds(2200));
}

}  // namespace
}  // namespace cepbus::services::amqp
