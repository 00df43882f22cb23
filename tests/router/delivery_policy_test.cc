#include "router/delivery_policy.h"

#include <gtest/gtest.h>

#include "flows/st_flow.h"

namespace cepbus::router {
namespace {

using flows::Qos;

std::unique_ptr<DeliveryPolicy> threeFlows() {
  auto policy = std::make_unique<DeliveryPolicy>("st");
  EXPECT_TRUE(policy->addFlow(std::make_unique<flows::StFlow>("st")).isOk());
  EXPECT_TRUE(policy->addFlow(std::make_unique<flows::StFlow>("seda")).isOk());
  EXPECT_TRUE(policy->addFlow(std::make_unique<flows::StFlow>("reliable")).isOk());
  return policy;
}

TEST(DeliveryPolicyTest, FirstMatchingRouteWins) {
  auto policy = threeFlows();
  ASSERT_TRUE(policy->addRoute({"orders.#", "seda"}).isOk());
  ASSERT_TRUE(policy->addRoute({"orders.eu.*", "st"}).isOk());  // shadowed by the first
  ASSERT_TRUE(policy->addRoute({"*.eu.*", "st"}).isOk());
  auto d = policy->decide("orders.eu.fr", Qos::kBestEffort);
  ASSERT_TRUE(d.isOk());
  EXPECT_EQ(d->flow->name(), "seda");
  EXPECT_EQ(d->route, 0u);
  d = policy->decide("stocks.eu.fr", Qos::kBestEffort);
  EXPECT_EQ(d->route, 2u);
  EXPECT_EQ(d->flow->name(), "st");
}

TEST(DeliveryPolicyTest, UnmatchedAddressesUseTheDefaultFlowBestEffort) {
  auto policy = threeFlows();
  ASSERT_TRUE(policy->addRoute({"orders.#", "seda"}).isOk());
  auto d = policy->decide("news.today", Qos::kReliable);
  ASSERT_TRUE(d.isOk());
  EXPECT_EQ(d->flow->name(), "st");
  EXPECT_EQ(d->qos, Qos::kBestEffort);
  EXPECT_EQ(d->route, policy->routeCount());
  ASSERT_TRUE(policy->setDefaultFlow("seda").isOk());
  EXPECT_EQ(policy->decide("news.today", Qos::kBestEffort)->flow->name(), "seda");
  EXPECT_EQ(policy->setDefaultFlow("nope").code(), Status::Code::kInvalidArgument);
}

TEST(DeliveryPolicyTest, SendersRaiseQosOnlyWhereTheRouteAllows) {
  auto policy = threeFlows();
  RouteRule raisable{"orders.#", "seda"};
  raisable.allow_reliable = true;
  ASSERT_TRUE(policy->addRoute(raisable).isOk());
  ASSERT_TRUE(policy->addRoute({"ticks.#", "st"}).isOk());
  RouteRule always{"payments.#", "seda", Qos::kReliable};
  ASSERT_TRUE(policy->addRoute(always).isOk());

  auto d = policy->decide("orders.1", Qos::kReliable);
  EXPECT_EQ(d->qos, Qos::kReliable);
  EXPECT_EQ(d->flow->name(), "reliable");
  d = policy->decide("orders.1", Qos::kBestEffort);
  EXPECT_EQ(d->qos, Qos::kBestEffort);
  EXPECT_EQ(d->flow->name(), "seda");

  d = policy->decide("ticks.1", Qos::kReliable);  // not allowed: stays best effort
  EXPECT_EQ(d->qos, Qos::kBestEffort);
  EXPECT_EQ(d->flow->name(), "st");

  d = policy->decide("payments.1", Qos::kBestEffort);  // cannot be lowered
  EXPECT_EQ(d->qos, Qos::kReliable);
  EXPECT_EQ(d->flow->name(), "reliable");
}

TEST(DeliveryPolicyTest, BadRoutesAreRefusedWithTheirPosition) {
  auto policy = threeFlows();
  Status s = policy->addRoute({"a..b", "st"});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("route 1"), std::string::npos);
  s = policy->addRoute({"a.#", "nope"});
  EXPECT_NE(s.message().find("unknown flow 'nope'"), std::string::npos);
  RouteRule reliable{"a.#", "st", Qos::kReliable};
  reliable.reliable_flow = "journal";
  s = policy->addRoute(reliable);
  EXPECT_NE(s.message().find("'journal'"), std::string::npos);
  EXPECT_EQ(policy->routeCount(), 0u);
  EXPECT_EQ(policy->addFlow(std::make_unique<flows::StFlow>("st")).code(),
            Status::Code::kAlreadyExists);
}

TEST(DeliveryPolicyTest, AMissingDefaultFlowIsNotFound) {
  DeliveryPolicy policy("st");
  EXPECT_EQ(policy.decide("a", Qos::kBestEffort).status().code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace cepbus::router
