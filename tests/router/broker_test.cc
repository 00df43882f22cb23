#include "router/broker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "bus/core/wire_names.h"
#include "flows/reliable_flow.h"
#include "flows/seda_flow.h"
#include "flows/st_flow.h"
#include "tests/flows/flow_test_util.h"
#include "tests/testing/stats.h"

namespace cepbus::router {
namespace {

using flows::DeliveryContext;
using flows::Exchange;
using flows::OutcomeKind;
using flows::Pattern;
using flows::Qos;
using flows::testing::makeEvent;
using flows::testing::OutcomeRecorder;
using flows::testing::TempDir;
using flows::testing::waitUntil;

// A content filter from a lambda; the real ones come from the filter compiler.
class LambdaFilter final : public EventFilter {
 public:
  LambdaFilter(std::function<bool(const Event&)> fn, std::string text)
      : fn_(std::move(fn)), text_(std::move(text)) {}
  bool matches(const Event& event) const override { return fn_(event); }
  const std::string& text() const override { return text_; }

 private:
  std::function<bool(const Event&)> fn_;
  std::string text_;
};

EventFilterPtr priceAbove(double limit) {
  return std::make_shared<LambdaFilter>(
      [limit](const Event& e) {
        const Value* price = e.find(Symbol::intern("price"));
        return price != nullptr && price->toDouble() > limit;
      },
      "price > " + std::to_string(limit));
}

EventPtr priced(double price) {
  return EventBuilder("Stock").at(1).set(Symbol::intern("price"), Value(price)).build();
}

// What an endpoint received.
class Inbox {
 public:
  Endpoint::Consumer consumer(Status answer = Status::ok()) {
    return [this, answer](const Exchange& ex, DeliveryContext&) {
      std::lock_guard lock(mu_);
      ids_.push_back(ex.event->id());
      addresses_.emplace_back(ex.address.name());
      qos_.push_back(ex.qos);
      threads_.push_back(std::this_thread::get_id());
      return answer;
    };
  }
  size_t size() const {
    std::lock_guard lock(mu_);
    return ids_.size();
  }
  std::vector<EventId> ids() const {
    std::lock_guard lock(mu_);
    return ids_;
  }
  std::vector<std::string> addresses() const {
    std::lock_guard lock(mu_);
    return addresses_;
  }
  Qos lastQos() const {
    std::lock_guard lock(mu_);
    return qos_.back();
  }
  std::thread::id lastThread() const {
    std::lock_guard lock(mu_);
    return threads_.back();
  }

 private:
  mutable std::mutex mu_;
  std::vector<EventId> ids_;
  std::vector<std::string> addresses_;
  std::vector<Qos> qos_;
  std::vector<std::thread::id> threads_;
};

Exchange to(std::string_view address, EventPtr event, Qos qos = Qos::kBestEffort,
            flows::ExchangeListenerPtr listener = nullptr) {
  Exchange ex;
  ex.event = std::move(event);
  ex.address = Symbol::intern(address);
  ex.qos = qos;
  ex.listener = std::move(listener);
  return ex;
}

class BrokerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto policy = std::make_unique<DeliveryPolicy>("st");
    ASSERT_TRUE(policy->addFlow(std::make_unique<flows::StFlow>("st")).isOk());
    ASSERT_TRUE(policy->addFlow(std::make_unique<flows::SedaFlow>(flows::SedaFlowConfig{})).isOk());
    flows::ReliableFlowConfig reliable;
    reliable.journal_path = dir_.file("broker.db");
    reliable.journal.fsync = false;
    ASSERT_TRUE(policy->addFlow(std::make_unique<flows::ReliableFlow>(reliable)).isOk());
    RouteRule orders{"orders.#", "seda"};
    orders.allow_reliable = true;
    ASSERT_TRUE(policy->addRoute(orders).isOk());
    ASSERT_TRUE(policy->addRoute({"ticks.#", "st"}).isOk());
    registry_ = std::make_shared<Registry>();
    broker_ = std::make_unique<Broker>(std::move(policy), registry_);
    ASSERT_TRUE(broker_->start().isOk());
  }

