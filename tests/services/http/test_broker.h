#pragma once

// A started broker for the http tests: a straight-through default flow "st"
// and a route "slow.#" to a second straight-through flow "st2", so routes and
// flows have more than one entry; and a recording endpoint.

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "bus/core/event.h"
#include "flows/exchange.h"
#include "flows/st_flow.h"
#include "router/broker.h"
#include "router/delivery_policy.h"
#include "router/registry.h"

namespace cepbus::services::http {

struct TestBroker {
  TestBroker() {
    auto policy = std::make_unique<router::DeliveryPolicy>("st");
    EXPECT_TRUE(policy->addFlow(std::make_unique<flows::StFlow>("st")));
    EXPECT_TRUE(policy->addFlow(std::make_unique<flows::StFlow>("st2")));
    EXPECT_TRUE(policy->addRoute(router::RouteRule{"slow.#", "st2"}));
    registry = std::make_shared<router::Registry>();
    broker = std::make_unique<router::Broker>(std::move(policy), registry);
    EXPECT_TRUE(broker->start());
  }
  ~TestBroker() { broker->stop(); }

  flows::SendOutcome publish(std::string_view address, int64_t ts, double price = 1.5) {
    flows::Exchange exchange;
    exchange.event = EventBuilder("Stock").at(ts).set("price", Value(price)).build();
    exchange.address = Symbol::intern(address);
    return broker->publish(exchange);
  }

  std::shared_ptr<router::Registry> registry;
  std::unique_ptr<router::Broker> broker;
};

// An endpoint that keeps what it gets.
class Recorder {
 public:
  Recorder(router::Broker& broker, std::string name, std::string_view pattern)
      : broker_(broker), name_(std::move(name)) {
    EXPECT_TRUE(broker_.addEndpoint(name_, [this](const flows::Exchange& ex) {
      std::lock_guard lock(mu_);
      events_.push_back(ex.event);
      return Status::ok();
    }));
    EXPECT_TRUE(broker_.subscribe(name_, pattern));
  }
  ~Recorder() { broker_.removeEndpoint(name_); }
  std::vector<EventPtr> events() const {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  router::Broker& broker_;
  const std::string name_;
  mutable std::mutex mu_;
  std::vector<EventPtr> events_;
};

}  // namespace cepbus::services::http
