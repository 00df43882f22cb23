// Hostile clients against the AMQP listener's limits (AmqpLimits): each test
// checks the refusal's condition and text, its counter, and that a
// well-behaved client is still served.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <iostream>
#include <memory>
#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/error_condition.hpp>
#include <proton/message.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/session.hpp>
#include <proton/transport.hpp>
#include <string>
#include <thread>
#include <vector>

#include "flows/st_flow.h"
#include "router/broker.h"
#include "router/delivery_policy.h"
#include "router/registry.h"
#include "services/amqp/listener/amqp_listener.h"
#include "services/protocols/amqp/listener_config.h"
#include "services/protocols/amqp/message_mapping.h"
#include "tests/testing/amqp_test_client.h"
#include "tests/testing/peak_rss.h"
#include "tests/testing/ports.h"
#include "tests/testing/wait.h"

namespace cepbus::services::amqp {
namespace {

using namespace std::chrono_literals;
using cepbus::testing::AmqpTestClient;
using cepbus::testing::peakRssKb;
using cepbus::testing::waitUntil;

bool mentions(const proton::error_condition& e, const std::string& text) {
  return e.description().find(text) != std::string::npos;
}

// A client that opens `sessions` sessions on one connection and records
// the conditions of those the listener ends.
class SessionClient final : public proton::messaging_handler {
 public:
  SessionClient(int port, int sessions)
      : url_("127.0.0.1:" + std::to_string(port)), sessions_(sessions), container_(*this) {
    thread_ = std::thread([this] { container_.run(); });
  }
  ~SessionClient() override {
    container_.stop();
    thread_.join();
  }
  std::vector<proton::error_condition> refused() {
    std::lock_guard lock(mu_);
    return refused_;
  }
  int opened() {
    std::lock_guard lock(mu_);
    return opened_;
  }

 private:
  void on_container_start(proton::container& c) override {
    c.connect(url_, proton::connection_options().sasl_allowed_mechs("ANONYMOUS"));
  }
  void on_connection_open(proton::connection& c) override {
    for (int i = 0; i < sessions_; ++i) c.open_session();
  }
  void on_session_open(proton::session&) override {
    std::lock_guard lock(mu_);
    ++opened_;
  }
  void on_session_error(proton::session& s) override {
    std::lock_guard lock(mu_);
    refused_.emplace_back(s.error().name(), s.error().description());
  }
  void on_error(const proton::error_condition&) override {}

  const std::string url_;
  const int sessions_;
  std::mutex mu_;
  std::vector<proton::error_condition> refused_;  // guarded by mu_
  int opened_ = 0;                                // guarded by mu_
  proton::container container_;
  std::thread thread_;
};

// A TCP connection to the listener, reads timing out after 10 s; -1 on failure.
int connectRaw(int port) {
  const int fd = testing::connectLoopback(port);
  const timeval limit{10, 0};
  if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  return fd;
}

// True once the peer closes `fd`, reading (and dropping) whatever comes first.
bool closedByPeer(int fd) {
  char buf[256];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) return true;
    if (n < 0) return false;
  }
}

// Every test runs with one container thread and with several: a
// connection's work must not depend on which thread serves it.
class AmqpListenerLimitsTest : public ::testing::TestWithParam<unsigned> {
 protected:
  AmqpListenerLimitsTest() {
    auto policy = std::make_unique<router::DeliveryPolicy>("st");
    EXPECT_TRUE(policy->addFlow(std::make_unique<flows::StFlow>("st")));
    registry_ = std::make_shared<router::Registry>();
    broker_ = std::make_unique<router::Broker>(std::move(policy), registry_);
    EXPECT_TRUE(broker_->start());
    context_ = std::make_unique<ServiceContext>(ServiceContext{*broker_, *registry_, loader_});
  }
  ~AmqpListenerLimitsTest() override {
    if (service_) service_->stop();
    broker_->stop();
  }

