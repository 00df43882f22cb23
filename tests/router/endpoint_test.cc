#include "router/endpoint.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "tests/flows/flow_test_util.h"

namespace cepbus::router {
namespace {

using flows::testing::inOnly;
using flows::testing::makeEvent;

TEST(EndpointTest, DeliversThroughTheConsumerAndCounts) {
  auto entry = std::make_shared<ComponentEntry>("svc.in", ComponentKind::kEndpoint, "svc");
  int calls = 0;
  Endpoint endpoint(
      "svc.in",
      [&](const flows::Exchange& ex) {
        ++calls;
        return ex.event->ts() < 0 ? Status::invalidArgument("negative") : Status::ok();
      },
      entry);
  EXPECT_EQ(endpoint.name(), "svc.in");
  EXPECT_EQ(endpoint.symbol(), Symbol::intern("svc.in"));
  EXPECT_TRUE(endpoint.deliver(inOnly(makeEvent(1))).isOk());
  EXPECT_EQ(endpoint.deliver(inOnly(makeEvent(-1))).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(calls, 2);
  auto s = entry->snapshot(std::chrono::steady_clock::now());
  EXPECT_EQ(s.delivered, 1u);
  EXPECT_EQ(s.failed, 1u);
}

TEST(EndpointTest, AThrowingConsumerIsAnInternalFault) {
  auto entry = std::make_shared<ComponentEntry>("e", ComponentKind::kEndpoint, "");
  Endpoint endpoint(
      "e", [](const flows::Exchange&) -> Status { throw std::runtime_error("kaboom"); }, entry);
  Status s = endpoint.deliver(inOnly(makeEvent(1)));
  EXPECT_EQ(s.code(), Status::Code::kInternal);
  EXPECT_NE(s.message().find("kaboom"), std::string::npos);
  EXPECT_EQ(entry->snapshot(std::chrono::steady_clock::now()).failed, 1u);
}

}  // namespace
}  // namespace cepbus::router