  void addInbox(const std::string& name, Inbox& inbox, Status answer = Status::ok()) {
    ASSERT_TRUE(broker_->addEndpoint(name, inbox.consumer(answer), "test-service").isOk());
  }
  SubscriptionId subscribe(const std::string& endpoint, const std::string& pattern,
                           EventFilterPtr filter = nullptr) {
    auto id = broker_->subscribe(endpoint, pattern, std::move(filter));
    EXPECT_TRUE(id.isOk()) << id.status().toString();
    return id.isOk() ? *id : 0;
  }
  // Metric `name` of the route whose pattern is `pattern` ("(default)": the
  // default route), as the registry's stats store has it; -1 when absent.
  double route(std::string_view pattern, std::string_view name) const {
    return cepbus::testing::statValue(registry_->stats(), kRouteSchema.component,
                                      {{"route", std::string(pattern)}}, name)
        .value_or(-1);
  }

  TempDir dir_;
  std::shared_ptr<Registry> registry_;
  std::unique_ptr<Broker> broker_;
};

// The publisher's hold reaches the deliveries made inside its publish
// (straight through), not those a stage's worker makes later.
TEST_F(BrokerTest, APublishersWakeHoldReachesOnlyTheDeliveriesInsideThePublish) {
  std::mutex mu;
  std::vector<const flows::WakeHold*> seen;  // guarded by mu
  ASSERT_TRUE(broker_
                  ->addEndpoint("watcher",
                                [&](const Exchange&, DeliveryContext& context) {
                                  std::lock_guard lock(mu);
                                  seen.push_back(context.wakeHold());
                                  return Status::ok();
                                })
                  .isOk());
  subscribe("watcher", "ticks.#");
  subscribe("watcher", "orders.#");
  flows::WakeHold hold;
  EXPECT_EQ(broker_->publish(to("ticks.a", priced(1)), &hold).delivered, 1u);  // st
  EXPECT_EQ(broker_->publish(to("orders.a", priced(2)), &hold).queued, 1u);    // seda
  ASSERT_TRUE(waitUntil([&] {
    std::lock_guard lock(mu);
    return seen.size() == 2;
  }));
  std::lock_guard lock(mu);
  EXPECT_EQ(seen[0], &hold);
  EXPECT_EQ(seen[1], nullptr);
}

TEST_F(BrokerTest, PublishReachesExactAndWildcardSubscribersOnce) {
  Inbox a, b, c, d;
  addInbox("a", a);
  addInbox("b", b);
  addInbox("c", c);
  addInbox("d", d);
  subscribe("a", "stocks.ibm");
  subscribe("b", "stocks.*");
  subscribe("b", "stocks.#");  // b matches twice: delivered once
  subscribe("c", "#");
  subscribe("d", "bonds.#");
  EventPtr event = makeEvent(1);
  flows::SendOutcome out = broker_->publish(to("stocks.ibm", event));
  EXPECT_TRUE(out.status.isOk());
  EXPECT_EQ(out.delivered, 3u);
  EXPECT_EQ(a.ids(), std::vector<EventId>{event->id()});
  EXPECT_EQ(b.ids(), std::vector<EventId>{event->id()});
  EXPECT_EQ(c.ids(), std::vector<EventId>{event->id()});
  EXPECT_EQ(d.size(), 0u);
  EXPECT_EQ(a.addresses(), std::vector<std::string>{"stocks.ibm"});
  EXPECT_EQ(a.lastThread(), std::this_thread::get_id());  // default route: straight through
  EXPECT_EQ(broker_->subscriptionCount(), 5u);
}

TEST_F(BrokerTest, ContentFiltersSelectEvents) {
  Inbox cheap_or_dear, dear, all;
  addInbox("cheap_or_dear", cheap_or_dear);
  addInbox("dear", dear);
  addInbox("all", all);
  subscribe("dear", "stocks.*", priceAbove(10));
  subscribe("all", "stocks.*");
  auto below = std::make_shared<LambdaFilter>(
      [](const Event& e) { return e.find(Symbol::intern("price"))->toDouble() < 2; }, "price < 2");
  subscribe("cheap_or_dear", "stocks.*", below);
  subscribe("cheap_or_dear", "stocks.#", priceAbove(100));  // either filter will do
  EventPtr p1 = priced(1), p5 = priced(5), p50 = priced(50), p500 = priced(500);
  for (const EventPtr& e : {p1, p5, p50, p500}) broker_->publish(to("stocks.ibm", e));
  EXPECT_EQ(all.size(), 4u);
  EXPECT_EQ(dear.ids(), (std::vector<EventId>{p50->id(), p500->id()}));
  EXPECT_EQ(cheap_or_dear.ids(), (std::vector<EventId>{p1->id(), p500->id()}));
}