  AmqpListenerService& start(AmqpListenerOptions options) {
    options.threads = GetParam();
    services::amqp::AmqpListenerConfig config;
    config.port = 0;
    config.allow_anonymous = true;
    service_ = std::make_unique<AmqpListenerService>(config, options, *context_);
    Status started = service_->start();
    EXPECT_TRUE(started) << started.toString();
    return *service_;
  }

  // A client that connects, publishes one event and sees it come back.
  void expectServed(int port) {
    AmqpTestClient client(port, "well-behaved");
    ASSERT_TRUE(client.waitOpen());
    ASSERT_FALSE(client.read<bool>([&] { return static_cast<bool>(client.error); }));
    client.subscribe("probe");
    ASSERT_TRUE(client.waitFor([&] { return client.links_open.count("probe") > 0; }));
    proton::message m;
    m.subject("Probe");
    m.properties().put("ts", int64_t{1});
    client.publish("probe", {m});
    EXPECT_TRUE(client.waitFor([&] { return client.received["probe"].size() == 1; }));
  }

  plugin::PluginLoader loader_{std::vector<std::string>{}};
  std::shared_ptr<router::Registry> registry_;
  std::unique_ptr<router::Broker> broker_;
  std::unique_ptr<ServiceContext> context_;
  std::unique_ptr<AmqpListenerService> service_;
};

TEST_P(AmqpListenerLimitsTest, ConnectionsBeyondTheLimitAreRefusedOnOpen) {
  AmqpListenerOptions options;
  options.limits.max_connections = 3;
  AmqpListenerService& service = start(options);
  std::vector<std::unique_ptr<AmqpTestClient>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(std::make_unique<AmqpTestClient>(service.port(), "held-" + std::to_string(i)));
    ASSERT_TRUE(held.back()->waitOpen());
  }
  AmqpTestClient third(service.port(), "third");
  ASSERT_TRUE(third.waitOpen());
  AmqpTestClient refused(service.port(), "refused");
  ASSERT_TRUE(refused.waitFor([&] { return static_cast<bool>(refused.error); }));
  const proton::error_condition why = refused.read<proton::error_condition>(
      [&] { return proton::error_condition(refused.error.name(), refused.error.description()); });
  EXPECT_EQ(why.name(), kResourceLimitExceeded);
  EXPECT_TRUE(mentions(why, "max-connections=3")) << why.description();
  EXPECT_EQ(service.stats().connections_refused, 1u);
  held.pop_back();  // room for one again
  ASSERT_TRUE(waitUntil([&] { return service.stats().connections == 3; }));
  // The closing connection's transport may still be going away.
  ASSERT_TRUE(waitUntil([&] {
    AmqpTestClient probe(service.port(), "probe-open");
    return probe.waitOpen() && !probe.read<bool>([&] { return static_cast<bool>(probe.error); });
  }));
}

TEST_P(AmqpListenerLimitsTest, LinksBeyondTheLimitAreDetachedAndTheConnectionStaysUp) {
  AmqpListenerOptions options;
  options.limits.max_links = 3;
  AmqpListenerService& service = start(options);
  AmqpTestClient client(service.port(), "many-links");
  ASSERT_TRUE(client.waitOpen());
  for (int i = 0; i < 2000; ++i) client.subscribe("topic." + std::to_string(i));
  ASSERT_TRUE(client.waitFor([&] { return client.link_errors.size() == 1997; }));
  client.read<bool>([&] {
    for (const auto& [name, e] : client.link_errors) {
      EXPECT_EQ(e.name(), kResourceLimitExceeded) << name;
      EXPECT_TRUE(mentions(e, "too many links on this connection: max-links=3")) << name;
    }
    return true;
  });
  EXPECT_EQ(service.stats().links_refused, 1997u);
  EXPECT_EQ(service.stats().subscriber_links, 3u);
  // Client and listener in one process: an upper bound of what the
  // listener held.
  std::cout << "{\"hostile_client\":\"2000 links on one connection\",\"peak_rss_kb\":"
            << peakRssKb() << "}\n";
  // A link closing makes room on the same connection.
  client.closeReceiver("topic.0", false);
  ASSERT_TRUE(waitUntil([&] { return service.stats().subscriber_links == 2; }));
  client.subscribe("topic.again");
  EXPECT_TRUE(client.waitFor([&] { return client.links_open.count("topic.again") > 0; }));
  EXPECT_EQ(service.stats().links_refused, 1997u);
  expectServed(service.port());
}

