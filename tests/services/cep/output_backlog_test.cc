#include "services/cep/output_backlog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "bus/core/event.h"

namespace cepbus::services::cep {
namespace {

using namespace std::chrono_literals;

flows::Exchange composite(int64_t ts) {
  flows::Exchange exchange;
  exchange.event = EventBuilder("Pair").at(ts).build();
  exchange.address = Symbol::intern("out.pairs");
  return exchange;
}

flows::SendOutcome refusedBy(Status status) {
  flows::SendOutcome out;
  out.targets = 1;
  out.rejected = 1;
  out.status = std::move(status);
  return out;
}

// A bus whose one target takes composites while open and refuses them with
// `refusal` while closed.
struct FakeBus {
  std::atomic<bool> open{true};
  Status refusal = Status::rejected("buffer full");
  std::vector<Timestamp> taken;
  std::vector<Timestamp> lost;
  int attempts = 0;

  OutputBacklog backlog{[this](const flows::Exchange& e) {
                          ++attempts;
                          if (!open.load()) return refusedBy(refusal);
                          taken.push_back(e.event->ts());
                          flows::SendOutcome out;
                          out.targets = out.delivered = 1;
                          return out;
                        },
                        [this](const flows::Exchange& e, const flows::SendOutcome&) {
                          lost.push_back(e.event->ts());
                        }};
};

TEST(OutputBacklogTest, OnlyRefusalsForNowAreWorthRetrying) {
  EXPECT_TRUE(OutputBacklog::retryable(refusedBy(Status::rejected("stage full"))));
  EXPECT_TRUE(OutputBacklog::retryable(refusedBy(Status::unavailable("route paused"))));
  EXPECT_FALSE(OutputBacklog::retryable(refusedBy(Status::notFound("no such target"))));
  EXPECT_FALSE(OutputBacklog::retryable(refusedBy(Status::internal("target threw"))));
}

TEST(OutputBacklogTest, WhatTheBusTakesIsNotHeld) {
  FakeBus bus;
  EXPECT_FALSE(bus.backlog.publish(composite(1)));
  EXPECT_TRUE(bus.backlog.empty());
  EXPECT_EQ(bus.taken, std::vector<Timestamp>{1});
  EXPECT_EQ(bus.backlog.heldTotal(), 0u);
}

TEST(OutputBacklogTest, RefusedCompositesWaitAndLaterOnesQueueBehindThemInOrder) {
  FakeBus bus;
  bus.open = false;
  EXPECT_TRUE(bus.backlog.publish(composite(1)));
  bus.open = true;  // later ones must not overtake the held one
  EXPECT_TRUE(bus.backlog.publish(composite(2)));
  EXPECT_TRUE(bus.backlog.publish(composite(3)));
  EXPECT_EQ(bus.attempts, 1);  // 2 and 3 were not even tried
  EXPECT_TRUE(bus.taken.empty());
  EXPECT_EQ(bus.backlog.size(), 3u);

  EXPECT_TRUE(bus.backlog.retry());
  EXPECT_EQ(bus.taken, (std::vector<Timestamp>{1, 2, 3}));
  EXPECT_TRUE(bus.backlog.empty());
  EXPECT_EQ(bus.backlog.heldTotal(), 3u);
  EXPECT_TRUE(bus.lost.empty());
}

TEST(OutputBacklogTest, ARetryStopsAtTheFirstRefusal) {
  FakeBus bus;
  bus.open = false;
  bus.refusal = Status::unavailable("route paused");
  bus.backlog.publish(composite(1));
  bus.backlog.publish(composite(2));
  EXPECT_FALSE(bus.backlog.retry());
  EXPECT_EQ(bus.attempts, 2);  // the first held one, once per publish and retry
  EXPECT_EQ(bus.backlog.size(), 2u);
}

TEST(OutputBacklogTest, AFinalRefusalIsLostAtOnce) {
  FakeBus bus;
  bus.open = false;
  bus.refusal = Status::notFound("target gone");
  EXPECT_FALSE(bus.backlog.publish(composite(1)));
  EXPECT_EQ(bus.lost, std::vector<Timestamp>{1});
  EXPECT_TRUE(bus.backlog.empty());
}

TEST(OutputBacklogTest, DrainWaitsUntilTheBusTakesThemOrTheDeadline) {
  FakeBus bus;
  bus.open = false;
  bus.backlog.publish(composite(1));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(bus.backlog.drain(start + 30ms));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);
  EXPECT_GT(bus.attempts, 2);  // tried again while waiting

  std::thread opener([&bus] {
    std::this_thread::sleep_for(20ms);  // opens while drain() is already waiting
    bus.open = true;
  });
  EXPECT_TRUE(bus.backlog.drain(std::chrono::steady_clock::now() + 10s));
  opener.join();
  EXPECT_EQ(bus.taken, std::vector<Timestamp>{1});
}

TEST(OutputBacklogTest, AbandonLosesWhatIsHeld) {
  FakeBus bus;
  bus.open = false;
  bus.backlog.publish(composite(1));
  bus.backlog.publish(composite(2));
  bus.backlog.abandon();
  EXPECT_EQ(bus.lost, (std::vector<Timestamp>{1, 2}));
  EXPECT_TRUE(bus.backlog.empty());
}

}  // namespace
}  // namespace cepbus::services::cep
