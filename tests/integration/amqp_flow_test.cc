// End-to-end flow control of the AMQP listener with the real `cepbus`: a
// publisher's credit follows the room in the buffer of the subscriber its
// events go to (descriptor: credit-window, subscriber-buffer), through a
// stage of a reliable route like the benchmark's, so that a flood waits at
// the sender instead of overflowing a slow subscriber.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/integration/child_process.h"
#include "tests/testing/amqp_test_client.h"
#include "tests/testing/ports.h"
#include "tests/testing/wait.h"

namespace cepbus {
namespace {

using namespace std::chrono_literals;
using cepbus::testing::canConnect;
using cepbus::testing::freePort;
using cepbus::testing::waitUntil;
using testing::AmqpClientOptions;
using testing::AmqpTestClient;
using testing::ChildProcess;
namespace fs = std::filesystem;

constexpr int kBuffer = 20;  // the descriptor's subscriber-buffer

proton::message tick(int64_t n) {
  proton::message m;
  m.subject("Tick");
  m.properties().put("ts", n);
  return m;
}

// A subscriber that takes only what the test grants it credit for.
class CreditedSubscriber final : public proton::messaging_handler {
 public:
  CreditedSubscriber(int port, std::string address)
      : url_("127.0.0.1:" + std::to_string(port)), address_(std::move(address)), container_(*this) {
    thread_ = std::thread([this] { container_.run(); });
  }
  ~CreditedSubscriber() override {
    // Closed first: a handle still held when the container stops trips
    // Proton's reference count assertion.
    run([this] { connection_.close(); });
    if (!waitFor([&] { return transport_closed_; })) container_.stop();
    thread_.join();
  }
  void grant(int credit) {
    run([this, credit] {
      for (proton::receiver r : connection_.receivers()) r.add_credit(credit);
    });
  }
  bool waitFor(const std::function<bool()>& done) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, testing::kAmqpWait, done);
  }
  std::vector<int64_t> received() {
    std::lock_guard lock(mu_);
    return received_;
  }
  bool open() {
    return waitFor([&] { return open_; });
  }

 private:
  void run(std::function<void()> fn) {
    std::lock_guard lock(mu_);
    if (queue_ != nullptr) queue_->add(std::move(fn));
  }
  template <typename F>
  void bump(F f) {
    {
      std::lock_guard lock(mu_);
      f();
    }
    cv_.notify_all();
  }
  void on_container_start(proton::container& c) override {
    c.connect(url_, proton::connection_options().sasl_allowed_mechs("ANONYMOUS"));
  }
  void on_connection_open(proton::connection& c) override {
    connection_ = c;
    c.open_receiver(address_, proton::receiver_options().credit_window(0));
    bump([&] { queue_ = &c.work_queue(); });
  }
  void on_receiver_open(proton::receiver&) override {
    bump([&] { open_ = true; });
  }
  void on_message(proton::delivery&, proton::message& m) override {
    const int64_t ts = proton::get<int64_t>(m.properties().get("ts"));
    bump([&] { received_.push_back(ts); });
  }
  void on_transport_close(proton::transport&) override {
    connection_ = proton::connection();
    bump([&] {
      queue_ = nullptr;
      transport_closed_ = true;
    });
  }

  const std::string url_;
  const std::string address_;
  std::mutex mu_;
  std::condition_variable cv_;
  proton::work_queue* queue_ = nullptr;  // guarded by mu_
  bool open_ = false;                    // guarded by mu_
  bool transport_closed_ = false;        // guarded by mu_
  std::vector<int64_t> received_;        // guarded by mu_: the ts of each message
  proton::connection connection_;        // container thread only
  proton::container container_;
  std::thread thread_;
};

// One bus for the suite: "feed.#" on a reliable route through one
// single-threaded stage (ordered), small subscriber buffers and credit.
class AmqpFlowTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::random_device rd;
    dir_ = new fs::path(fs::temp_directory_path() / ("cepbus-amqp-flow-" + std::to_string(rd())));
    fs::create_directories(*dir_);
    port_ = freePort();
    std::ofstream(*dir_ / "bus.xml") << R"(<cepbus name="flow">
  <logging level="warning"/>
  <journal path="journal.db"/>
  <listeners><amqp host="127.0.0.1" port=")" +
                                            std::to_string(port_) +
                                            R"(" allow-anonymous="true"
    credit-window="8" subscriber-buffer=")" +
                                            std::to_string(kBuffer) +
                                            R"(" subscriber-stall-timeout="600000"/></listeners>
  <stages><stage name="dispatch" capacity="8192" min-threads="1" max-threads="1"/></stages>
  <routes default-flow="st"><route address="feed.#" flow="reliable" stage="dispatch"/></routes>