TEST_P(AmqpListenerLimitsTest, SessionsBeyondTheLimitAreEnded) {
  AmqpListenerOptions options;
  options.limits.max_sessions = 4;
  AmqpListenerService& service = start(options);
  SessionClient client(service.port(), 50);
  ASSERT_TRUE(waitUntil([&] { return client.refused().size() == 46; }));
  for (const proton::error_condition& e : client.refused()) {
    EXPECT_EQ(e.name(), kResourceLimitExceeded);
    EXPECT_TRUE(mentions(e, "max-sessions=4")) << e.description();
  }
  EXPECT_EQ(service.stats().sessions_refused, 46u);
  expectServed(service.port());
}

TEST_P(AmqpListenerLimitsTest, DurableSubscriptionsAreBoundedPerContainerEvenWhileAway) {
  AmqpListenerOptions options;
  options.limits.max_durable = 2;
  AmqpListenerService& service = start(options);
  {
    AmqpTestClient client(service.port(), "hoarder");
    ASSERT_TRUE(client.waitOpen());
    client.subscribe("a", "d0", true);
    client.subscribe("a", "d1", true);
    ASSERT_TRUE(client.waitFor([&] { return client.links_open.size() == 2; }));
    client.subscribe("a", "d2", true);
    ASSERT_TRUE(client.waitFor([&] { return client.link_errors.count("d2") > 0; }));
    const proton::error_condition e =
        client.read<proton::error_condition>([&] { return client.link_errors["d2"]; });
    EXPECT_EQ(e.name(), kResourceLimitExceeded);
    EXPECT_TRUE(mentions(e, "max-durable=2")) << e.description();
    // A plain subscription is not durable: not counted.
    client.subscribe("a", "plain");
    EXPECT_TRUE(client.waitFor([&] { return client.links_open.count("plain") > 0; }));
  }
  // Away, both are still held; the same container id is still at its limit.
  ASSERT_TRUE(waitUntil([&] { return service.stats().parked_subscriptions == 2; }));
  {
    AmqpTestClient back(service.port(), "hoarder");
    ASSERT_TRUE(back.waitOpen());
    back.subscribe("a", "d3", true);
    ASSERT_TRUE(back.waitFor([&] { return back.link_errors.count("d3") > 0; }));
  }
  EXPECT_EQ(service.stats().durable_refused, 2u);
  // Coming back to one is no new subscription; closing one ends it.
  AmqpTestClient again(service.port(), "hoarder");
  ASSERT_TRUE(again.waitOpen());
  again.subscribe("a", "d0", true);
  ASSERT_TRUE(again.waitFor([&] { return again.links_open.count("d0") > 0; }));
  again.closeReceiver("d0", false);
  // d1 (away) is all that is still subscribed.
  ASSERT_TRUE(waitUntil([&] { return broker_->subscriptionCount() == 1; }));
  again.subscribe("a", "d4", true);
  EXPECT_TRUE(again.waitFor([&] { return again.links_open.count("d4") > 0; }));
  EXPECT_EQ(service.stats().durable_refused, 2u);
  // Another container has its own count.
  AmqpTestClient other(service.port(), "other");
  ASSERT_TRUE(other.waitOpen());
  other.subscribe("a", "d0", true);
  EXPECT_TRUE(other.waitFor([&] { return other.links_open.count("d0") > 0; }));
}

