// End-to-end flow control of the AMQP listener with the real `cepbus`: a
// publisher's credit follows the room in the buffer of the subscriber its
// events go to (descriptor: credit-window, subscriber-buffer), through a
// stage of a reliable route like the benchmark's, so that a flood waits at
// the sender instead of overflowing a slow subscriber.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <proton/message.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/amqp_test_client.h"
#include "tests/testing/bus_process.h"
#include "tests/testing/ports.h"

namespace cepbus {
namespace {

using namespace std::chrono_literals;
using testing::AmqpClientOptions;
using testing::AmqpTestClient;
using testing::BusProcess;
using testing::reservedPort;

constexpr int kBuffer = 20;  // the descriptor's subscriber-buffer

proton::message tick(int64_t n) {
  proton::message m;
  m.subject("Tick");
  m.properties().put("ts", n);
  return m;
}

// One bus for the suite: "feed.#" on a reliable route through one
// single-threaded stage (ordered) that runs inline when idle, as in the
// benchmark, small subscriber buffers and credit.
class AmqpFlowTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bus_ = new BusProcess(CEPBUS_BINARY, "cepbus-amqp-flow");
    port_ = reservedPort();
    const std::string descriptor = R"(<cepbus name="flow">
  <logging level="warning"/>
  <journal path="journal.db"/>
  <listeners><amqp host="127.0.0.1" port=")" +
                                   std::to_string(port_) +
                                   R"(" allow-anonymous="true"
    credit-window="8" subscriber-buffer=")" +
                                   std::to_string(kBuffer) +
                                   R"(" subscriber-stall-timeout="600000"/></listeners>
  <stages><stage name="dispatch" capacity="8192" min-threads="1" max-threads="1"
                 run-inline="when-idle"/></stages>
  <routes default-flow="st"><route address="feed.#" flow="reliable" stage="dispatch"/></routes>
</cepbus>
)";
    ASSERT_TRUE(bus_->start(descriptor, {port_}));
  }
  static void TearDownTestSuite() {
    EXPECT_TRUE(bus_->stop());
    delete bus_;
  }
  static AmqpClientOptions client() {
    AmqpClientOptions o;
    o.port = port_;
    return o;
  }
  // A subscriber to `pattern` that takes only what takeSlowly() grants it.
  static std::unique_ptr<AmqpTestClient> slowSubscriber(const std::string& pattern) {
    auto subscriber = std::make_unique<AmqpTestClient>(client());
    EXPECT_TRUE(subscriber->waitOpen());
    subscriber->subscribe(pattern, pattern, /*durable=*/false, /*credit=*/0);
    EXPECT_TRUE(subscriber->waitFor([&] { return subscriber->links_open[pattern] == 1; }));
    return subscriber;
  }
  // Publishes ticks 1..n to `address` once `publisher` is open.
  static void publishTicks(AmqpTestClient& publisher, const std::string& address, int n,
                           bool presettled) {
    ASSERT_TRUE(publisher.waitOpen());
    std::vector<proton::message> messages;
    for (int i = 1; i <= n; ++i) messages.push_back(tick(i));
    publisher.publish(address, messages, presettled);
  }
  // Grants link `pattern` of `subscriber` credit a few at a time until it has `total`.
  static void takeSlowly(AmqpTestClient& subscriber, const std::string& pattern, int total) {
    for (int granted = 0; granted < total;) {
      subscriber.grant(pattern, 7);
      granted += 7;
      const size_t expected = static_cast<size_t>(std::min(granted, total));
      ASSERT_TRUE(subscriber.waitFor([&] {
        return subscriber.received[pattern].size() >= expected;
      })) << "stuck at "
          << subscriber.receivedTs(pattern).size() << " of " << expected;
    }
  }

  static inline BusProcess* bus_ = nullptr;
  static inline int port_ = 0;
};

// Pre-settled: nothing acknowledges them, so only credit keeps the flood
// from overflowing the 20-event buffer of a subscriber that takes 7 at a
// time. Every message arrives, in order.
TEST_F(AmqpFlowTest, APresettledFloodToASlowSubscriberLosesNothing) {
  constexpr int kN = 400;
  std::unique_ptr<AmqpTestClient> slow = slowSubscriber("feed.a");
  AmqpTestClient publisher(client());
  ASSERT_NO_FATAL_FAILURE(publishTicks(publisher, "feed.a", kN, /*presettled=*/true));
  takeSlowly(*slow, "feed.a", kN);
  const std::vector<Timestamp> received = slow->receivedTs("feed.a");
  ASSERT_EQ(received.size(), static_cast<size_t>(kN));
  for (int i = 0; i < kN; ++i) EXPECT_EQ(received[i], i + 1);
}

// Unsettled: a message is accepted once journaled, and the publisher gets
// credit only for what fits in the subscriber's buffer (the descriptor's
// subscriber-buffer): with nothing taken, exactly that many are accepted and
// the rest wait at the sender; then everything arrives once, in order.
TEST_F(AmqpFlowTest, CreditStopsAtTheSubscriberBufferFromTheDescriptor) {
  constexpr int kN = 100;
  std::unique_ptr<AmqpTestClient> slow = slowSubscriber("feed.b");
  AmqpTestClient publisher(client());
  ASSERT_NO_FATAL_FAILURE(publishTicks(publisher, "feed.b", kN, /*presettled=*/false));
  ASSERT_TRUE(publisher.waitFor([&] { return publisher.accepted == kBuffer; }));
  std::this_thread::sleep_for(200ms);  // room for credit that must not come
  EXPECT_EQ(publisher.read<size_t>([&] { return publisher.accepted; }), size_t{kBuffer});
  EXPECT_EQ(publisher.read<size_t>([&] { return publisher.released + publisher.rejected; }), 0u);
  takeSlowly(*slow, "feed.b", kN);
  const std::vector<Timestamp> received = slow->receivedTs("feed.b");
  ASSERT_EQ(received.size(), static_cast<size_t>(kN));
  for (int i = 0; i < kN; ++i) EXPECT_EQ(received[i], i + 1);
  ASSERT_TRUE(publisher.waitFor([&] { return publisher.accepted == kN; }));
}

}  // namespace
}  // namespace cepbus
