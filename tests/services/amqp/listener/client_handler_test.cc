#include "services/amqp/listener/client_handler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/duration.hpp>
#include <proton/listen_handler.hpp>
#include <proton/listener.hpp>
#include <proton/message.hpp>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "bus/host/descriptor/descriptor.h"
#include "flows/exchange.h"
#include "flows/wake_hold.h"
#include "services/amqp/listener/client_connections.h"
#include "services/amqp/listener/connection_host.h"
#include "services/amqp/listener/request_router.h"
#include "services/protocols/amqp/access_control.h"
#include "services/protocols/amqp/listener_config.h"
#include "services/protocols/amqp/message_mapping.h"
#include "services/protocols/amqp/sasl_plugin.h"
#include "tests/services/amqp/listener/outbox_test_util.h"
#include "tests/testing/amqp_test_client.h"
#include "tests/testing/wait.h"

// ClientHandler driven by real Proton clients, against a FakeHost in place of
// the listener: what the handler asks of its host, and what the client sees
// of the host's answers.

namespace cepbus::services::amqp {
namespace {

using testing::offerBestEffort;

using cepbus::testing::AmqpTestClient;
using cepbus::testing::waitUntil;
using namespace std::chrono_literals;

const Symbol kSender = Symbol::intern("handler-test");

proton::message stockMessage(int64_t ts) {
  proton::message m;
  m.subject("Stock");
  m.properties().put("ts", ts);
  m.properties().put("symbol", std::string("IBM"));
  return m;
}

// An in-out request: a message with reply-to.
proton::message requestMessage() {
  proton::message m = stockMessage(1);
  m.reply_to("answers");
  return m;
}

flows::Exchange stockExchange(int64_t ts) {
  flows::Exchange exchange;
  exchange.event = eventFromMessage(stockMessage(ts)).event;
  exchange.address = Symbol::intern("stocks.ibm");
  return exchange;
}

// The listener's shared part, as a handler sees it: answers chosen by the
// test, calls recorded; sessions are always admitted. Called on the
// container thread, read by the test: what it records is under mu.
class FakeHost final : public ConnectionHost {
 public:
  explicit FakeHost(std::shared_ptr<ListenerCounters> counters) : counters_(std::move(counters)) {}

  void setContainer(proton::container* container) { container_ = container; }

  // ---- chosen by the test (set before the client connects) ----
  std::optional<std::string> refuse_connection;
  std::optional<std::string> refuse_link;
  std::optional<std::string> refuse_request;
  uint64_t max_message_size = 1 << 20;
  bool credit_open = true;
  PublishVerdict verdict;                  // what every publish gets
  Status request_status;                   // what sendRequest() returns
  std::shared_ptr<SubscriberOutbox> full;  // set as the target of every publishing link
  // Set as fed through a relay by every publishing link (FedOutboxes::derived).
  std::shared_ptr<SubscriberOutbox> relayed;

  // A writer every publish wakes through the hold the handler lends it, as
  // a delivery to a subscriber's outbox does (flows/wake_hold.h).
  struct Writer final : flows::WakeHold::Target {
    void wakeHeld() override { held_wakes.fetch_add(1); }
    std::atomic<int> held_wakes{0};  // woken by a flush
  };
  const std::shared_ptr<Writer> writer = std::make_shared<Writer>();

  // ---- recorded ----
  std::mutex mu;
  std::vector<flows::Exchange> published;
  std::set<const flows::WakeHold*> holds;  // lent to the publishes
  int wakes_at_once = 0;                   // the writer's wakes its hold let go at once
  int wakes_held = 0;                      // and those it held for the end of the burst
  std::vector<PublisherAttach> publishers;
  std::vector<uint64_t> publishers_detached;
  std::vector<SubscriberAttach> subscribers;
  std::map<uint64_t, std::shared_ptr<SubscriberOutbox>> outboxes;  // by link
  struct Detached {
    uint64_t link;
    bool detached;
    size_t unsettled;
  };
  std::vector<Detached> subscribers_detached;
  std::vector<std::string> requests;  // reply-to of each request sent
  int waiting = 0;
  int connections_closed = 0;
  std::vector<ClientHandler*> transports_closed;