TEST_P(AmqpListenerLimitsTest, RequestsBeyondThePendingLimitAreRejectedUntilAnswered) {
  AmqpListenerOptions options;
  options.limits.max_pending_requests = 2;
  options.request_timeout = 300ms;
  AmqpListenerService& service = start(options);
  AmqpTestClient provider(service.port(), "silent-provider");  // takes requests, never answers
  ASSERT_TRUE(provider.waitOpen());
  provider.receive("svc", "svc");
  ASSERT_TRUE(provider.waitFor([&] { return provider.links_open.count("svc") > 0; }));
  AmqpTestClient requester(service.port(), "requester");
  ASSERT_TRUE(requester.waitOpen());
  requester.receive("replies", "");
  ASSERT_TRUE(requester.waitFor([&] { return !requester.addresses["replies"].empty(); }));
  const std::string reply_to = requester.replyAddress("replies");
  auto request = [&](int64_t ts) {
    proton::message m;
    m.subject("Ask");
    m.properties().put("ts", ts);
    m.reply_to(reply_to);
    m.correlation_id(proton::message_id(static_cast<uint64_t>(ts)));
    return m;
  };
  requester.send("svc", {request(1), request(2), request(3)});
  ASSERT_TRUE(requester.waitFor([&] { return requester.accepted + requester.rejected == 3; }));
  EXPECT_EQ(requester.read<size_t>([&] { return requester.accepted; }), 2u);
  const proton::error_condition e =
      requester.read<proton::error_condition>([&] { return requester.rejections.at(0); });
  EXPECT_EQ(e.name(), kResourceLimitExceeded);
  EXPECT_TRUE(mentions(e, "max-pending-requests=2")) << e.description();
  EXPECT_EQ(service.stats().requests_refused, 1u);
  // Once the two time out (their faults come back), there is room again.
  ASSERT_TRUE(requester.waitFor([&] { return requester.received["replies"].size() == 2; }));
  requester.send("svc", {request(4)});
  EXPECT_TRUE(requester.waitFor([&] { return requester.accepted == 3; }));
  EXPECT_EQ(service.stats().requests_refused, 1u);
}

// A message whose encoded size is at least `bytes`.
proton::message sized(int64_t ts, size_t bytes) {
  proton::message m;
  m.subject("Blob");
  m.properties().put("ts", ts);
  m.properties().put("blob", std::string(bytes, 'x'));
  return m;
}

// The client sends a message beyond max-message-size, then a normal one on
// the same link: the first is rejected with the limit, the second accepted.
void expectTooLargeRefused(AmqpListenerService& service, size_t limit, size_t bytes) {
  AmqpTestClient client(service.port(), "too-large");
  ASSERT_TRUE(client.waitOpen());
  client.send("blobs", {sized(1, bytes)});
  ASSERT_TRUE(client.waitFor([&] { return client.rejected == 1; }));
  const proton::error_condition e =
      client.read<proton::error_condition>([&] { return client.rejections.at(0); });
  EXPECT_EQ(e.name(), kMessageSizeExceeded);
  EXPECT_TRUE(mentions(e, "bytes exceeds max-message-size=" + std::to_string(limit)))
      << e.description();
  EXPECT_EQ(service.stats().messages_too_large, 1u);
  // The limit was announced on attach.
  client.read<bool>([&] {
    EXPECT_EQ(client.max_message_sizes.size(), 1u);
    for (const auto& [name, announced] : client.max_message_sizes) EXPECT_EQ(announced, limit);
    return true;
  });
  client.send("blobs", {sized(2, 10)});
  ASSERT_TRUE(client.waitFor([&] { return client.accepted == 1; }));
  EXPECT_FALSE(client.read<bool>([&] { return static_cast<bool>(client.error); }));
  EXPECT_TRUE(client.read<bool>([&] { return client.link_errors.empty(); }));
  EXPECT_EQ(service.stats().messages_too_large, 1u);
}