TEST_F(BrokerTest, FilteringEveryoneOutIsUnrouted) {
  Inbox dear;
  addInbox("dear", dear);
  subscribe("dear", "#", priceAbove(10));
  flows::SendOutcome out = broker_->publish(to("x", priced(1)));
  EXPECT_EQ(out.targets, 0u);
  EXPECT_EQ(route("(default)", "unrouted"), 1);
}

TEST_F(BrokerTest, SubscriptionChangesTakeEffectOnTheNextPublish) {
  Inbox a, b;
  addInbox("a", a);
  addInbox("b", b);
  const SubscriptionId sub = subscribe("a", "news.*");
  broker_->publish(to("news.today", makeEvent(1)));  // caches the route
  subscribe("b", "news.today");
  broker_->publish(to("news.today", makeEvent(2)));
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(b.size(), 1u);
  ASSERT_TRUE(broker_->unsubscribe(sub).isOk());
  EXPECT_EQ(broker_->unsubscribe(sub).code(), Status::Code::kNotFound);
  broker_->publish(to("news.today", makeEvent(3)));
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(b.size(), 2u);
  ASSERT_TRUE(broker_->removeEndpoint("b").isOk());
  EXPECT_EQ(broker_->removeEndpoint("b").code(), Status::Code::kNotFound);
  EXPECT_EQ(broker_->publish(to("news.today", makeEvent(4))).targets, 0u);
  EXPECT_EQ(b.size(), 2u);
  EXPECT_EQ(registry_->find("b"), nullptr);
  EXPECT_EQ(broker_->endpoint("b"), nullptr);
  EXPECT_EQ(broker_->subscriptionCount(), 0u);
}