  template <typename T>
  T read(const std::function<T()>& fn) {
    std::lock_guard lock(mu);
    return fn();
  }

  bool shuttingDown() const override { return false; }
  bool creditOpen() const override { return credit_open; }
  uint64_t newLinkId() override { return ++next_id_; }
  void schedule(std::chrono::milliseconds delay, std::function<void()> fn) override {
    container_->schedule(proton::duration(delay.count()), std::move(fn));
  }

  std::variant<ClientConnection, std::string> admitConnection(const proton::connection& c,
                                                              std::string user) override {
    if (refuse_connection) return *refuse_connection;
    std::lock_guard lock(mu);
    // No names quota (new names meet the process-wide budget only), no
    // user budget of unsettled deliveries.
    ClientConnection client{++next_id_,       std::move(user),
                            c.container_id(), std::make_shared<Waker>(&c.work_queue()),
                            nullptr,          nullptr};
    open_[client.container_id] = client.waker;
    return client;
  }
  SessionAdmission openSession(const proton::session&) override { return {}; }
  void sessionClosed(const proton::session&) override {}
  std::optional<uint64_t> closeConnection(const proton::connection& c) override {
    std::lock_guard lock(mu);
    auto it = open_.find(c.container_id());
    if (it == open_.end()) return std::nullopt;
    it->second->close();
    open_.erase(it);
    return static_cast<uint64_t>(++connections_closed);
  }
  void transportOpened() override {}
  void transportClosed(ClientHandler& handler) override {
    std::lock_guard lock(mu);
    transports_closed.push_back(&handler);
  }

  std::optional<std::string> admitLink(uint64_t) override { return refuse_link; }
  std::string attachPublisher(ClientHandler& owner, const PublisherAttach& attach) override {
    {
      std::lock_guard lock(mu);
      publishers.push_back(attach);
    }
    // As the listener's relink does for the caller's own links: at once.
    FedOutboxes targets;
    if (full) targets.direct.push_back(full);
    if (relayed) targets.derived.push_back(relayed);
    owner.setTargets(attach.link, std::move(targets));
    return {};
  }
  void detachPublisher(ClientHandler&, uint64_t, uint64_t link, const std::string&) override {
    std::lock_guard lock(mu);
    publishers_detached.push_back(link);
  }
  std::variant<Subscription, BrokerSubscriptions::Refusal> subscribe(
      ClientHandler&, const SubscriberAttach& attach) override {
    auto outbox = std::make_shared<SubscriberOutbox>(10, 10, kSender, counters_);
    outbox->bind(attach.wake);
    std::lock_guard lock(mu);
    subscribers.push_back(attach);
    outboxes[attach.link] = outbox;
    return Subscription{"amqp:" + attach.name, attach.pattern, outbox, attach.durable, {}, {}};
  }
  Subscription subscribeReplies(uint64_t link, const std::string&, const std::string&,
                                SubscriberOutbox::Wake wake) override {
    auto outbox = std::make_shared<SubscriberOutbox>(10, 10, kSender, counters_);
    outbox->bind(std::move(wake));
    std::lock_guard lock(mu);
    outboxes[link] = outbox;
    return Subscription{{}, RequestRouter::dynamicAddress(link), outbox, false, {}, {}};
  }
  void detachSubscriber(ClientHandler&, uint64_t, uint64_t link, Subscription subscription,
                        std::vector<OutboxEntry> unsettled, bool detached) override {
    subscription.outbox->unbind();
    std::lock_guard lock(mu);
    subscribers_detached.push_back({link, detached, unsettled.size()});
  }
  void releasePublisher(const std::string&) override {}
  void releaseSubscriber(Subscription, std::vector<OutboxEntry>) override {}