TEST_P(AmqpListenerLimitsTest, MessagesBeyondTheDefaultSizeAreRejectedAndTheLinkStaysUp) {
  AmqpListenerService& service = start(AmqpListenerOptions{});
  AmqpTestClient watcher(service.port(), "watcher");
  ASSERT_TRUE(watcher.waitOpen());
  watcher.subscribe("blobs");
  ASSERT_TRUE(watcher.waitFor([&] { return watcher.links_open.count("blobs") > 0; }));
  // Up to twice the limit a message fits in its session whole (the listener
  // refuses more only part-way: the next test).
  expectTooLargeRefused(service, 1048576, 3 * 1048576 / 2);
  // Only the normal message was published.
  ASSERT_TRUE(watcher.waitFor([&] { return watcher.received["blobs"].size() == 1; }));
  EXPECT_EQ(watcher.receivedTs("blobs"), std::vector<Timestamp>{2});
  std::cout << "{\"hostile_client\":\"a 1.5 MiB message\",\"peak_rss_kb\":" << peakRssKb() << "}\n";
  expectServed(service.port());
}

// A message many times the limit is never held whole: the session's window
// stalls it part-way, and its link is closed; the connection stays up.
TEST_P(AmqpListenerLimitsTest, AMessageFarBeyondTheLimitEndsItsLinkBeforeItArrivesWhole) {
  constexpr size_t kMessage = 16 * 1048576;
  AmqpListenerOptions options;
  options.limits.max_message_size = 200;
  AmqpListenerService& service = start(options);
  const uint64_t rss_before = peakRssKb();
  AmqpTestClient client(service.port(), "far-too-large");
  ASSERT_TRUE(client.waitOpen());
  client.send("blobs", {sized(1, kMessage)});
  ASSERT_TRUE(client.waitFor([&] { return !client.link_errors.empty(); }, 30s));
  const proton::error_condition e =
      client.read<proton::error_condition>([&] { return client.link_errors.begin()->second; });
  EXPECT_EQ(e.name(), kMessageSizeExceeded);
  EXPECT_TRUE(mentions(e, "exceeds max-message-size=200 (it had not arrived whole"))
      << e.description();
  EXPECT_EQ(service.stats().messages_too_large, 1u);
  EXPECT_EQ(client.read<size_t>([&] { return client.rejected + client.accepted; }), 0u);
  // The process holds the client's copy too; hostile_clients_test measures
  // the real bus alone.
  std::cout << "{\"hostile_client\":\"a 16 MiB message against max-message-size=200\","
            << "\"peak_rss_kb_before\":" << rss_before << ",\"peak_rss_kb\":" << peakRssKb()
            << "}\n";
  expectServed(service.port());
}

TEST_P(AmqpListenerLimitsTest, MessagesBeyondASmallSizeLimitAreRejected) {
  AmqpListenerOptions options;
  options.limits.max_message_size = 200;
  AmqpListenerService& service = start(options);
  expectTooLargeRefused(service, 200, 300);
  expectServed(service.port());
}

