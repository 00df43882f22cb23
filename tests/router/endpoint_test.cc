#include "router/endpoint.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "tests/flows/flow_test_util.h"

namespace cepbus::router {
namespace {

using flows::testing::FakeJournal;
using flows::testing::inOnly;
using flows::testing::makeEvent;

Status deliverBestEffort(Endpoint& endpoint, const flows::Exchange& exchange) {
  flows::DeliveryContext context;
  return endpoint.deliver(exchange, context);
}

TEST(EndpointTest, DeliversThroughTheConsumerAndCounts) {
  auto entry = std::make_shared<ComponentEntry>("svc.in", ComponentKind::kEndpoint, "svc");
  int calls = 0;
  Endpoint endpoint(
      "svc.in",
      [&](const flows::Exchange& ex, flows::DeliveryContext&) {
        ++calls;
        return ex.event->ts() < 0 ? Status::invalidArgument("negative") : Status::ok();
      },
      entry);
  EXPECT_EQ(endpoint.name(), "svc.in");
  EXPECT_TRUE(deliverBestEffort(endpoint, inOnly(makeEvent(1))).isOk());
  EXPECT_EQ(deliverBestEffort(endpoint, inOnly(makeEvent(-1))).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(calls, 2);
  auto s = entry->snapshot(std::chrono::steady_clock::now());
  EXPECT_EQ(s.delivered, 1u);
  EXPECT_EQ(s.failed, 1u);
}

TEST(EndpointTest, AThrowingConsumerIsAnInternalFault) {
  auto entry = std::make_shared<ComponentEntry>("e", ComponentKind::kEndpoint, "");
  Endpoint endpoint(
      "e",
      [](const flows::Exchange&, flows::DeliveryContext&) -> Status {
        throw std::runtime_error("kaboom");
      },
      entry);
  Status s = deliverBestEffort(endpoint, inOnly(makeEvent(1)));
  EXPECT_EQ(s.code(), Status::Code::kInternal);
  EXPECT_NE(s.message().find("kaboom"), std::string::npos);
  EXPECT_EQ(entry->snapshot(std::chrono::steady_clock::now()).failed, 1u);
}

// The consumer sees the delivery's own context: what it takes from it (a
// journaled delivery's acknowledgement) is what the flow finds there after.
TEST(EndpointTest, TheConsumerGetsTheDeliverysContext) {
  auto entry = std::make_shared<ComponentEntry>("svc.in", ComponentKind::kEndpoint, "svc");
  std::vector<flows::DeferredAck> taken;
  Endpoint endpoint(
      "svc.in",
      [&](const flows::Exchange&, flows::DeliveryContext& context) {
        if (flows::DeferredAck ack = context.deferAcknowledgement()) taken.push_back(ack);
        return Status::ok();
      },
      entry);
  FakeJournal journal;
  flows::DeliveryContext journaled(nullptr, &journal);
  ASSERT_TRUE(endpoint.deliver(inOnly(makeEvent(1)), journaled).isOk());
  EXPECT_TRUE(journaled.deferred());
  ASSERT_EQ(taken.size(), 1u);
  taken.front()(Status::ok());
  ASSERT_EQ(journal.acknowledged().size(), 1u);

  ASSERT_TRUE(deliverBestEffort(endpoint, inOnly(makeEvent(2))).isOk());
  EXPECT_EQ(taken.size(), 1u);  // nothing to take from a delivery nobody journaled
  EXPECT_EQ(journal.deferred(), 1u);
}

}  // namespace
}  // namespace cepbus::router
