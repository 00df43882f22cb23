#pragma once

// Recorder: a broker endpoint that keeps what the router delivers to it, so a
// test can wait for deliveries and look at them.
//
//   testing::Recorder out(broker, "test.out", "out.pairs");
//   publish(...);
//   ASSERT_TRUE(out.waitFor(2));
//   EXPECT_EQ(out.events()[0]->type().name(), "Pair");
//
// Thread-safety: deliveries arrive on the broker's threads; every member may
// be called from any thread. Ownership: the Recorder registers its endpoint
// on construction and removes it on destruction; the broker must outlive it.

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bus/base/mutex.h"
#include "flows/exchange.h"
#include "router/broker.h"
#include "tests/testing/wait.h"

namespace cepbus::testing {

class Recorder {
 public:
  // Adds endpoint `name` to `broker` and subscribes it to `pattern`.
  Recorder(router::Broker& broker, std::string name, std::string_view pattern)
      : broker_(broker), name_(std::move(name)) {
    EXPECT_TRUE(broker_.addEndpoint(
        name_, [this](const flows::Exchange& exchange, flows::DeliveryContext&) {
          MutexLock lock(mu_);
          ++entered_;
          gate_.wait(mu_, [&]() REQUIRES(mu_) { return open_; });
          events_.push_back(exchange.event);
          senders_.push_back(exchange.sender);
          qos_.push_back(exchange.qos);
          return Status::ok();
        }));
    EXPECT_TRUE(broker_.subscribe(name_, pattern));
  }
  ~Recorder() {
    open();                               // a delivery held at the gate must return
    (void)broker_.removeEndpoint(name_);  // clean-up: gone is fine
  }
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // True once `n` deliveries are recorded; false when `timeout` passes first.
  bool waitFor(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(30)) const {
    return waitUntil([&] { return size() >= n; }, timeout);
  }

  size_t size() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return events_.size();
  }
  // The recorded deliveries in arrival order; senders() and qos() are of the
  // same deliveries, index for index.
  std::vector<EventPtr> events() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return events_;
  }
  std::vector<Symbol> senders() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return senders_;
  }
  std::vector<flows::Qos> qos() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return qos_;
  }

  // A closed gate holds each delivery in the endpoint, unrecorded, until
  // open(): a consumer that does not keep up. Open on construction.
  void close() EXCLUDES(mu_) {
    MutexLock lock(mu_);
    open_ = false;
  }
  void open() EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      open_ = true;
    }
    gate_.notify_all();
  }
  // Deliveries that reached the endpoint, including any held at the gate.
  size_t entered() const EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return entered_;
  }

 private:
  router::Broker& broker_;
  const std::string name_;
  mutable Mutex mu_;
  CondVar gate_;
  bool open_ GUARDED_BY(mu_) = true;
  size_t entered_ GUARDED_BY(mu_) = 0;
  std::vector<EventPtr> events_ GUARDED_BY(mu_);
  std::vector<Symbol> senders_ GUARDED_BY(mu_);
  std::vector<flows::Qos> qos_ GUARDED_BY(mu_);
};

}  // namespace cepbus::testing
