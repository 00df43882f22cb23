#pragma once

// A started broker for the http tests: a straight-through default flow "st"
// and a route "slow.#" to a second straight-through flow "st2", so routes and
// flows have more than one entry; and a recording endpoint. Also a broker
// with a reliable flow whose journal numbers are known (ReliableTestBroker).

#include <gtest/gtest.h>

#include <chrono>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/event.h"
#include "flows/exchange.h"
#include "flows/reliable_flow.h"
#include "flows/st_flow.h"
#include "router/broker.h"
#include "router/delivery_policy.h"
#include "router/registry.h"
#include "tests/flows/flow_test_util.h"
#include "tests/testing/recorder.h"
#include "tests/testing/wait.h"

namespace cepbus::services::http {

inline flows::Exchange stockExchange(std::string_view address, int64_t ts, double price) {
  flows::Exchange exchange;
  exchange.event = EventBuilder("Stock").at(ts).set("price", Value(price)).build();
  exchange.address = Symbol::intern(address);
  return exchange;
}

struct TestBroker {
  TestBroker() {
    auto policy = std::make_unique<router::DeliveryPolicy>("st");
    EXPECT_TRUE(policy->addFlow(std::make_unique<flows::StFlow>("st", registry->stats())));
    EXPECT_TRUE(policy->addFlow(std::make_unique<flows::StFlow>("st2", registry->stats())));
    EXPECT_TRUE(policy->addRoute(router::RouteRule{"slow.#", "st2"}));
    broker = std::make_unique<router::Broker>(std::move(policy), registry);
    EXPECT_TRUE(broker->start());
  }
  ~TestBroker() { broker->stop(); }

  flows::SendOutcome publish(std::string_view address, int64_t ts, double price = 1.5) {
    return broker->publish(stockExchange(address, ts, price));
  }

  // First: the flows report into its stats store.
  std::shared_ptr<router::Registry> registry = std::make_shared<router::Registry>();
  std::unique_ptr<router::Broker> broker;
};

// An endpoint that keeps what it gets.
using Recorder = cepbus::testing::Recorder;

// A started broker with a best-effort default flow "st" and a route
// "orders.#", reliable by default, through the ReliableFlow "reliable" (its
// journal in a temp dir). The flow commits before it dispatches, so every
// record is journaled and none is cancelled, and gives a record two
// attempts. The endpoint "orders" answers by the event's price: OK when
// positive, a failure when negative, and at 0 it takes the acknowledgement
// to give later (releaseHeld()).
//
// publishAndSettle() publishes kPublished events: two acknowledged, one that
// fails twice (one retry, then abandoned, still journaled) and one held.
// When it returns: journaled 4, retries 1, abandoned 1, in flight 1 (the held
// one), nothing cancelled, redelivered, corrupt or failed in the journal.
// After releaseHeld() and broker->stop() (which commits the last
// acknowledgements): acknowledged 3, in flight 0, backlog 0.
struct ReliableTestBroker {
  // The prices of the events publishAndSettle() publishes, by the endpoint's answer.
  static constexpr double kPrices[] = {1.0, 2.0, -1.0, 0.0};
  static constexpr int kPublished = std::size(kPrices);

  ReliableTestBroker() {
    auto policy = std::make_unique<router::DeliveryPolicy>("st");
    EXPECT_TRUE(policy->addFlow(std::make_unique<flows::StFlow>("st", registry->stats())));
    flows::ReliableFlowConfig config;
    config.stats = registry->stats();
    config.journal_path = dir.file("journal.db");
    config.journal.fsync = false;
    config.concurrent_dispatch = false;
    config.max_attempts = 2;
    config.retry_delay = std::chrono::milliseconds(1);
    config.writer.tick = std::chrono::milliseconds(5);  // the retry timer
    auto reliable = std::make_unique<flows::ReliableFlow>(config);
    flow = reliable.get();
    EXPECT_TRUE(policy->addFlow(std::move(reliable)));
    router::RouteRule orders{"orders.#", "st"};
    orders.default_qos = flows::Qos::kReliable;
    EXPECT_TRUE(policy->addRoute(orders));
    broker = std::make_unique<router::Broker>(std::move(policy), registry);
    EXPECT_TRUE(broker->start());
    EXPECT_TRUE(broker->addEndpoint(
        "orders", [this](const flows::Exchange& ex, flows::DeliveryContext& context) {
          const double price = ex.event->find(Symbol::intern("price"))->asDouble();
          if (price < 0) return Status::internal("refused by the test");
          if (price == 0) {
            std::lock_guard lock(mu);
            if (flows::DeferredAck ack = context.deferAcknowledgement()) held = std::move(ack);
          }
          return Status::ok();
        }));
    EXPECT_TRUE(broker->subscribe("orders", "orders.#"));
  }
  ~ReliableTestBroker() { broker->stop(); }

  void publishAndSettle() {
    for (const double price : kPrices) {
      EXPECT_TRUE(broker->publish(stockExchange("orders.new", 1, price)).status);
    }
    // The flow counts a delivery once it is over (acknowledged or
    // abandoned), after the journal numbers of that delivery changed.
    EXPECT_TRUE(cepbus::testing::waitUntil([&] {
      const flows::FlowMetricsSnapshot m = flow->metrics();
      std::lock_guard lock(mu);
      return m.delivered == 2 && m.failed == 1 && held.has_value();
    }));
  }
  void releaseHeld() {
    std::optional<flows::DeferredAck> ack;
    {
      std::lock_guard lock(mu);
      ack.swap(held);
    }
    ASSERT_TRUE(ack && *ack);
    (*ack)(Status::ok());
  }

  // Before the broker: they outlive it (the journal, the endpoint's state).
  flows::testing::TempDir dir;
  std::mutex mu;
  std::optional<flows::DeferredAck> held;  // guarded by mu
  std::shared_ptr<router::Registry> registry = std::make_shared<router::Registry>();
  std::unique_ptr<router::Broker> broker;
  const flows::ReliableFlow* flow = nullptr;  // owned by the broker's policy
};

}  // namespace cepbus::services::http