</cepbus>
)";
    bus_ = new ChildProcess({CEPBUS_BINARY, "run", "bus.xml"}, *dir_);
    ASSERT_TRUE(bus_->started());
    for (int i = 0; i < 2000 && !canConnect(port_); ++i) std::this_thread::sleep_for(10ms);
    ASSERT_TRUE(canConnect(port_)) << bus_->err();
  }
  static void TearDownTestSuite() {
    if (bus_ != nullptr) {
      bus_->signal(SIGTERM);
      EXPECT_EQ(bus_->wait(std::chrono::seconds(30)), 0) << bus_->err();
      delete bus_;
    }
    fs::remove_all(*dir_);
    delete dir_;
  }
  static AmqpClientOptions client() {
    AmqpClientOptions o;
    o.port = port_;
    return o;
  }
  // Grants the subscriber credit a few at a time until it has `total`.
  static void takeSlowly(CreditedSubscriber& subscriber, int total) {
    for (int granted = 0; granted < total;) {
      subscriber.grant(7);
      granted += 7;
      const size_t expected = static_cast<size_t>(std::min(granted, total));
      ASSERT_TRUE(waitUntil([&] { return subscriber.received().size() >= expected; }))
          << "stuck at " << subscriber.received().size() << " of " << expected;
    }
  }

  static fs::path* dir_;
  static ChildProcess* bus_;
  static int port_;
};

fs::path* AmqpFlowTest::dir_ = nullptr;
ChildProcess* AmqpFlowTest::bus_ = nullptr;
int AmqpFlowTest::port_ = 0;

// Pre-settled: nothing acknowledges them, so only credit keeps the flood
// from overflowing the 20-event buffer of a subscriber that takes 7 at a
// time. Every message arrives, in order.
TEST_F(AmqpFlowTest, APresettledFloodToASlowSubscriberLosesNothing) {
  constexpr int kN = 400;
  CreditedSubscriber slow(port_, "feed.a");
  ASSERT_TRUE(slow.open());
  AmqpTestClient publisher(client());
  ASSERT_TRUE(publisher.waitOpen());
  std::vector<proton::message> messages;
  for (int n = 1; n <= kN; ++n) messages.push_back(tick(n));
  publisher.publish("feed.a", messages, /*presettled=*/true);
  takeSlowly(slow, kN);
  const std::vector<int64_t> received = slow.received();
  ASSERT_EQ(received.size(), static_cast<size_t>(kN));
  for (int i = 0; i < kN; ++i) EXPECT_EQ(received[i], i + 1);
}

// Unsettled: a message is accepted once journaled, and the publisher gets
// credit only for what fits in the subscriber's buffer (the descriptor's
// subscriber-buffer): with nothing taken, exactly that many are accepted and
// the rest wait at the sender; then everything arrives once, in order.
TEST_F(AmqpFlowTest, CreditStopsAtTheSubscriberBufferFromTheDescriptor) {
  constexpr int kN = 100;
  CreditedSubscriber slow(port_, "feed.b");
  ASSERT_TRUE(slow.open());
  AmqpTestClient publisher(client());
  ASSERT_TRUE(publisher.waitOpen());
  std::vector<proton::message> messages;
  for (int n = 1; n <= kN; ++n) messages.push_back(tick(n));
  publisher.publish("feed.b", messages);
  ASSERT_TRUE(publisher.waitFor([&] { return publisher.accepted == kBuffer; }));
  std::this_thread::sleep_for(200ms);  // room for credit that must not come
  EXPECT_EQ(publisher.read<size_t>([&] { return publisher.accepted; }), size_t{kBuffer});
  EXPECT_EQ(publisher.read<size_t>([&] { return publisher.released + publisher.rejected; }), 0u);
  takeSlowly(slow, kN);
  const std::vector<int64_t> received = slow.received();
  ASSERT_EQ(received.size(), static_cast<size_t>(kN));
  for (int i = 0; i < kN; ++i) EXPECT_EQ(received[i], i + 1);
  ASSERT_TRUE(publisher.waitFor([&] { return publisher.accepted == kN; }));
}

}  // namespace
}  // namespace cepbus