TEST_F(BrokerTest, SubscribeNeedsAKnownEndpointAndAValidPattern) {
  EXPECT_EQ(broker_->subscribe("ghost", "#").status().code(), Status::Code::kNotFound);
  Inbox a;
  addInbox("a", a);
  EXPECT_EQ(broker_->subscribe("a", "a..b").status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(broker_->addEndpoint("a", a.consumer()).code(), Status::Code::kAlreadyExists);
  EXPECT_EQ(broker_->addEndpoint("z", nullptr).code(), Status::Code::kInvalidArgument);
}

TEST_F(BrokerTest, MalformedAddressesAreRefusedAndReported) {
  auto recorder = std::make_shared<OutcomeRecorder>();
  flows::SendOutcome out = broker_->publish(to("a..b", makeEvent(1), Qos::kBestEffort, recorder));
  EXPECT_EQ(out.status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(recorder->count(OutcomeKind::kRejected), 1u);
  // Cached as invalid: the same answer again, without a lock.
  EXPECT_EQ(broker_->publish(to("a..b", makeEvent(2))).status.code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(broker_->publish(to("x", nullptr)).status.code(), Status::Code::kInvalidArgument);
}

TEST_F(BrokerTest, RobustInOnlyFaultsGoBackToTheSender) {
  Inbox good, bad;
  addInbox("good", good);
  addInbox("bad", bad, Status::unavailable("disk full"));
  subscribe("good", "jobs.*");
  subscribe("bad", "jobs.*");
  auto recorder = std::make_shared<OutcomeRecorder>();
  Exchange ex = to("jobs.1", makeEvent(1), Qos::kBestEffort, recorder);
  ex.pattern = Pattern::kRobustInOnly;
  flows::SendOutcome out = broker_->publish(ex);
  EXPECT_EQ(out.delivered, 1u);
  EXPECT_EQ(out.failed, 1u);
  ASSERT_EQ(recorder->count(OutcomeKind::kFault), 1u);
  for (const auto& e : recorder->entries()) {
    if (e.kind == OutcomeKind::kFault) {
      EXPECT_EQ(e.target, "bad");
      EXPECT_EQ(e.status.message(), "disk full");
    }
  }
  EXPECT_EQ(recorder->count(OutcomeKind::kDelivered), 1u);

  // Nobody subscribed: that is a fault too for a sender that asked for faults.
  Exchange lost = to("nobody.home", makeEvent(2), Qos::kBestEffort, recorder);
  lost.pattern = Pattern::kRobustInOnly;
  broker_->publish(lost);
  EXPECT_EQ(recorder->count(OutcomeKind::kFault), 2u);
  EXPECT_EQ(recorder->entries().back().status.code(), Status::Code::kNotFound);
}

TEST_F(BrokerTest, TheDeliveryPolicyChoosesFlowAndQos) {
  Inbox orders, ticks;
  addInbox("orders", orders);
  addInbox("ticks", ticks);
  subscribe("orders", "orders.#");
  subscribe("ticks", "ticks.#");

  flows::SendOutcome out = broker_->publish(to("orders.eu", makeEvent(1)));
  EXPECT_EQ(out.queued, 1u);  // seda
  ASSERT_TRUE(waitUntil([&] { return orders.size() == 1; }));
  EXPECT_NE(orders.lastThread(), std::this_thread::get_id());
  EXPECT_EQ(orders.lastQos(), Qos::kBestEffort);

  auto recorder = std::make_shared<OutcomeRecorder>();
  out = broker_->publish(to("orders.eu", makeEvent(2), Qos::kReliable, recorder));
  EXPECT_EQ(out.queued, 1u);  // raised to reliable: journaled
  ASSERT_TRUE(waitUntil([&] { return orders.size() == 2; }));
  EXPECT_EQ(orders.lastQos(), Qos::kReliable);
  EXPECT_EQ(recorder->count(OutcomeKind::kAccepted), 1u);

  out = broker_->publish(to("ticks.ibm", makeEvent(3), Qos::kReliable));
  EXPECT_EQ(out.delivered, 1u);  // st, and the route does not allow reliable
  EXPECT_EQ(ticks.lastQos(), Qos::kBestEffort);

  EXPECT_EQ(registry_->stats().scopes(kRouteSchema.component).size(), 3u);
  EXPECT_EQ(route("orders.#", "published"), 2);
  EXPECT_EQ(route("orders.#", "enqueued"), 2);
  EXPECT_EQ(route("ticks.#", "delivered"), 1);
  EXPECT_EQ(cepbus::testing::statValue(registry_->stats(), kRouteSchema.component,
                                       {{"route", "(default)"}, {"flow", "st"}}, "published"),
            0);
}

TEST_F(BrokerTest, RequestResponseCorrelatesReplies) {
  uint64_t seen_correlation = 0;
  ASSERT_TRUE(
      broker_
          ->addEndpoint(
              "calc",
              [&](const Exchange& ex, DeliveryContext&) {
                EXPECT_EQ(ex.pattern, Pattern::kInOut);
                seen_correlation = ex.correlation_id;
                const int64_t n = ex.event->find(Symbol::intern("n"))->asInt();
                ex.reply(
                    EventBuilder("Result").at(1).set(Symbol::intern("n"), Value(n * 2)).build());
                return Status::ok();
              })
          .isOk());
  ASSERT_TRUE(broker_->provide("calc.double", "calc").isOk());
  EXPECT_EQ(broker_->provide("calc.double", "calc").code(), Status::Code::kAlreadyExists);

  flows::Outcome got;
  auto id = broker_->request(to("calc.double", makeEvent(21)), std::chrono::seconds(30),
                             [&](const flows::Outcome& o) { got = o; });
  ASSERT_TRUE(id.isOk()) << id.status().toString();
  EXPECT_EQ(*id, seen_correlation);
  ASSERT_EQ(got.kind, OutcomeKind::kReply);
  EXPECT_EQ(got.reply->find(Symbol::intern("n"))->asInt(), 42);
  EXPECT_EQ(broker_->requests().pending(), 0u);
}

// A client's subscribing link provides its address for requests: the
// binding holds the address as a name from a client, given back with it.
TEST_F(BrokerTest, AnAddressAClientsEndpointProvidesIsGivenBackWithIt) {
  const uint32_t held_before = wireNameStats().held;
  ASSERT_TRUE(broker_
                  ->addEndpoint("amqp:client-1/link-7",
                                [](const Exchange&, DeliveryContext&) { return Status::ok(); })
                  .isOk());
  ASSERT_TRUE(broker_->provide("client.only.here", "amqp:client-1/link-7").isOk());
  EXPECT_TRUE(Symbol::find("client.only.here").empty()) << "the provided address was interned";
  // The address, and the endpoint's name, which the queueing flows hold.
  EXPECT_EQ(wireNameStats().held, held_before + 2);
  ASSERT_TRUE(broker_->removeEndpoint("amqp:client-1/link-7").isOk());
  EXPECT_EQ(wireNameStats().held, held_before);
}

// Clients name endpoints (an AMQP subscribing link's, a WebSocket feed's).
// Every flow that delivered to one holds its name only while it needs it:
// the SEDA and reliable flows while the endpoint is attached, the reliable
// flow's window of delivered ids until the endpoint's ids leave it (so the
// name's id is not reused for another endpoint meanwhile). Then it is given
// back; it is never made permanent.
TEST(BrokerEndpointNameTest, EveryFlowGivesBackTheNameOfAClientsEndpoint) {
  TempDir dir;
  auto policy = std::make_unique<DeliveryPolicy>("st");
  ASSERT_TRUE(policy->addFlow(std::make_unique<flows::StFlow>("st")).isOk());
  ASSERT_TRUE(policy->addFlow(std::make_unique<flows::SedaFlow>(flows::SedaFlowConfig{})).isOk());
  flows::ReliableFlowConfig reliable;
  reliable.journal_path = dir.file("names.db");
  reliable.journal.fsync = false;
  reliable.journal.delivered_window = 4;
  ASSERT_TRUE(policy->addFlow(std::make_unique<flows::ReliableFlow>(reliable)).isOk());
  RouteRule queued{"client.queued.#", "seda"};
  queued.allow_reliable = true;
  ASSERT_TRUE(policy->addRoute(queued).isOk());
  Broker broker(std::move(policy), std::make_shared<Registry>());
  ASSERT_TRUE(broker.start().isOk());

  Inbox service;
  ASSERT_TRUE(broker.addEndpoint("svc", service.consumer()).isOk());
  ASSERT_TRUE(broker.subscribe("svc", "client.#").isOk());
  const std::string name = "amqp:client-2/link-9";
  const uint32_t held_before = wireNameStats().held;
  Inbox client;
  ASSERT_TRUE(broker.addEndpoint(name, client.consumer()).isOk());
  ASSERT_TRUE(broker.subscribe(name, "client.#").isOk());
  EXPECT_EQ(wireNameStats().held, held_before + 1);
  broker.publish(to("client.direct", makeEvent(1)));                    // st
  broker.publish(to("client.queued.a", makeEvent(2)));                  // seda
  broker.publish(to("client.queued.b", makeEvent(3), Qos::kReliable));  // reliable
  ASSERT_TRUE(waitUntil([&] { return client.size() == 3; }));
  ASSERT_TRUE(broker.removeEndpoint(name).isOk());
  EXPECT_TRUE(Symbol::find(name).empty()) << "the endpoint's name was interned";
  EXPECT_EQ(wireNameStats().held, held_before + 1) << "the delivered ids' window holds it";

  // Four more reliable deliveries, to the service, push the client's id out.
  for (int64_t i = 0; i < 4; ++i) {
    broker.publish(to("client.queued.c", makeEvent(10 + i), Qos::kReliable));
  }
  ASSERT_TRUE(waitUntil([&] { return service.size() == 7; }));
  EXPECT_TRUE(waitUntil([&] { return wireNameStats().held == held_before; }))
      << wireNameStats().held << " names held, " << held_before << " before";
  EXPECT_TRUE(Symbol::find(name).empty());
  broker.stop();
}

TEST_F(BrokerTest, AHeldProvidedAddressIsWithdrawnByName) {
  ASSERT_TRUE(
      broker_->addEndpoint("svc", [](const Exchange&, DeliveryContext&) { return Status::ok(); })
          .isOk());
  const uint32_t held_before = wireNameStats().held;
  ASSERT_TRUE(broker_->provide("client.withdrawn", "svc").isOk());
  ASSERT_TRUE(broker_->withdraw("client.withdrawn").isOk());
  EXPECT_EQ(wireNameStats().held, held_before);
  EXPECT_EQ(broker_->withdraw("client.withdrawn").code(), Status::Code::kNotFound);
  EXPECT_EQ(broker_
                ->request(to("client.withdrawn", makeEvent(1)), std::chrono::seconds(1),
                          [](const flows::Outcome&) {})
                .status()
                .code(),
            Status::Code::kNotFound);
}

TEST_F(BrokerTest, AsynchronousRepliesFromAnotherThreadAreCorrelated) {
  std::mutex mu;
  std::vector<Exchange> parked;
  ASSERT_TRUE(broker_
                  ->addEndpoint("slow",
                                [&](const Exchange& ex, DeliveryContext&) {
                                  std::lock_guard lock(mu);
                                  parked.push_back(ex);  // answer later
                                  return Status::ok();
                                })
                  .isOk());
  ASSERT_TRUE(broker_->provide("slow.echo", "slow").isOk());
  std::mutex got_mu;
  std::map<uint64_t, int64_t> answers;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 5; ++i) {
    auto id = broker_->request(to("slow.echo", makeEvent(i)), std::chrono::seconds(30),
                               [&, i](const flows::Outcome& o) {
                                 std::lock_guard lock(got_mu);
                                 answers[static_cast<uint64_t>(i)] = o.reply->ts();
                               });
    ASSERT_TRUE(id.isOk());
    ids.push_back(*id);
  }
  std::thread replier([&] {
    std::lock_guard lock(mu);
    for (auto it = parked.rbegin(); it != parked.rend(); ++it) {  // out of order
      it->reply(EventBuilder("Echo").at(it->event->ts()).build());
    }
  });
  replier.join();
  std::lock_guard lock(got_mu);
  ASSERT_EQ(answers.size(), 5u);
  for (const auto& [i, ts] : answers) EXPECT_EQ(static_cast<int64_t>(i), ts);
  EXPECT_EQ(std::set<uint64_t>(ids.begin(), ids.end()).size(), 5u);
}

TEST_F(BrokerTest, RequestsTimeOutOrFault) {
  ASSERT_TRUE(
      broker_->addEndpoint("mute", [](const Exchange&, DeliveryContext&) { return Status::ok(); })
          .isOk());
  ASSERT_TRUE(broker_
                  ->addEndpoint("broken",
                                [](const Exchange&, DeliveryContext&) {
                                  return Status::internal("cannot compute");
                                })
                  .isOk());
  ASSERT_TRUE(broker_->provide("svc.mute", "mute").isOk());
  ASSERT_TRUE(broker_->provide("svc.broken", "broken").isOk());

  std::atomic<int> timeout_kind{-1};
  ASSERT_TRUE(
      broker_
          ->request(to("svc.mute", makeEvent(1)), std::chrono::milliseconds(5),
                    [&](const flows::Outcome& o) { timeout_kind = static_cast<int>(o.kind); })
          .isOk());
  ASSERT_TRUE(waitUntil([&] { return timeout_kind.load() >= 0; }));
  EXPECT_EQ(timeout_kind.load(), static_cast<int>(OutcomeKind::kTimeout));

  flows::Outcome fault;
  ASSERT_TRUE(broker_
                  ->request(to("svc.broken", makeEvent(1)), std::chrono::seconds(30),
                            [&](const flows::Outcome& o) { fault = o; })
                  .isOk());
  EXPECT_EQ(fault.kind, OutcomeKind::kFault);
  EXPECT_EQ(fault.status.message(), "cannot compute");
  EXPECT_EQ(fault.target, "broken");

  EXPECT_EQ(broker_
                ->request(to("svc.none", makeEvent(1)), std::chrono::seconds(1),
                          [](const flows::Outcome&) { ADD_FAILURE() << "never called"; })
                .status()
                .code(),
            Status::Code::kNotFound);
  ASSERT_TRUE(broker_->withdraw("svc.mute").isOk());
  EXPECT_EQ(broker_->withdraw("svc.mute").code(), Status::Code::kNotFound);
}

TEST_F(BrokerTest, EndpointsAndFlowsReportIntoTheRegistry) {
  Inbox a;
  addInbox("a", a);
  subscribe("a", "#");
  for (int i = 0; i < 3; ++i) broker_->publish(to("x.y", makeEvent(i)));
  auto s = registry_->snapshotOf("a");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->kind, ComponentKind::kEndpoint);
  EXPECT_EQ(s->owner, "test-service");
  EXPECT_EQ(s->state, ComponentState::kStarted);
  EXPECT_EQ(s->delivered, 3u);
  auto flow = registry_->snapshotOf("flow/st");
  ASSERT_TRUE(flow.has_value());
  EXPECT_EQ(flow->kind, ComponentKind::kFlow);
  EXPECT_EQ(flow->state, ComponentState::kStarted);
  EXPECT_EQ(flow->delivered, 3u);
  broker_->stop();
  EXPECT_EQ(registry_->snapshotOf("flow/st")->state, ComponentState::kStopped);
  broker_.reset();
  EXPECT_EQ(registry_->size(), 0u);  // a broker cleans up after itself
}

TEST_F(BrokerTest, AStoppedBrokerRejectsPublishes) {
  Inbox a;
  addInbox("a", a);
  subscribe("a", "#");
  broker_->stop();
  auto recorder = std::make_shared<OutcomeRecorder>();
  flows::SendOutcome out = broker_->publish(to("x", makeEvent(1), Qos::kBestEffort, recorder));
  EXPECT_EQ(out.rejected, 1u);
  EXPECT_EQ(recorder->count(OutcomeKind::kRejected), 1u);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(
      broker_->request(to("x", makeEvent(1)), std::chrono::seconds(1), [](const flows::Outcome&) {})
          .status()
          .code(),
      Status::Code::kNotFound);
}

TEST_F(BrokerTest, DeliveriesMayPublishAndSubscribeAgain) {
  Inbox out_box;
  addInbox("out", out_box);
  subscribe("out", "stage2.*");
  std::atomic<int> subscribed{0};
  ASSERT_TRUE(broker_
                  ->addEndpoint("relay",
                                [&](const Exchange& ex, DeliveryContext&) {
                                  // A CEP engine publishing a composite event, and
                                  // a service subscribing from its callback.
                                  if (subscribed.fetch_add(1) == 0) {
                                    EXPECT_TRUE(broker_->subscribe("out", "late.#").isOk());
                                  }
                                  return broker_->publish(to("stage2.x", ex.event)).status;
                                })
                  .isOk());
  subscribe("relay", "stage1.*");
  for (int i = 0; i < 10; ++i) broker_->publish(to("stage1.a", makeEvent(i)));
  EXPECT_EQ(out_box.size(), 10u);
  broker_->publish(to("late.z", makeEvent(99)));
  EXPECT_EQ(out_box.size(), 11u);
}

TEST_F(BrokerTest, ConcurrentPublishersAndSubscriptionChurn) {
  Inbox steady, churned;
  addInbox("steady", steady);
  addInbox("churned", churned);
  subscribe("steady", "load.*");
  constexpr int kPublishers = 3, kEach = 3000;
  std::atomic<bool> done{false};
  std::thread churn([&] {
    while (!done.load()) {
      auto id = broker_->subscribe("churned", "load.#");
      ASSERT_TRUE(id.isOk());
      ASSERT_TRUE(broker_->unsubscribe(*id).isOk());
    }
  });
  std::vector<std::thread> publishers;
  for (int p = 0; p < kPublishers; ++p) {
    publishers.emplace_back([&, p] {
      const std::string address = "load." + std::to_string(p);
      for (int i = 0; i < kEach; ++i) broker_->publish(to(address, makeEvent(i)));
    });
  }
  for (auto& t : publishers) t.join();
  done.store(true);
  churn.join();
  EXPECT_EQ(steady.size(), static_cast<size_t>(kPublishers * kEach));
  EXPECT_LE(churned.size(), static_cast<size_t>(kPublishers * kEach));
}

TEST_F(BrokerTest, PausedRouteRefusesWithUnavailableAndOtherRoutesFlow) {
  Inbox orders, ticks, other;
  addInbox("orders", orders);
  addInbox("ticks", ticks);
  addInbox("other", other);
  subscribe("orders", "orders.#");
  subscribe("ticks", "ticks.#");
  subscribe("other", "misc");
  broker_->publish(to("ticks.a", makeEvent(1)));  // caches the route before the pause
  ASSERT_TRUE(broker_->setRoutePaused("ticks.#", true).isOk());
  auto recorder = std::make_shared<OutcomeRecorder>();
  Exchange refused = to("ticks.a", makeEvent(2), Qos::kBestEffort, recorder);
  refused.pattern = Pattern::kRobustInOnly;
  flows::SendOutcome out = broker_->publish(refused);
  EXPECT_EQ(out.status.code(), Status::Code::kUnavailable);
  EXPECT_EQ(out.delivered + out.queued, 0u);
  EXPECT_EQ(recorder->count(OutcomeKind::kRejected), 1u);
  EXPECT_EQ(ticks.size(), 1u);
  EXPECT_TRUE(broker_->publish(to("misc", makeEvent(3))).status.isOk());
  EXPECT_TRUE(broker_->publish(to("orders.x", makeEvent(4))).status.isOk());
  EXPECT_TRUE(waitUntil([&] { return orders.size() == 1; }));
  EXPECT_EQ(other.size(), 1u);

  EXPECT_EQ(route("ticks.#", "paused"), 1);
  EXPECT_EQ(route("ticks.#", "refused_paused"), 1);
  EXPECT_EQ(route("ticks.#", "published"), 1);
  EXPECT_EQ(route("orders.#", "paused"), 0);

  ASSERT_TRUE(broker_->setRoutePaused("ticks.#", false).isOk());
  EXPECT_TRUE(broker_->publish(to("ticks.a", makeEvent(5))).status.isOk());
  EXPECT_EQ(ticks.size(), 2u);
  EXPECT_EQ(route("ticks.#", "paused"), 0);
}

TEST_F(BrokerTest, DefaultRoutePausesByEmptyPatternAndUnknownRouteIsNotFound) {
  Inbox other;
  addInbox("other", other);
  subscribe("other", "misc");
  ASSERT_TRUE(broker_->setRoutePaused("", true).isOk());
  EXPECT_EQ(broker_->publish(to("misc", makeEvent(1))).status.code(), Status::Code::kUnavailable);
  EXPECT_EQ(route("(default)", "paused"), 1);
  EXPECT_EQ(broker_->setRoutePaused("nope.#", true).code(), Status::Code::kNotFound);
  ASSERT_TRUE(broker_->provide("misc", "other").isOk());
  auto replied = broker_->request(to("misc", makeEvent(2)), std::chrono::seconds(5),
                                  [](const flows::Outcome&) {});
  EXPECT_EQ(replied.status().code(), Status::Code::kUnavailable);
  ASSERT_TRUE(broker_->setRoutePaused("", false).isOk());
  EXPECT_TRUE(broker_->publish(to("misc", makeEvent(3))).status.isOk());
  EXPECT_EQ(other.size(), 1u);
}

// What the route had queued before the pause is still delivered.
TEST_F(BrokerTest, PausingKeepsWhatTheRouteAlreadyAccepted) {
  std::atomic<bool> release{false};
  std::atomic<int> got{0};
  ASSERT_TRUE(broker_
                  ->addEndpoint("slow",
                                [&](const Exchange&, DeliveryContext&) {
                                  while (!release.load()) std::this_thread::yield();
                                  got.fetch_add(1);
                                  return Status::ok();
                                })
                  .isOk());
  subscribe("slow", "orders.#");
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(broker_->publish(to("orders.x", makeEvent(i))).status.isOk());
  }
  ASSERT_TRUE(broker_->setRoutePaused("orders.#", true).isOk());
  EXPECT_EQ(broker_->publish(to("orders.x", makeEvent(9))).status.code(),
            Status::Code::kUnavailable);
  release.store(true);
  EXPECT_TRUE(waitUntil([&] { return got.load() == 5; }));
}

}  // namespace
}  // namespace cepbus::router