  std::optional<std::string> admitMessage(uint64_t bytes) override {
    if (bytes <= max_message_size) return std::nullopt;
    return "message of " + std::to_string(bytes) + " bytes is too large";
  }
  bool journaled(Symbol) override { return false; }
  PublishVerdict publish(flows::Exchange& exchange, bool, flows::WakeHold& burst) override {
    const bool held = burst.holds(writer);  // on the connection's thread, inside the publish
    std::lock_guard lock(mu);
    published.push_back(exchange);
    holds.insert(&burst);
    ++(held ? wakes_held : wakes_at_once);
    return verdict;
  }
  bool congested(const std::vector<std::string>&) override { return false; }
  void publisherWaits(bool waits) override {
    std::lock_guard lock(mu);
    waiting += waits ? 1 : -1;
  }
  bool publishersWaiting() const override { return false; }

  std::optional<std::string> admitRequest(uint64_t) override { return refuse_request; }
  Status sendRequest(uint64_t, flows::Exchange, std::chrono::nanoseconds, std::shared_ptr<Waker>,
                     std::string reply_to, proton::message_id) override {
    std::lock_guard lock(mu);
    requests.push_back(reply_to);
    return request_status;
  }
  void answer(const std::string&, const proton::message_id&, flows::OutcomeKind, const Status&,
              const EventPtr&) override {}
  std::optional<proton::error_condition> takeProviderReply(const proton::message&) override {
    return std::nullopt;
  }
  void stampProviderRequest(const flows::Exchange&, proton::message&) override {}

 private:
  const std::shared_ptr<ListenerCounters> counters_;
  std::map<std::string, std::shared_ptr<Waker>> open_;  // by container id; guarded by mu
  proton::container* container_ = nullptr;
  std::atomic<uint64_t> next_id_{0};
};

services::amqp::AmqpListenerConfig anonymousListener() {
  services::amqp::AmqpListenerConfig config;
  config.allow_anonymous = true;
  return config;
}

// A container listening on an ephemeral port whose every accepted connection
// gets a ClientHandler on `host`.
class ClientHandlerTest : public ::testing::Test, public proton::listen_handler {
 protected:
  ClientHandlerTest() { installSaslPlugin(); }

  ~ClientHandlerTest() override {
    if (container_) {
      container_->stop();
      thread_.join();
    }
  }

  // Starts listening; the host's answers must be set before.
  int start() {
    options_.credit_window = 5;
    options_.subscriber_stall_timeout = 1h;  // no subscriber is given up on while a test looks
    options_.sender = kSender;
    options_.access = std::make_shared<const AccessControl>(anonymousListener());
    options_.counters = counters_;
    options_.max_unsettled = max_unsettled_;
    container_ = std::make_unique<proton::container>("handler-test");
    host_.setContainer(container_.get());
    container_->listen("127.0.0.1:0", *this);
    thread_ = std::thread([this] { container_->run(1); });
    EXPECT_TRUE(waitUntil([&] { return port_.load() != 0; }));
    return port_.load();
  }

  // A client whose connection is open (or refused).
  std::unique_ptr<AmqpTestClient> client() {
    auto c = std::make_unique<AmqpTestClient>(port_.load(), "client-a");
    EXPECT_TRUE(c->waitOpen());
    return c;
  }

  ClientHandler* handler() {
    std::lock_guard lock(mu_);
    return handlers_.empty() ? nullptr : handlers_.front().get();
  }

  std::shared_ptr<ListenerCounters> counters_ = std::make_shared<ListenerCounters>();
  FakeHost host_{counters_};
  uint64_t max_unsettled_ = 10000;  // the connections' max-unsettled

 private:
  void on_open(proton::listener& l) override { port_.store(l.port()); }
  proton::connection_options on_accept(proton::listener&) override {
    std::lock_guard lock(mu_);
    handlers_.push_back(std::make_unique<ClientHandler>(host_, options_));
    proton::connection_options options;
    options.handler(*handlers_.back()).sasl_enabled(true).max_frame_size(options_.max_frame_size);
    return options;
  }

