#include "services/http/admin_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tests/services/http/test_broker.h"

namespace cepbus::services::http {
namespace {

using nlohmann::json;

class AdminApiTest : public ::testing::Test {
 protected:
  AdminResponse call(std::string_view method, std::string_view target,
                     std::string_view authorization = {}, std::string_view body = {}) const {
    return api_.handle(AdminRequest{method, target, authorization, body});
  }
  AdminResponse get(std::string_view target) const { return call("GET", target); }

  TestBroker bus_;
  AdminApi api_{*bus_.broker, *bus_.registry, "s3cret", "CEPBUS_TOKEN"};
};

std::string errorOf(const AdminResponse& response) {
  return json::parse(response.body).at("error").get<std::string>();
}

TEST_F(AdminApiTest, ListsTheRegistrysComponents) {
  ASSERT_TRUE(bus_.registry->add("svc", router::ComponentKind::kService, "bus"));
  Recorder recorder(*bus_.broker, "rec", "stocks.#");
  bus_.publish("stocks.ibm", 1);

  const AdminResponse response = get("/api/components");
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(response.content_type, "application/json");
  const json components = json::parse(response.body).at("components");
  std::set<std::string> names;
  for (const json& c : components) names.insert(c.at("name").get<std::string>());
  std::set<std::string> expected;
  for (const auto& c : bus_.registry->snapshot()) expected.insert(c.name);
  EXPECT_EQ(names, expected);
  EXPECT_TRUE(names.contains("svc"));
  EXPECT_TRUE(names.contains("rec"));
  for (const json& c : components) {
    if (c.at("name") != "rec") continue;
    EXPECT_EQ(c.at("kind"), "endpoint");
    EXPECT_EQ(c.at("delivered"), 1);
  }
}

TEST_F(AdminApiTest, FindsOneComponentByItsPercentEncodedName) {
  auto entry = bus_.registry->add("amqp:c1/link", router::ComponentKind::kEndpoint, "amqp");
  ASSERT_TRUE(entry);
  (*entry)->setMetadata("address", "stocks.#");
  (*entry)->addDelivered(7);

  const AdminResponse response = get("/api/components/amqp%3Ac1%2Flink");
  ASSERT_EQ(response.status, 200) << response.body;
  const json c = json::parse(response.body);
  EXPECT_EQ(c.at("name"), "amqp:c1/link");
  EXPECT_EQ(c.at("owner"), "amqp");
  EXPECT_EQ(c.at("delivered"), 7);
  EXPECT_EQ(c.at("metadata").at("address"), "stocks.#");

  EXPECT_EQ(get("/api/components/amqp:c1/link").status, 200);
  const AdminResponse missing = get("/api/components/nobody");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(errorOf(missing).find("nobody"), std::string::npos);
  EXPECT_EQ(get("/api/components/bad%zzescape").status, 400);
}

TEST_F(AdminApiTest, ListsRoutesAndFlowsWithTheirCounters) {
  Recorder recorder(*bus_.broker, "rec", "slow.#");
  bus_.publish("slow.a", 1);
  bus_.publish("slow.b", 2);

  const json routes = json::parse(get("/api/routes").body).at("routes");
  ASSERT_EQ(routes.size(), 2u);
  bool saw_default = false;
  bool saw_slow = false;
  for (const json& r : routes) {
    if (r.at("default").get<bool>()) {
      saw_default = true;
      EXPECT_EQ(r.at("flow"), "st");
      EXPECT_EQ(r.at("published"), 0);
    } else {
      saw_slow = true;
      EXPECT_EQ(r.at("route"), "slow.#");
      EXPECT_EQ(r.at("flow"), "st2");
      EXPECT_EQ(r.at("published"), 2);
      EXPECT_EQ(r.at("delivered"), 2);
    }
  }
  EXPECT_TRUE(saw_default && saw_slow);

  const json flows = json::parse(get("/api/flows").body).at("flows");
  ASSERT_EQ(flows.size(), 2u);
  for (const json& f : flows) EXPECT_EQ(f.at("delivered"), f.at("name") == "st2" ? 2 : 0);
}

TEST_F(AdminApiTest, AnswersUnknownPathsAndMethodsWithJsonErrors) {
  const AdminResponse unknown = get("/api/nothing");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(errorOf(unknown).find("/api/nothing"), std::string::npos);

  const AdminResponse wrong = call("DELETE", "/api/components");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(wrong.allow, "GET");
  EXPECT_FALSE(errorOf(wrong).empty());

  EXPECT_EQ(call("GET", "/api/events/stocks.ibm").status, 405);
  EXPECT_EQ(call("GET", "/api/events/stocks.ibm").allow, "POST");
  // The query is not part of the path.
  EXPECT_EQ(get("/api/flows?pretty=1").status, 200);
}

TEST_F(AdminApiTest, PublishingNeedsTheBearerToken) {
  Recorder recorder(*bus_.broker, "rec", "stocks.#");
  const std::string event = R"({"type":"Stock","ts":5,"attrs":{"price":2.5}})";

  const AdminResponse anonymous = call("POST", "/api/events/stocks.ibm", "", event);
  EXPECT_EQ(anonymous.status, 401);
  EXPECT_TRUE(anonymous.bearer_challenge);
  EXPECT_EQ(call("POST", "/api/events/stocks.ibm", "Bearer s3cre", event).status, 401);
  EXPECT_EQ(call("POST", "/api/events/stocks.ibm", "Bearer s3cret!", event).status, 401);
  EXPECT_EQ(call("POST", "/api/events/stocks.ibm", "Basic s3cret", event).status, 401);
  EXPECT_TRUE(recorder.events().empty());

  const AdminResponse published = call("POST", "/api/events/stocks.ibm", "Bearer s3cret", event);
  ASSERT_EQ(published.status, 200) << published.body;
  EXPECT_EQ(json::parse(published.body).at("delivered"), 1);
  ASSERT_EQ(recorder.events().size(), 1u);
  EXPECT_EQ(recorder.events()[0]->ts(), 5);

  const AdminResponse bad_event =
      call("POST", "/api/events/stocks.ibm", "Bearer s3cret", R"({"type":"Stock"})");
  EXPECT_EQ(bad_event.status, 400);
  EXPECT_NE(errorOf(bad_event).find("bad event"), std::string::npos);
  EXPECT_EQ(call("POST", "/api/events/stocks.%2A", "Bearer s3cret", event).status, 400);
  EXPECT_EQ(recorder.events().size(), 1u);
}

TEST(AdminApiNoTokenTest, RefusesStateChangesAndSaysHowToConfigureAToken) {
  TestBroker bus;
  const std::string event = R"({"type":"Stock","ts":5})";
  AdminApi unnamed(*bus.broker, *bus.registry, "", "");
  const AdminResponse refused =
      unnamed.handle(AdminRequest{"POST", "/api/events/a", "Bearer anything", event});
  EXPECT_EQ(refused.status, 403);
  EXPECT_NE(errorOf(refused).find("token-env"), std::string::npos);

  AdminApi unset(*bus.broker, *bus.registry, "", "MY_TOKEN");
  const AdminResponse also = unset.handle(AdminRequest{"POST", "/api/events/a", "", event});
  EXPECT_EQ(also.status, 403);
  EXPECT_NE(errorOf(also).find("MY_TOKEN"), std::string::npos);
  // Reads stay open.
  EXPECT_EQ(unset.handle(AdminRequest{"GET", "/api/flows", "", ""}).status, 200);
}

TEST(PercentDecodeTest, DecodesEscapesAndRefusesBrokenOnes) {
  EXPECT_EQ(percentDecode("a%2Fb%3a"), "a/b:");
  EXPECT_EQ(percentDecode("plain"), "plain");
  EXPECT_FALSE(percentDecode("a%2"));
  EXPECT_FALSE(percentDecode("a%"));
  EXPECT_FALSE(percentDecode("%g0"));
}

}  // namespace
}  // namespace cepbus::services::http