// Within a burst the listener sizes a message before Proton decodes it, from
// what arrived for it (the first of a burst is encoded again): either way,
// exactly the messages beyond the limit are refused, wherever they are.
TEST_P(AmqpListenerLimitsTest, MessagesBeyondTheLimitInABurstAreRejectedOneByOne) {
  AmqpListenerOptions options;
  options.limits.max_message_size = 200;
  AmqpListenerService& service = start(options);
  AmqpTestClient watcher(service.port(), "watcher");
  ASSERT_TRUE(watcher.waitOpen());
  watcher.subscribe("blobs");
  ASSERT_TRUE(watcher.waitFor([&] { return watcher.links_open.count("blobs") > 0; }));
  AmqpTestClient client(service.port(), "bursts");
  ASSERT_TRUE(client.waitOpen());
  std::vector<proton::message> burst;
  for (int64_t ts = 1; ts <= 8; ++ts) burst.push_back(sized(ts, ts % 2 == 0 ? 300 : 10));
  client.send("blobs", burst);
  ASSERT_TRUE(client.waitFor([&] { return client.accepted + client.rejected == 8; }));
  EXPECT_EQ(client.read<size_t>([&] { return client.rejected; }), 4u);
  EXPECT_EQ(service.stats().messages_too_large, 4u);
  ASSERT_TRUE(watcher.waitFor([&] { return watcher.received["blobs"].size() == 4; }));
  EXPECT_EQ(watcher.receivedTs("blobs"), (std::vector<Timestamp>{1, 3, 5, 7}));
  EXPECT_TRUE(client.read<bool>([&] { return client.link_errors.empty(); }));
}

TEST_P(AmqpListenerLimitsTest, AHugeCreditNeverReadHoldsNoMoreThanTheSubscriberBuffer) {
  constexpr int kEvents = 50000;
  constexpr size_t kBuffer = 200;
  AmqpListenerOptions options;
  options.subscriber_buffer = kBuffer;
  AmqpListenerService& service = start(options);
  AmqpTestClient hog(service.port(), "hog");
  ASSERT_TRUE(hog.waitOpen());
  hog.subscribe("flood", "flood", false, 1000000, 0);  // never settles anything
  ASSERT_TRUE(hog.waitFor([&] { return hog.links_open.count("flood") > 0; }));
  AmqpTestClient publisher(service.port(), "publisher");
  ASSERT_TRUE(publisher.waitOpen());
  // One event through, so the hog's credit is in; then it stops reading.
  publisher.send("flood", {sized(0, 10)}, true);
  ASSERT_TRUE(hog.waitFor([&] { return hog.received["flood"].size() == 1; }));
  std::promise<void> thaw;
  struct Thaw {
    std::promise<void>& promise;
    ~Thaw() { promise.set_value(); }
  } thaw_before_destruction{thaw};
  hog.freeze(thaw.get_future().share());

  // In batches, so that the messages the publisher holds do not swamp the
  // peak RSS. The publisher is served all along: everything is published,
  // held back only until the hog counts as stuck.
  constexpr int kBatch = 1000;
  for (int first = 1; first <= kEvents; first += kBatch) {
    std::vector<proton::message> batch;
    for (int i = first; i < first + kBatch; ++i) batch.push_back(sized(i, 10));
    publisher.send("flood", std::move(batch), true);
    ASSERT_TRUE(waitUntil(
        [&] { return service.stats().published == static_cast<uint64_t>(first + kBatch); }));
  }
  // What is unsettled in the end is the hog's: one buffer, not its credit.
  ASSERT_TRUE(waitUntil([&] { return service.stats().unsettled == kBuffer; }));
  const AmqpListenerStats s = service.stats();
  std::cout << "{\"hostile_client\":\"credit 1000000, never reads, 50000 events\",\"sent\":"
            << s.sent << ",\"unsettled\":" << s.unsettled << ",\"buffer_full\":" << s.buffer_full
            << ",\"subscriber_stalls\":" << s.subscriber_stalls
            << ",\"peak_rss_kb\":" << peakRssKb() << "}\n";
  EXPECT_GE(s.subscriber_stalls, 1u);
  EXPECT_EQ(s.sent, kBuffer);
  // The rest waited in its buffer or was refused once that was full.
  EXPECT_GE(s.buffer_full, kEvents - 2 * kBuffer);
  expectServed(service.port());
}