  ClientHandlerOptions options_;
  std::atomic<int> port_{0};
  std::mutex mu_;
  std::vector<std::unique_ptr<ClientHandler>> handlers_;  // guarded by mu_; outlive the container
  std::unique_ptr<proton::container> container_;
  std::thread thread_;
};

TEST_F(ClientHandlerTest, AConnectionTheHostRefusesIsClosedWithItsReason) {
  host_.refuse_connection = "max-connections=0 reached";
  start();
  auto c = client();
  ASSERT_TRUE(c->waitFor([&] { return c->closed; }));
  c->read<bool>([&] {
    EXPECT_EQ(c->error.name(), kResourceLimitExceeded);
    EXPECT_EQ(c->error.description(), "max-connections=0 reached");
    return true;
  });
}

TEST_F(ClientHandlerTest, APublishGoesToTheHostAndIsAcceptedByItsVerdict) {
  start();
  auto c = client();
  c->publish("stocks.ibm", {stockMessage(7)});
  ASSERT_TRUE(c->waitFor([&] { return c->accepted == 1; }));
  host_.read<bool>([&] {
    EXPECT_EQ(host_.publishers.size(), 1u);
    EXPECT_EQ(host_.publishers[0].address, "stocks.ibm");
    EXPECT_EQ(host_.publishers[0].container_id, "client-a");
    EXPECT_FALSE(host_.publishers[0].replies);
    EXPECT_EQ(host_.published.size(), 1u);
    const flows::Exchange& sent = host_.published.at(0);
    EXPECT_EQ(sent.address.name(), "stocks.ibm");
    EXPECT_EQ(sent.qos, flows::Qos::kReliable);  // unsettled: reliable
    EXPECT_EQ(sent.sender, kSender);
    EXPECT_EQ(sent.event->ts(), 7);
    return true;
  });
  EXPECT_EQ(counters_->published.value(), 1u);
  EXPECT_EQ(counters_->accepted.value(), 1u);
}

TEST_F(ClientHandlerTest, APresettledPublishIsBestEffort) {
  start();
  auto c = client();
  c->publish("stocks.ibm", {stockMessage(1)}, /*presettled=*/true);
  ASSERT_TRUE(
      waitUntil([&] { return host_.read<size_t>([&] { return host_.published.size(); }) == 1; }));
  host_.read<bool>([&] {
    EXPECT_EQ(host_.published[0].qos, flows::Qos::kBestEffort);
    EXPECT_FALSE(host_.published[0].listener);
    return true;
  });
}

// Each publish lends the connection's hold to the deliveries it makes: the
// first wake of a writer in a burst goes at once, the later ones when the
// burst was read.
TEST_F(ClientHandlerTest, PublishesLendTheConnectionsWakeHoldFlushedWhenTheBurstWasRead) {
  start();
  auto c = client();
  std::vector<proton::message> burst;
  for (int i = 0; i < 20; ++i) burst.push_back(stockMessage(i));
  c->publish("stocks.ibm", std::move(burst), /*presettled=*/true);
  ASSERT_TRUE(
      waitUntil([&] { return host_.read<size_t>([&] { return host_.published.size(); }) == 20; }));
  const int held = host_.read<int>([&] {
    EXPECT_EQ(host_.holds.size(), 1u);  // the connection's, for every publish
    EXPECT_GE(host_.wakes_at_once, 1);
    return host_.wakes_held;
  });
  // The client's credit window (5) sends its messages in bursts.
  EXPECT_GT(held, 0);
  EXPECT_TRUE(waitUntil([&] { return host_.writer->held_wakes.load() == held; }));
}

TEST_F(ClientHandlerTest, APublishTheRouterRefusedIsReleased) {
  host_.verdict.refused = true;
  start();
  auto c = client();
  c->publish("stocks.ibm", {stockMessage(1)});
  ASSERT_TRUE(c->waitFor([&] { return c->released == 1; }));
  EXPECT_EQ(c->read<size_t>([&] { return c->accepted; }), 0u);
  EXPECT_EQ(counters_->released.value(), 1u);
}

TEST_F(ClientHandlerTest, AJournaledPublishIsAcceptedOnceItsCommitIsIn) {
  host_.verdict.commits = 1;
  start();
  auto c = client();
  c->publish("stocks.ibm", {stockMessage(1)});
  ASSERT_TRUE(waitUntil([&] { return counters_->awaiting_commit.value() == 1; }));
  EXPECT_EQ(c->read<size_t>([&] { return c->accepted; }), 0u);
  // The journal's commit, from another thread: settled on the connection.
  flows::Exchange sent = host_.read<flows::Exchange>([&] { return host_.published.at(0); });
  ASSERT_NE(sent.listener, nullptr);
  sent.listener->onOutcome(sent, flows::Outcome{flows::OutcomeKind::kAccepted, {}, {}, {}});
  ASSERT_TRUE(c->waitFor([&] { return c->accepted == 1; }));
  EXPECT_EQ(counters_->awaiting_commit.value(), 0);
}

// Unsettled publishes awaiting their commits are held against the
// connection's max-unsettled, and so is the credit of its links: a client
// that sends on credit waits for a commit to make room, and is not refused.
TEST_F(ClientHandlerTest, TheConnectionsCreditStaysWithinWhatMaxUnsettledLeaves) {
  host_.verdict.commits = 1;
  max_unsettled_ = 2;
  start();
  auto c = client();
  c->send("stocks.ibm", {stockMessage(1), stockMessage(2), stockMessage(3)});
  ASSERT_TRUE(waitUntil([&] { return counters_->awaiting_commit.value() == 2; }));
  EXPECT_EQ(host_.read<size_t>([&] { return host_.published.size(); }), 2u);
  EXPECT_EQ(c->read<int>([&] { return c->max_credit["stocks.ibm"]; }), 2);
  flows::Exchange first = host_.read<flows::Exchange>([&] { return host_.published.at(0); });
  ASSERT_NE(first.listener, nullptr);
  first.listener->onOutcome(first, flows::Outcome{flows::OutcomeKind::kAccepted, {}, {}, {}});
  ASSERT_TRUE(
      waitUntil([&] { return host_.read<size_t>([&] { return host_.published.size(); }) == 3; }));
  EXPECT_EQ(c->read<size_t>([&] { return c->rejected; }), 0u);
  EXPECT_EQ(counters_->unsettled_refused.value(), 0u);
}

// A link closing with deliveries awaiting their commits gives them back:
// another link of the connection, held without credit while the budget was
// full, gets credit and publishes.
TEST_F(ClientHandlerTest, ALinkClosingGivesItsUnsettledBackToTheConnectionsOtherLinks) {
  host_.verdict.commits = 1;
  max_unsettled_ = 1;
  start();
  auto c = client();
  c->send("stocks.ibm", {stockMessage(1)});
  ASSERT_TRUE(waitUntil([&] { return counters_->awaiting_commit.value() == 1; }));
  c->send("stocks.sap", {stockMessage(2)});  // no credit: the budget is full
  ASSERT_TRUE(c->waitFor([&] { return c->links_open.size() == 2; }));
  EXPECT_EQ(host_.read<size_t>([&] { return host_.published.size(); }), 1u);
  c->closeSenders("stocks.ibm");
  ASSERT_TRUE(
      waitUntil([&] { return host_.read<size_t>([&] { return host_.published.size(); }) == 2; }));
  EXPECT_EQ(c->read<size_t>([&] { return c->rejected; }), 0u);
}

TEST_F(ClientHandlerTest, AMessageBeyondTheHostsSizeLimitIsRejectedAndNotRouted) {
  host_.max_message_size = 200;
  start();
  auto c = client();
  proton::message big = stockMessage(1);
  big.body(std::string(1000, 'x'));
  c->publish("stocks.ibm", {big, stockMessage(2)});
  ASSERT_TRUE(c->waitFor([&] { return c->rejected == 1 && c->accepted == 1; }));
  c->read<bool>([&] {
    EXPECT_EQ(c->rejections.at(0).name(), kMessageSizeExceeded);
    return true;
  });
  host_.read<bool>([&] {
    EXPECT_EQ(host_.published.size(), 1u);
    EXPECT_EQ(host_.published.at(0).event->ts(), 2);
    return true;
  });
}

TEST_F(ClientHandlerTest, ALinkTheHostRefusesIsClosedWithItsReason) {
  host_.refuse_link = "max-links=0 reached";
  start();
  auto c = client();
  c->subscribe("stocks.*", "sub");
  ASSERT_TRUE(c->waitFor([&] { return c->link_errors.count("sub") == 1; }));
  c->read<bool>([&] {
    EXPECT_EQ(c->link_errors["sub"].name(), kResourceLimitExceeded);
    EXPECT_EQ(c->link_errors["sub"].description(), "max-links=0 reached");
    return true;
  });
  EXPECT_TRUE(host_.read<bool>([&] { return host_.subscribers.empty(); }));
}

TEST_F(ClientHandlerTest, AnAttachedPublisherIsGrantedItsWindow) {
  start();
  auto c = client();
  c->publish("stocks.ibm", {});
  ASSERT_TRUE(waitUntil([&] { return counters_->publish_credit.value() == 5; }));
}

TEST_F(ClientHandlerTest, WhileTheHostClosesCreditAPublisherGetsNone) {
  host_.credit_open = false;
  start();
  auto c = client();
  c->publish("stocks.ibm", {});
  ASSERT_TRUE(c->waitFor([&] { return c->links_open.size() == 1; }));
  // The credit is granted in the same event as the attach, or never.
  ASSERT_TRUE(
      waitUntil([&] { return host_.read<size_t>([&] { return host_.publishers.size(); }) == 1; }));
  EXPECT_EQ(counters_->publish_credit.value(), 0);
}

TEST_F(ClientHandlerTest, APublisherFeedingAFullBufferWaitsForRoom) {
  // A subscriber buffer of 10 already holding 10: no room for this link.
  host_.full = std::make_shared<SubscriberOutbox>(10, 10, kSender, counters_);
  host_.full->bind([](flows::WakeHold*) { return true; });
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(offerBestEffort(*host_.full, stockExchange(i)));
  start();
  auto c = client();
  c->publish("stocks.ibm", {stockMessage(1)});
  ASSERT_TRUE(waitUntil([&] { return host_.read<int>([&] { return host_.waiting; }) == 1; }));
  EXPECT_EQ(counters_->publish_credit.value(), 0);
  EXPECT_EQ(counters_->subscriber_waits.value(), 1u);
  EXPECT_TRUE(host_.read<bool>([&] { return host_.published.empty(); }));
}

TEST_F(ClientHandlerTest, ABufferFedThroughARelayPacesThePublisherButCountsNothingInTransit) {
  host_.relayed = std::make_shared<SubscriberOutbox>(10, 10, kSender, counters_);
  host_.relayed->bind([](flows::WakeHold*) { return true; });
  start();
  auto c = client();
  c->publish("stocks.ibm", {stockMessage(1), stockMessage(2), stockMessage(3)});
  ASSERT_TRUE(
      waitUntil([&] { return host_.read<size_t>([&] { return host_.published.size(); }) == 3; }));
  // A relay may make no event of a message, or several: nothing waits for
  // them in transit (a direct target would count 3).
  EXPECT_EQ(host_.relayed->load(), 0);

  // Once the relay filled the buffer, the publisher waits for room.
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(offerBestEffort(*host_.relayed, stockExchange(i)));
  c->publish("stocks.ibm", {stockMessage(4)});
  ASSERT_TRUE(waitUntil([&] { return host_.read<int>([&] { return host_.waiting; }) == 1; }));
  EXPECT_EQ(counters_->subscriber_waits.value(), 1u);
}

TEST_F(ClientHandlerTest, ASubscriptionSendsWhatItsOutboxTakesAndHearsTheOutcome) {
  start();
  auto c = client();
  c->subscribe("stocks.*", "sub");
  ASSERT_TRUE(
      waitUntil([&] { return host_.read<size_t>([&] { return host_.subscribers.size(); }) == 1; }));
  const SubscriberAttach attach =
      host_.read<SubscriberAttach>([&] { return host_.subscribers[0]; });
  EXPECT_EQ(attach.pattern, "stocks.*");
  EXPECT_EQ(attach.name, "sub");
  EXPECT_EQ(attach.container_id, "client-a");
  EXPECT_FALSE(attach.durable);
  auto outbox =
      host_.read<std::shared_ptr<SubscriberOutbox>>([&] { return host_.outboxes[attach.link]; });
  ASSERT_TRUE(offerBestEffort(*outbox, stockExchange(42)));
  ASSERT_TRUE(c->waitFor([&] { return c->received["sub"].size() == 1; }));
  EXPECT_EQ(c->receivedTs("sub"), std::vector<Timestamp>{42});
  ASSERT_TRUE(waitUntil([&] { return counters_->acknowledged.value() == 1; }));
  EXPECT_EQ(counters_->subscriber_links.value(), 0);  // the host counts them, not the handler

  c->closeReceiver("sub", /*detach=*/false);
  ASSERT_TRUE(waitUntil(
      [&] { return host_.read<size_t>([&] { return host_.subscribers_detached.size(); }) == 1; }));
  host_.read<bool>([&] {
    EXPECT_EQ(host_.subscribers_detached[0].link, attach.link);
    EXPECT_FALSE(host_.subscribers_detached[0].detached);  // closed: a durable one would end
    EXPECT_EQ(host_.subscribers_detached[0].unsettled, 0u);
    return true;
  });
}

TEST_F(ClientHandlerTest, WhatASubscriberLeftUnsettledGoesBackToTheHost) {
  start();
  auto c = client();
  c->subscribe("stocks.*", "sub", /*durable=*/true, /*credit=*/10, /*accept_limit=*/1);
  ASSERT_TRUE(
      waitUntil([&] { return host_.read<size_t>([&] { return host_.subscribers.size(); }) == 1; }));
  const SubscriberAttach attach =
      host_.read<SubscriberAttach>([&] { return host_.subscribers[0]; });
  EXPECT_TRUE(attach.durable);
  auto outbox =
      host_.read<std::shared_ptr<SubscriberOutbox>>([&] { return host_.outboxes[attach.link]; });
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(offerBestEffort(*outbox, stockExchange(i)));
  ASSERT_TRUE(c->waitFor([&] { return c->received["sub"].size() == 3; }));
  ASSERT_TRUE(waitUntil([&] { return counters_->acknowledged.value() == 1; }));
  c->closeReceiver("sub", /*detach=*/true);
  ASSERT_TRUE(waitUntil(
      [&] { return host_.read<size_t>([&] { return host_.subscribers_detached.size(); }) == 1; }));
  host_.read<bool>([&] {
    EXPECT_TRUE(host_.subscribers_detached[0].detached);  // kept, if durable
    EXPECT_EQ(host_.subscribers_detached[0].unsettled, 2u);
    return true;
  });
}

TEST_F(ClientHandlerTest, ARequestTheHostRefusesIsRejectedWithItsReason) {
  host_.refuse_request = "max-pending-requests=0 reached";
  start();
  auto c = client();
  const proton::message m = requestMessage();
  c->publish("quotes", {m});
  ASSERT_TRUE(c->waitFor([&] { return c->rejected == 1; }));
  c->read<bool>([&] {
    EXPECT_EQ(c->rejections.at(0).name(), kResourceLimitExceeded);
    EXPECT_EQ(c->rejections.at(0).description(), "max-pending-requests=0 reached");
    return true;
  });
  EXPECT_TRUE(host_.read<bool>([&] { return host_.requests.empty() && host_.published.empty(); }));
}

TEST_F(ClientHandlerTest, ARequestIsSentThroughTheHostAndSettledByItsAnswer) {
  start();
  auto c = client();
  const proton::message m = requestMessage();
  c->publish("quotes", {m});
  ASSERT_TRUE(c->waitFor([&] { return c->accepted == 1; }));
  host_.request_status = Status::notFound("nobody provides \"quotes\"");
  c->publish("quotes", {m});
  ASSERT_TRUE(c->waitFor([&] { return c->rejected == 1; }));
  c->read<bool>([&] {
    EXPECT_EQ(c->rejections.at(0).name(), kNotFound);
    return true;
  });
  host_.request_status = Status::unavailable("paused");
  c->publish("quotes", {m});
  ASSERT_TRUE(c->waitFor([&] { return c->released == 1; }));
  host_.read<bool>([&] {
    EXPECT_EQ(host_.requests, (std::vector<std::string>{"answers", "answers", "answers"}));
    EXPECT_TRUE(host_.published.empty());  // a request is not a publish
    return true;
  });
  EXPECT_EQ(counters_->requests.value(), 3u);
}

TEST_F(ClientHandlerTest, TheConnectionsEndDetachesItsLinksAndRetiresTheHandler) {
  start();
  auto c = client();
  c->subscribe("stocks.*", "sub");
  c->publish("stocks.ibm", {stockMessage(1)});
  ASSERT_TRUE(c->waitFor([&] { return c->accepted == 1; }));
  ASSERT_TRUE(
      waitUntil([&] { return host_.read<size_t>([&] { return host_.subscribers.size(); }) == 1; }));
  ClientHandler* h = handler();
  ASSERT_NE(h, nullptr);
  EXPECT_FALSE(h->finished());
  c.reset();  // closes the connection
  ASSERT_TRUE(waitUntil([&] { return h->finished(); }));
  host_.read<bool>([&] {
    EXPECT_EQ(host_.transports_closed, std::vector<ClientHandler*>{h});
    EXPECT_EQ(host_.connections_closed, 1);
    EXPECT_EQ(host_.publishers_detached.size(), 1u);
    EXPECT_EQ(host_.subscribers_detached.size(), 1u);
    EXPECT_TRUE(host_.subscribers_detached.at(0).detached);  // a dropped connection only detaches
    return true;
  });
  EXPECT_EQ(counters_->publish_credit.value(), 0);
}

// Proton lets a peer send a session's capacity (twice max-message-size plus
// two frames) divided by the frame size in transfers: the frame is the
// largest power of two up to 64 KiB that lets a session take a credit
// window, and never below AMQP's 512 bytes.
TEST(MaxFrameSizeTest, ASessionTakesACreditWindowOfTransfers) {
  const auto transfers = [](uint64_t max_message_size, uint32_t frame) {
    return (2 * max_message_size + 2 * frame) / frame;
  };
  EXPECT_EQ(maxFrameSize(1 << 20, 100), 16384u);
  EXPECT_GE(transfers(1 << 20, maxFrameSize(1 << 20, 100)), 100u);
  EXPECT_EQ(maxFrameSize(1 << 20, 1000), 2048u);
  EXPECT_GE(transfers(1 << 20, maxFrameSize(1 << 20, 1000)), 1000u);
  EXPECT_EQ(maxFrameSize(64u << 20, 100), 65536u);
  EXPECT_EQ(maxFrameSize(200, 100), 512u);
  EXPECT_EQ(maxFrameSize(1 << 20, 0), 65536u);
}

}  // namespace
}  // namespace cepbus::services::amqp