// A client that connects and sends nothing is closed once handshake-timeout
// has passed, and counted; one that opened in time goes on being served.
TEST_P(AmqpListenerLimitsTest, AClientThatDoesNotAuthenticateIsClosedAtTheHandshakeDeadline) {
  AmqpListenerOptions options;
  options.handshake_timeout = 300ms;
  AmqpListenerService& service = start(options);
  AmqpTestClient opened(service.port(), "in-time");
  ASSERT_TRUE(opened.waitOpen());

  const auto connected = std::chrono::steady_clock::now();
  const int fd = connectRaw(service.port());
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(closedByPeer(fd)) << "not closed by the bus";
  EXPECT_GE(std::chrono::steady_clock::now() - connected, 300ms);
  ::close(fd);
  EXPECT_TRUE(waitUntil([&] { return service.stats().handshake_timeouts == 1; }));

  EXPECT_FALSE(opened.read<bool>([&] { return static_cast<bool>(opened.error); }));
  proton::message m;
  m.subject("Probe");
  m.properties().put("ts", int64_t{1});
  opened.publish("probe", {m});
  EXPECT_TRUE(opened.waitFor([&] { return opened.accepted == 1; }));
  expectServed(service.port());
  EXPECT_EQ(service.stats().handshake_timeouts, 1u);
}

// A client that authenticates (SASL ANONYMOUS, by hand) and then never sends
// its AMQP open is closed at the deadline too: the handshake ends at the
// open, not at the SASL outcome.
TEST_P(AmqpListenerLimitsTest, AClientThatAuthenticatesButNeverOpensIsClosedAtTheDeadline) {
  AmqpListenerOptions options;
  options.handshake_timeout = 300ms;
  AmqpListenerService& service = start(options);
  const auto connected = std::chrono::steady_clock::now();
  const int fd = connectRaw(service.port());
  ASSERT_GE(fd, 0);
  // As a client does: the SASL header; once the bus has offered its
  // mechanisms (a sasl-mechanisms frame, descriptor 0x40), a sasl-init
  // frame (0x41) choosing ANONYMOUS: size 25, data offset 2, type 1 (SASL),
  // channel 0. The bus answers with a sasl-outcome (0x44) whose code is ok
  // (ubyte 0).
  std::string answer;
  auto readUntil = [&](const std::string& performative, const std::string& then) {
    for (;;) {
      const size_t at = answer.find(std::string("\x00\x53", 2) + performative);
      if (at != std::string::npos && answer.substr(at + 3, 16).find(then) != std::string::npos) {
        return true;
      }
      char buf[256];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) return false;
      answer.append(buf, static_cast<size_t>(n));
    }
  };
  const std::string header("AMQP\x03\x01\x00\x00", 8);
  ASSERT_EQ(::send(fd, header.data(), header.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(header.size()));
  ASSERT_TRUE(readUntil("\x40", "ANON")) << "no sasl-mechanisms offering ANONYMOUS";
  const std::string init(
      "\x00\x00\x00\x19\x02\x01\x00\x00"
      "\x00\x53\x41\xc0\x0c\x01\xa3\x09"
      "ANONYMOUS",
      25);
  ASSERT_EQ(::send(fd, init.data(), init.size(), MSG_NOSIGNAL), static_cast<ssize_t>(init.size()));
  ASSERT_TRUE(readUntil("\x44", std::string("\x50\x00", 2))) << "no sasl-outcome ok";
  EXPECT_TRUE(closedByPeer(fd)) << "not closed by the bus";
  EXPECT_GE(std::chrono::steady_clock::now() - connected, 300ms);
  ::close(fd);
  EXPECT_TRUE(waitUntil([&] { return service.stats().handshake_timeouts == 1; }));
  expectServed(service.port());
}

INSTANTIATE_TEST_SUITE_P(Threads, AmqpListenerLimitsTest, ::testing::Values(1u, 2u, 4u),
                         [](const ::testing::TestParamInfo<unsigned>& info) {
                           return std::to_string(info.param) + "_threads";
                         });

}  // namespace
}  // namespace cepbus::services::amqp
