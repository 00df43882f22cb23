#include "services/http/admin_api.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "bus/core/wire_names.h"
#include "bus/host/descriptor/parser.h"
#include "bus/host/loader/plugin_loader.h"
#include "flows/seda_flow.h"
#include "services/cep/cep_service.h"
#include "services/cluster_member.h"
#include "services/http/prometheus.h"
#include "tests/services/http/captured_log.h"
#include "tests/services/http/test_broker.h"
#include "tests/testing/wait.h"

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
  for (const json& f : flows) {
    EXPECT_EQ(f.at("delivered"), f.at("name") == "st2" ? 2 : 0);
    EXPECT_FALSE(f.contains("journal")) << f;  // straight-through flows have none
  }
}

// The "journal" object of the flow named `name` in /api/flows; the other
// flows have none.
json journalOf(const AdminApi& api, std::string_view name) {
  const json flows =
      json::parse(api.handle(AdminRequest{"GET", "/api/flows", "", ""}).body).at("flows");
  json journal;
  for (const json& f : flows) {
    if (f.at("name") == name) {
      journal = f.at("journal");
    } else {
      EXPECT_FALSE(f.contains("journal")) << f;
    }
  }
  EXPECT_TRUE(journal.is_object()) << flows;
  return journal;
}

TEST(AdminApiJournalTest, AReliableFlowShowsItsJournal) {
  ReliableTestBroker bus;
  const AdminApi api(*bus.broker, *bus.registry, "", "");
  const json before = journalOf(api, "reliable");
  std::set<std::string> keys;
  for (const auto& [key, value] : before.items()) {
    keys.insert(key);
    EXPECT_EQ(value, 0) << key;
  }
  EXPECT_EQ(keys,
            (std::set<std::string>{"journaled", "commits", "acknowledged", "cancelled",
                                   "redelivered", "retries", "abandoned", "corrupt", "departed",
                                   "errors", "in_flight", "backlog", "held_back", "orphans"}));

  bus.publishAndSettle();
  const json running = journalOf(api, "reliable");
  EXPECT_EQ(running.at("journaled"), ReliableTestBroker::kPublished);
  EXPECT_GE(running.at("commits").get<uint64_t>(), 1u);
  EXPECT_EQ(running.at("cancelled"), 0);  // commits before it dispatches
  EXPECT_EQ(running.at("retries"), 1);
  EXPECT_EQ(running.at("abandoned"), 1);
  EXPECT_EQ(running.at("in_flight"), 1);  // the held acknowledgement
  EXPECT_EQ(running.at("backlog"), 0);
  EXPECT_EQ(running.at("held_back"), 0);
  EXPECT_EQ(running.at("redelivered"), 0);
  EXPECT_EQ(running.at("corrupt"), 0);
  EXPECT_EQ(running.at("departed"), 0);
  EXPECT_EQ(running.at("orphans"), 0);
  EXPECT_EQ(running.at("errors"), 0);

  bus.releaseHeld();
  bus.broker->stop();  // commits the last acknowledgements
  const json stopped = journalOf(api, "reliable");
  EXPECT_EQ(stopped.at("journaled"), ReliableTestBroker::kPublished);
  EXPECT_EQ(stopped.at("acknowledged"), ReliableTestBroker::kPublished - 1);  // not the abandoned
  EXPECT_EQ(stopped.at("cancelled"), 0);
  EXPECT_EQ(stopped.at("abandoned"), 1);
  EXPECT_EQ(stopped.at("in_flight"), 0);
  EXPECT_EQ(stopped.at("backlog"), 0);
}

constexpr stats::MetricSpec kAccepted = stats::MetricSpec::counter("accepted", "Accepted.");
constexpr stats::MetricSpec kCredit = stats::MetricSpec::gauge("credit", "Credit.");
constexpr stats::MetricSpec kListenerMetrics[] = {kAccepted, kCredit};
constexpr stats::Schema kListener{"listener", kListenerMetrics};

// A component's own numbers — the scopes labelled with its name — are under
// "stats", as JSON numbers, never strings.
TEST_F(AdminApiTest, AComponentsStatsAreJsonNumbers) {
  ASSERT_TRUE(bus_.registry->add("lsn", router::ComponentKind::kService));
  stats::ScopePtr scope = bus_.registry->stats().scope(kListener, {{"name", "lsn"}});
  scope->counter(kAccepted).add(6);
  scope->gauge(kCredit, [] { return 2.5; });

  const json c = json::parse(get("/api/components/lsn").body);
  ASSERT_TRUE(c.at("stats").is_object()) << c;
  EXPECT_TRUE(c.at("stats").at("accepted").is_number_integer()) << c;
  EXPECT_EQ(c.at("stats").at("accepted"), 6);
  EXPECT_EQ(c.at("stats").at("credit"), 2.5);
  EXPECT_EQ(c.at("stats").size(), 2u);  // not the component's own delivered, failed, ...
  // The same in the list; a component without such scopes has none.
  const json components = json::parse(get("/api/components").body).at("components");
  for (const json& listed : components) {
    if (listed.at("name") == "lsn") {
      EXPECT_EQ(listed.at("stats"), c.at("stats"));
    } else {
      EXPECT_EQ(listed.at("stats"), json::object()) << listed;
    }
  }
}

// Every number of /api/routes, /api/flows and /api/stages is a JSON number;
// a route's "paused" is a boolean and a stage's "pressure" a name.
TEST(AdminApiNumbersTest, RoutesFlowsAndStagesShowNumbersAsNumbers) {
  ReliableTestBroker bus;
  bus.publishAndSettle();
  const AdminApi api(*bus.broker, *bus.registry, "", "");
  auto get = [&](std::string_view target) {
    return json::parse(api.handle(AdminRequest{"GET", target, "", ""}).body);
  };
  // Each value of `object` is a number but the keys named in `not_numbers`.
  auto numbersBut = [](const json& object, const std::set<std::string>& not_numbers) {
    for (const auto& [key, value] : object.items()) {
      if (not_numbers.contains(key)) continue;
      EXPECT_TRUE(value.is_number()) << key << ": " << value;
    }
  };
  // Held in locals: a range-for over a member of a temporary reads freed memory.
  const json routes = get("/api/routes").at("routes");
  ASSERT_FALSE(routes.empty());
  for (const json& r : routes) {
    numbersBut(r, {"route", "flow", "default", "paused"});
    EXPECT_TRUE(r.at("paused").is_boolean()) << r;
  }
  const json flows = get("/api/flows").at("flows");
  ASSERT_FALSE(flows.empty());
  for (const json& f : flows) {
    numbersBut(f, {"name", "journal"});
    if (f.contains("journal")) numbersBut(f.at("journal"), {});
  }
  const json stages = get("/api/stages").at("stages");
  ASSERT_EQ(stages.size(), 1u);
  const json& stage = stages[0];
  numbersBut(stage, {"flow", "name", "pressure", "latency_ms"});
  EXPECT_EQ(stage.at("flow"), "reliable");
  EXPECT_EQ(stage.at("name"), "reliable/orders");
  EXPECT_EQ(stage.at("pressure"), "normal");
  EXPECT_EQ(stage.at("offered"), 5);
  EXPECT_EQ(stage.at("capacity"), 4096);
  numbersBut(stage.at("latency_ms"), {});
  EXPECT_EQ(stage.at("latency_ms").at("count"), 5);
  EXPECT_GE(stage.at("latency_ms").at("max").get<double>(),
            stage.at("latency_ms").at("p50").get<double>());
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

TEST_F(AdminApiTest, HealthAnswersWhileTheProcessRuns) {
  const AdminResponse health = get("/health");
  ASSERT_EQ(health.status, 200);
  EXPECT_EQ(json::parse(health.body), json({{"status", "ok"}}));
  EXPECT_EQ(call("POST", "/health").status, 405);
}

// The reasons /ready gives, one "service" or "route" name -> reason each.
std::map<std::string, std::string> notReadyOf(const AdminResponse& response) {
  std::map<std::string, std::string> out;
  const json body = json::parse(response.body);
  for (const json& part : body.value("not_ready", json::array())) {
    const std::string name = part.contains("service")
                                 ? "service " + part.at("service").get<std::string>()
                                 : "route " + part.at("route").get<std::string>();
    out[name] = part.at("state").get<std::string>() + ": " + part.at("reason").get<std::string>();
  }
  return out;
}

TEST_F(AdminApiTest, ReadyNamesEveryServiceNotStartedAndEveryPausedRoute) {
  Recorder recorder(*bus_.broker, "rec", "stocks.#");  // endpoints do not count
  AdminResponse ready = get("/ready");
  ASSERT_EQ(ready.status, 200) << ready.body;
  EXPECT_EQ(json::parse(ready.body), json({{"status", "ready"}}));

  auto starting = bus_.registry->add("svc", router::ComponentKind::kService);
  auto bridge = bus_.registry->add("bridge", router::ComponentKind::kService);
  ASSERT_TRUE(starting && bridge);
  (*bridge)->setState(router::ComponentState::kFailed, "amqp://peer: connection refused");
  ASSERT_TRUE(bus_.broker->setRoutePaused("slow.#", true));
  ready = get("/ready");
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(json::parse(ready.body).at("status"), "not ready");
  EXPECT_EQ(
      notReadyOf(ready),
      (std::map<std::string, std::string>{
          {"service svc", "registered: not started yet"},
          {"service bridge", "failed: amqp://peer: connection refused"},
          {"route slow.#", "paused: paused over the admin API; POST /api/routes/slow.#/resume"}}));

  (*starting)->setState(router::ComponentState::kStarted);
  (*bridge)->setState(router::ComponentState::kStarted);
  EXPECT_EQ(notReadyOf(get("/ready")).size(), 1u);
  ASSERT_TRUE(bus_.broker->setRoutePaused("slow.#", false));
  EXPECT_EQ(get("/ready").status, 200);
  (*starting)->setState(router::ComponentState::kStopped);
  EXPECT_EQ(notReadyOf(get("/ready")),
            (std::map<std::string, std::string>{
                {"service svc", "stopped: the bus is stopping, or the service ended"}}));
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

// A new address is a name from a client: beyond the budget of names clients
// may hold it is refused, and addresses the bus knows still work.
TEST_F(AdminApiTest, AnAddressBeyondTheWireNameBudgetIsRefusedAndKnownOnesStillWork) {
  Recorder recorder(*bus_.broker, "rec", "stocks.#");
  const std::string event = R"({"type":"Stock","ts":5,"attrs":{"price":2.5}})";
  ASSERT_EQ(call("POST", "/api/events/stocks.ibm", "Bearer s3cret", event).status, 200);

  setWireNameBudget(wireNameStats().held);  // no new name from clients from now on
  const uint64_t refused_before = wireNameStats().refused;
  const AdminResponse refused =
      call("POST", "/api/events/stocks.never-seen-before", "Bearer s3cret", event);
  const AdminResponse known = call("POST", "/api/events/stocks.ibm", "Bearer s3cret", event);
  const WireNameStats stats = wireNameStats();
  setWireNameBudget(kDefaultWireNameBudget);

  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(errorOf(refused).find("address 'stocks.never-seen-before' refused"), std::string::npos)
      << refused.body;
  EXPECT_EQ(stats.refused, refused_before + 1);
  EXPECT_EQ(known.status, 200) << known.body;
  EXPECT_EQ(recorder.events().size(), 2u);
}

// The token is one client: the address and the names only its events carry
// count against its max-names while held, and the event names come back
// when the events are gone.
TEST(AdminApiNamesTest, TheTokensEventsHoldNamesWithinItsMaxNames) {
  TestBroker bus;
  const AdminApi api(*bus.broker, *bus.registry, "s3cret", "CEPBUS_TOKEN", nullptr, nullptr, 3);
  auto post = [&](std::string_view body) {
    return api.handle(AdminRequest{"POST", "/api/events/names.a", "Bearer s3cret", body});
  };
  auto recorder = std::make_unique<Recorder>(*bus.broker, "rec", "names.#");
  // The address and two names: the token's 3.
  ASSERT_EQ(post(R"({"type":"TokenNamesT","ts":1,"attrs":{"token_a":1}})").status, 200);
  const AdminResponse refused = post(R"({"type":"TokenNamesT","ts":2,"attrs":{"token_b":1}})");
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(errorOf(refused).find("attribute name 'token_b' refused: names held per client "
                                  "(max-names): 3 reached"),
            std::string::npos)
      << refused.body;
  recorder.reset();  // the recorded event goes, and its names with it
  EXPECT_EQ(post(R"({"type":"TokenNamesT","ts":3,"attrs":{"token_b":1}})").status, 200);
}

// An address is held by its request and what the request queued, not kept:
// the token posts to ever new addresses within max-names=1, and the names
// clients hold come back to where they were.
TEST(AdminApiNamesTest, NewAddressesAreGivenBackAfterTheirRequests) {
  TestBroker bus;
  const AdminApi api(*bus.broker, *bus.registry, "s3cret", "CEPBUS_TOKEN", nullptr, nullptr, 1);
  (void)Symbol::intern("FreshAddressT");  // the event's names are the bus's: only addresses count
  const uint32_t held_before = wireNameStats().held;
  for (int i = 0; i < 50; ++i) {
    const std::string target = "/api/events/fresh.a" + std::to_string(i);
    const AdminResponse posted = api.handle(
        AdminRequest{"POST", target, "Bearer s3cret", R"({"type":"FreshAddressT","ts":1})"});
    ASSERT_EQ(posted.status, 200) << target << ": " << posted.body;
  }
  EXPECT_EQ(wireNameStats().held, held_before);
  EXPECT_TRUE(Symbol::find("fresh.a0").empty());  // never the bus's
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

// A deployer that records what it was asked and answers what it is told.
class FakeDeployer final : public Deployer {
 public:
  Status deploy(const descriptor::ServiceAssembly& assembly) override {
    deployed.push_back(assembly.name);
    if (answer.isOk()) assemblies_.push_back({assembly.name, {assembly.name + ".u"}, true});
    return answer;
  }
  Status undeploy(std::string_view assembly) override {
    undeployed.emplace_back(assembly);
    return answer;
  }
  Result<Redeployed> redeploy(const descriptor::ServiceAssembly& assembly) override {
    redeployed.push_back(assembly.name);
    if (!answer.isOk()) return answer;
    return redeploy_answer;
  }
  std::shared_ptr<Service> findService(std::string_view) const override { return nullptr; }
  std::vector<DeployedServiceInfo> deployedServices() const override {
    return {{"a.u", "a", "replay-sink", true}};
  }
  std::vector<AssemblyInfo> assemblies() const override { return assemblies_; }

  Status answer = Status::ok();
  Redeployed redeploy_answer;
  std::vector<std::string> deployed;
  std::vector<std::string> undeployed;
  std::vector<std::string> redeployed;

 private:
  std::vector<AssemblyInfo> assemblies_;
};

class AdminApiDeployTest : public ::testing::Test {
 protected:
  AdminResponse call(std::string_view method, std::string_view target, std::string_view body = {},
                     std::string_view authorization = "Bearer s3cret") const {
    return api_.handle(AdminRequest{method, target, authorization, body});
  }

  TestBroker bus_;
  FakeDeployer deployer_;
  AdminApi api_{*bus_.broker, *bus_.registry, "s3cret", "CEPBUS_TOKEN", &deployer_};
};

constexpr std::string_view kAssembly = R"(<service-assembly name="extra">
  <service-unit name="sink" type="replay-sink">
    <param name="file" value="x.jsonl"/><subscribe address="x"/>
  </service-unit>
</service-assembly>)";

TEST_F(AdminApiDeployTest, DeployParsesTheFragmentAndNeedsTheToken) {
  EXPECT_EQ(call("POST", "/api/assemblies", kAssembly, "").status, 401);
  EXPECT_EQ(call("POST", "/api/assemblies", kAssembly, "Bearer nope").status, 401);
  EXPECT_TRUE(deployer_.deployed.empty());
  const AdminResponse done = call("POST", "/api/assemblies", kAssembly);
  ASSERT_EQ(done.status, 201) << done.body;
  EXPECT_EQ(deployer_.deployed, std::vector<std::string>{"extra"});
  EXPECT_EQ(json::parse(done.body).at("deployed"), "extra");
  EXPECT_EQ(json::parse(done.body).at("services"), json::array({"extra.u"}));

  const AdminResponse bad = call("POST", "/api/assemblies",
                                 "<service-assembly name=\"b\">\n  <bogus/>\n</service-assembly>");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(errorOf(bad).find("request body:2"), std::string::npos) << bad.body;
  EXPECT_EQ(call("POST", "/api/assemblies", "").status, 400);
  EXPECT_EQ(deployer_.deployed.size(), 1u);  // a bad body never reaches the deployer

  deployer_.answer = Status::alreadyExists("extra is deployed");
  EXPECT_EQ(call("POST", "/api/assemblies", kAssembly).status, 409);
  deployer_.answer = Status::unavailable("stopping");
  const AdminResponse unavailable = call("POST", "/api/assemblies", kAssembly);
  EXPECT_EQ(unavailable.status, 503);
  EXPECT_EQ(errorOf(unavailable), "stopping");
}

TEST_F(AdminApiDeployTest, UndeployMapsTheDeployersAnswer) {
  EXPECT_EQ(call("DELETE", "/api/assemblies/extra", {}, "").status, 401);
  EXPECT_EQ(call("DELETE", "/api/assemblies/extra").status, 200);
  EXPECT_EQ(deployer_.undeployed, std::vector<std::string>{"extra"});
  deployer_.answer = Status::notFound("no assembly");
  EXPECT_EQ(call("DELETE", "/api/assemblies/a%20b").status, 404);
  EXPECT_EQ(deployer_.undeployed.back(), "a b");
  const AdminResponse wrong = call("POST", "/api/assemblies/extra");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(wrong.allow, "PUT, DELETE");
}

TEST_F(AdminApiDeployTest, RedeployAnswersWhatChangedAndNeedsAnAssemblyOfThatName) {
  EXPECT_EQ(call("PUT", "/api/assemblies/extra", kAssembly, "").status, 401);
  const AdminResponse other = call("PUT", "/api/assemblies/other", kAssembly);
  EXPECT_EQ(other.status, 400);
  EXPECT_NE(errorOf(other).find("request body:1"), std::string::npos) << other.body;
  EXPECT_EQ(call("PUT", "/api/assemblies/extra", "").status, 400);
  EXPECT_TRUE(deployer_.redeployed.empty());  // a bad body never reaches the deployer

  QueryEdit edit;
  edit.carried_over = true;
  edit.from = "PATTERN SEQ(A a, B b) WITHIN 10";
  deployer_.redeploy_answer.changed = {{"extra.cep", "q1", QueryStep::Kind::kReplace, edit},
                                       {"extra.cep", "q2", QueryStep::Kind::kAdd, std::nullopt}};
  deployer_.redeploy_answer.kept = {"extra.cep/q3"};
  const AdminResponse done = call("PUT", "/api/assemblies/extra", kAssembly);
  ASSERT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(deployer_.redeployed, std::vector<std::string>{"extra"});
  const json body = json::parse(done.body);
  EXPECT_EQ(body.at("deployed"), false);
  EXPECT_EQ(body.at("kept"), json::array({"extra.cep/q3"}));
  ASSERT_EQ(body.at("changed").size(), 2u);
  EXPECT_EQ(body.at("changed")[0].at("change"), "replaced");
  EXPECT_EQ(body.at("changed")[0].at("edit").at("carried_over"), true);
  EXPECT_EQ(body.at("changed")[1].at("change"), "added");
  EXPECT_FALSE(body.at("changed")[1].contains("edit"));

  deployer_.redeploy_answer = Redeployed{.deployed = true, .changed = {}, .kept = {}};
  EXPECT_EQ(call("PUT", "/api/assemblies/extra", kAssembly).status, 201);
  deployer_.answer = Status::rejected("unit \"sink\": its params differ");
  const AdminResponse refused = call("PUT", "/api/assemblies/extra", kAssembly);
  EXPECT_EQ(refused.status, 409);
  EXPECT_EQ(errorOf(refused), "unit \"sink\": its params differ");
}

TEST_F(AdminApiDeployTest, ListsServicesAssembliesAndPlugins) {
  auto plugin = bus_.registry->add("plugin:nfa", router::ComponentKind::kService);
  ASSERT_TRUE(plugin);
  (*plugin)->setMetadata("version", "1.0.0");
  (*plugin)->setState(router::ComponentState::kStarted);
  const json services = json::parse(call("GET", "/api/services").body);
  ASSERT_EQ(services.at("services").size(), 1u);
  EXPECT_EQ(services["services"][0].at("type"), "replay-sink");
  EXPECT_EQ(json::parse(call("GET", "/api/assemblies").body).at("assemblies"), json::array());
  const json plugins = json::parse(call("GET", "/api/plugins").body).at("plugins");
  ASSERT_EQ(plugins.size(), 1u);
  EXPECT_EQ(plugins[0].at("name"), "nfa");
  EXPECT_EQ(plugins[0].at("state"), "started");
  EXPECT_EQ(plugins[0].at("version"), "1.0.0");
  EXPECT_EQ(json::parse(call("GET", "/api/queries").body).at("queries"), json::array());
  EXPECT_EQ(json::parse(call("GET", "/api/stages").body).at("stages"), json::array());
}

TEST_F(AdminApiDeployTest, OneServiceIsTheSameObjectAsInTheList) {
  const json listed = json::parse(call("GET", "/api/services").body).at("services").at(0);
  const AdminResponse one = call("GET", "/api/services/a.u", {}, "");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(json::parse(one.body), listed);
  EXPECT_EQ(json::parse(one.body).at("name"), "a.u");
  const AdminResponse unknown = call("GET", "/api/services/b.u", {}, "");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(errorOf(unknown).find("'b.u'"), std::string::npos) << unknown.body;
  EXPECT_EQ(call("DELETE", "/api/services/a.u").status, 405);
}

TEST_F(AdminApiDeployTest, QueriesOfAnUnknownServiceAreNotFound) {
  EXPECT_EQ(call("POST", "/api/queries/no.such", "<query/>").status, 404);
  EXPECT_EQ(call("DELETE", "/api/queries/no.such/q").status, 404);
  EXPECT_EQ(call("DELETE", "/api/queries/no.such/q", {}, "").status, 401);
  EXPECT_EQ(call("GET", "/api/queries/no.such/q/model?format=json").status, 404);
  EXPECT_EQ(call("GET", "/api/queries/no.such/q/model?format=svg").status, 400);
}

TEST_F(AdminApiDeployTest, PausesAndResumesARoute) {
  Recorder recorder(*bus_.broker, "rec", "slow.#");
  EXPECT_EQ(call("POST", "/api/routes/slow.%23/pause", {}, "").status, 401);
  ASSERT_EQ(call("POST", "/api/routes/slow.%23/pause").status, 200);
  EXPECT_EQ(bus_.publish("slow.x", 1).status.code(), Status::Code::kUnavailable);
  json routes = json::parse(call("GET", "/api/routes").body).at("routes");
  EXPECT_EQ(routes[0].at("route"), "slow.#");
  EXPECT_EQ(routes[0].at("paused"), true);
  EXPECT_EQ(routes[0].at("refused_paused"), 1);
  EXPECT_EQ(routes[1].at("paused"), false);
  ASSERT_EQ(call("POST", "/api/routes/slow.%23/resume").status, 200);
  EXPECT_TRUE(bus_.publish("slow.x", 2).status.isOk());
  ASSERT_EQ(call("POST", "/api/routes/(default)/pause").status, 200);
  EXPECT_EQ(json::parse(call("GET", "/api/routes").body)["routes"][1].at("paused"), true);
  EXPECT_EQ(call("POST", "/api/routes/nope/pause").status, 404);
  EXPECT_EQ(call("GET", "/api/routes/slow.%23/pause").status, 405);
}

// Each state change is one audit line naming who and what, refused ones
// included; reads log nothing.
TEST_F(AdminApiDeployTest, EveryStateChangeIsLoggedWithWhoAndWhat) {
  CapturedLog log(kAuditLogger);
  Recorder recorder(*bus_.broker, "rec", "slow.#");
  ASSERT_EQ(call("POST", "/api/routes/slow.%23/pause").status, 200);
  ASSERT_EQ(call("POST", "/api/routes/slow.%23/resume", {}, "Bearer nope").status, 401);
  ASSERT_EQ(call("POST", "/api/assemblies", kAssembly).status, 201);
  ASSERT_EQ(call("DELETE", "/api/assemblies/extra").status, 200);
  ASSERT_EQ(call("POST", "/api/queries/no.such", "<query/>").status, 404);
  ASSERT_EQ(call("DELETE", "/api/queries/no.such/q").status, 404);
  ASSERT_EQ(call("POST", "/api/events/slow.x", R"({"type":"Stock","ts":1,"attrs":{}})").status,
            503);  // the route is paused
  call("GET", "/api/routes");
  call("GET", "/api/queries/no.such/q");
  EXPECT_EQ(log.lines(),
            (std::vector<std::string>{
                "POST /api/routes/slow.%23/pause by CEPBUS_TOKEN: 200",
                "POST /api/routes/slow.%23/resume by anonymous: 401 (this request needs "
                "Authorization: Bearer <token>)",
                "POST /api/assemblies by CEPBUS_TOKEN: 201",
                "DELETE /api/assemblies/extra by CEPBUS_TOKEN: 200",
                "POST /api/queries/no.such by CEPBUS_TOKEN: 404 (no running CEP service unit "
                "named 'no.such')",
                "DELETE /api/queries/no.such/q by CEPBUS_TOKEN: 404 (no running CEP service unit "
                "named 'no.such')",
                "POST /api/events/slow.x by CEPBUS_TOKEN: 503 (route for 'slow.x' is paused; retry "
                "later)",
            }));
}

TEST(AdminApiAuditTest, WithoutATokenTheRefusedChangeIsAnonymous) {
  CapturedLog log(kAuditLogger);
  TestBroker bus;
  AdminApi api(*bus.broker, *bus.registry, "", "");
  EXPECT_EQ(api.handle(AdminRequest{"POST", "/api/routes/(default)/pause", "", ""}).status, 403);
  const std::vector<std::string> lines = log.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].starts_with("POST /api/routes/(default)/pause by anonymous: 403 ("))
      << lines[0];
}

TEST_F(AdminApiDeployTest, WithoutADeployerDeploymentIsUnavailable) {
  AdminApi alone{*bus_.broker, *bus_.registry, "s3cret", "CEPBUS_TOKEN"};
  const AdminResponse r =
      alone.handle(AdminRequest{"POST", "/api/assemblies", "Bearer s3cret", kAssembly});
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(alone.handle(AdminRequest{"GET", "/api/services", {}, {}}).status, 503);
}

// The index tells the truth: a GET of each resource it lists whose path has
// no parameter (no "{name}" part) answers 200, and the main resources are
// all in it.
TEST_F(AdminApiDeployTest, TheApiIndexListsWhatIsServed) {
  const AdminResponse index = call("GET", "/api/", {}, "");
  ASSERT_EQ(index.status, 200) << index.body;
  EXPECT_EQ(json::parse(call("GET", "/api", {}, "").body), json::parse(index.body));
  EXPECT_EQ(call("POST", "/api/").status, 405);
  std::set<std::string> paths;
  const json listed = json::parse(index.body);
  for (const json& r : listed.at("resources")) {
    const std::string path = r.at("path").get<std::string>();
    paths.insert(path);
    EXPECT_FALSE(r.at("description").get<std::string>().empty()) << path;
    ASSERT_FALSE(r.at("methods").empty()) << path;
    if (path.find('{') != std::string::npos) continue;
    for (const json& method : r.at("methods")) {
      if (method != "GET") continue;
      const AdminResponse answer = call("GET", path, {}, "");
      EXPECT_EQ(answer.status, 200) << path << ": " << answer.body;
    }
  }
  for (const char* served : {"/health", "/ready", "/metrics", "/api/components", "/api/queries",
                             "/api/routes", "/api/routes/{pattern}/pause", "/api/assemblies",
                             "/api/events/{address}", "/api/plugins"}) {
    EXPECT_TRUE(paths.contains(served)) << served;
  }
}

// A cluster node as the admin API sees it: a service that is a ClusterMember.
class FakeClusterNode final : public Service, private ClusterMember {
 public:
  const std::string& name() const override { return name_; }
  Status start() override { return Status::ok(); }
  void stop() override {}
  const ClusterMember* clusterMember() const override { return this; }

  ClusterStats stats;

 private:
  const std::string& clusterName() const override { return cluster_; }
  std::string componentName() const override { return "cluster:trades/n1"; }
  ClusterStats clusterStats() const override { return stats; }

  std::string name_ = "n1";
  std::string cluster_ = "trades";
};

class OneClusterNodeDeployer final : public Deployer {
 public:
  Status deploy(const descriptor::ServiceAssembly&) override { return Status::ok(); }
  Status undeploy(std::string_view) override { return Status::ok(); }
  Result<Redeployed> redeploy(const descriptor::ServiceAssembly&) override { return Redeployed{}; }
  std::shared_ptr<Service> findService(std::string_view name) const override {
    return name == node->name() ? node : nullptr;
  }
  std::vector<DeployedServiceInfo> deployedServices() const override {
    return {{"a.u", "a", "replay-sink", true}, {node->name(), "", "cluster-node", false}};
  }
  std::vector<AssemblyInfo> assemblies() const override { return {}; }

  std::shared_ptr<FakeClusterNode> node = std::make_shared<FakeClusterNode>();
};

TEST_F(AdminApiDeployTest, TheClusterListsEachNodeAsItReportsItself) {
  OneClusterNodeDeployer deployer;
  deployer.node->stats.node = "n1";
  deployer.node->stats.received = 12;
  deployer.node->stats.partitions.push_back({});
  deployer.node->stats.partitions.back().role = "active";
  auto entry = bus_.registry->add("cluster:trades/n1", router::ComponentKind::kService);
  ASSERT_TRUE(entry);
  (*entry)->setState(router::ComponentState::kStarted);
  AdminApi api{*bus_.broker, *bus_.registry, "s3cret", "CEPBUS_TOKEN", &deployer};

  const AdminResponse r = api.handle(AdminRequest{"GET", "/api/cluster", {}, {}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json nodes = json::parse(r.body).at("nodes");
  ASSERT_EQ(nodes.size(), 1u);  // the replay sink is no cluster node
  EXPECT_EQ(nodes[0].at("cluster"), "trades");
  EXPECT_EQ(nodes[0].at("node"), "n1");
  EXPECT_EQ(nodes[0].at("state"), "started");
  EXPECT_EQ(nodes[0].at("received"), 12);  // a number, not a string
  EXPECT_EQ(nodes[0].at("partitions")[0].at("role"), "active");
}

TEST_F(AdminApiDeployTest, ServesTheDashboard) {
  const AdminResponse page = call("GET", "/");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("<title>cepbus dashboard</title>"), std::string::npos);
  EXPECT_NE(page.body.find("/dashboard.js"), std::string::npos);
  // The query table has the event-time columns (the e2e test reads them).
  EXPECT_NE(page.body.find(">late</th>"), std::string::npos);
  EXPECT_NE(page.body.find(">watermark</th>"), std::string::npos);
  const AdminResponse js = call("GET", "/dashboard.js");
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(js.body.find("/api/queries"), std::string::npos);
  const AdminResponse css = call("GET", "/dashboard.css");
  EXPECT_EQ(css.content_type, "text/css; charset=utf-8");
  // A query with late events is flagged as the other problems are.
  EXPECT_NE(css.body.find(".badge.late"), std::string::npos);
  EXPECT_EQ(call("POST", "/").status, 405);
}

// A deployer with one real CEP service, whose queries run the build's plugins.
class OneCepServiceDeployer final : public Deployer {
 public:
  explicit OneCepServiceDeployer(TestBroker& bus)
      : loader_({CEPBUS_TEST_BUILD_DIR "/plugins"}),
        context_{*bus.broker, *bus.registry, loader_} {}

  Status deployCep(std::string_view xml) {
    auto assembly = descriptor::parseServiceAssembly(xml, "cep.xml");
    if (!assembly) return assembly.status();
    auto made = cep::CepServiceFactory().create(*assembly, assembly->units.at(0), context_);
    if (!made) return made.status();
    service_ = std::shared_ptr<Service>(std::move(*made));
    return service_->start();
  }
  ~OneCepServiceDeployer() override {
    if (service_) service_->stop();
  }

  Status deploy(const descriptor::ServiceAssembly&) override { return Status::ok(); }
  Status undeploy(std::string_view) override { return Status::ok(); }
  Result<Redeployed> redeploy(const descriptor::ServiceAssembly&) override { return Redeployed{}; }
  std::shared_ptr<Service> findService(std::string_view name) const override {
    return service_ && service_->name() == name ? service_ : nullptr;
  }
  std::vector<DeployedServiceInfo> deployedServices() const override {
    if (!service_) return {};
    return {{service_->name(), "a", "cep", false}};
  }
  std::vector<AssemblyInfo> assemblies() const override { return {}; }
  plugin::PluginLoader& loader() { return loader_; }

 private:
  plugin::PluginLoader loader_;
  ServiceContext context_;
  std::shared_ptr<Service> service_;
};

TEST(AdminApiQueriesTest, AnAutoQueryShowsTheEngineChosenAndWhy) {
  TestBroker bus;
  OneCepServiceDeployer deployer(bus);
  ASSERT_TRUE(deployer.deployCep(R"(<service-assembly name="a">
  <service-unit name="cep" type="cep">
    <query name="seq" engine="auto" input="in" output="out.seq">
      <text>PATTERN SEQ(A a, B b) WITHIN 5</text>
    </query>
    <query name="recent" engine="auto" input="in" output="out.recent">
      <text>PATTERN SEQ(A a, B b) WITHIN 5 CONTEXT recent</text>
    </query>
    <query name="named" engine="nfa" input="in" output="out.named">
      <text>PATTERN SEQ(A a, B b) WITHIN 5</text>
    </query>
  </service-unit>
</service-assembly>)"));
  AdminApi api(*bus.broker, *bus.registry, "s3cret", "CEPBUS_TOKEN", &deployer);
  const AdminResponse listed = api.handle(AdminRequest{"GET", "/api/queries", "", ""});
  ASSERT_EQ(listed.status, 200);
  std::map<std::string, json> by_name;
  const json body = json::parse(listed.body);
  for (const json& q : body.at("queries")) by_name[q.at("name").get<std::string>()] = q;
  ASSERT_EQ(by_name.size(), 3u) << listed.body;

  EXPECT_EQ(by_name["seq"].at("engine"), "nfa");
  EXPECT_EQ(by_name["seq"]
                .at("engine_choice")
                .get<std::string>()
                .rfind("auto: 1 pattern with no filter on its first variable, one NFA", 0),
            0u)
      << by_name["seq"];
  // nfa and petri refuse CONTEXT recent; the reason says so.
  EXPECT_EQ(by_name["recent"].at("engine"), "algebra");
  const std::string why = by_name["recent"].at("engine_choice");
  EXPECT_NE(why.find("nfa refuses: "), std::string::npos) << why;
  EXPECT_NE(why.find("petri refuses: "), std::string::npos) << why;
  EXPECT_TRUE(why.ends_with("; algebra runs it")) << why;
  // A query that names its engine has no choice to explain.
  EXPECT_EQ(by_name["named"].at("engine"), "nfa");
  EXPECT_FALSE(by_name["named"].contains("engine_choice")) << by_name["named"];
  // Nothing refused, nothing held for a reliable output.
  EXPECT_EQ(by_name["named"].at("output_held"), 0) << by_name["named"];
}

TEST(AdminApiQueriesTest, EachQueryShowsThePartialMatchesItsDetectorHolds) {
  TestBroker bus;
  OneCepServiceDeployer deployer(bus);
  ASSERT_TRUE(deployer.deployCep(R"(<service-assembly name="a">
  <service-unit name="cep" type="cep">
    <query name="seq" engine="nfa" input="in" output="out.seq">
      <text>PATTERN SEQ(A a, B b) WITHIN 50</text>
    </query>
    <query name="join" engine="join" input="in" output="out.join">
      <text>PATTERN AND(A a, B b) WHERE a.x = b.x WITHIN 50</text>
    </query>
    <query name="capped" engine="nfa" input="in" output="out.capped">
      <text>PATTERN SEQ(A a, B b) WITHIN 50</text>
      <option name="max_partial_matches" value="1"/>
    </query>
  </service-unit>
</service-assembly>)"));
  for (Timestamp ts : {1, 2}) {
    flows::Exchange exchange;
    exchange.event = EventBuilder("A").at(ts).set("x", Value(int64_t{1})).build();
    exchange.address = Symbol::intern("in");
    bus.broker->publish(exchange);
  }
  AdminApi api(*bus.broker, *bus.registry, "s3cret", "CEPBUS_TOKEN", &deployer);
  std::map<std::string, json> by_name;
  const bool consumed = testing::waitUntil([&] {
    const json body = json::parse(api.handle(AdminRequest{"GET", "/api/queries", "", ""}).body);
    for (const json& q : body.at("queries")) by_name[q.at("name").get<std::string>()] = q;
    // Consumed counts what the endpoint took; queued what its detector has
    // still to run: wait until every event is through.
    for (const char* name : {"seq", "join", "capped"}) {
      if (by_name[name].value("consumed", 0) != 2 || by_name[name].value("queued", 1) != 0) {
        return false;
      }
    }
    return true;
  });
  ASSERT_TRUE(consumed) << by_name["seq"] << by_name["join"] << by_name["capped"];
  // The nfa holds both A events for a B.
  EXPECT_EQ(by_name["seq"].at("partial_matches"), 2) << by_name["seq"];
  EXPECT_EQ(by_name["seq"].at("partial_matches_peak"), 2) << by_name["seq"];
  EXPECT_EQ(by_name["seq"].at("state_evictions"), 0) << by_name["seq"];
  EXPECT_GT(by_name["seq"].at("state_bytes").get<uint64_t>(), 0u) << by_name["seq"];
  // Capped at one, it dropped the older A for the newer.
  EXPECT_EQ(by_name["capped"].at("partial_matches"), 1) << by_name["capped"];
  EXPECT_EQ(by_name["capped"].at("state_evictions"), 1) << by_name["capped"];
  EXPECT_EQ(by_name["capped"].at("state_bytes").get<uint64_t>() * 2,
            by_name["seq"].at("state_bytes").get<uint64_t>());
  // The join engine does not count: null, not 0.
  EXPECT_TRUE(by_name["join"].at("partial_matches").is_null()) << by_name["join"];
  EXPECT_TRUE(by_name["join"].at("partial_matches_peak").is_null()) << by_name["join"];
  EXPECT_TRUE(by_name["join"].at("state_evictions").is_null()) << by_name["join"];

  // The query's entry has them as numbers under "stats", not as metadata strings.
  const AdminResponse seq =
      api.handle(AdminRequest{"GET", "/api/components/a.cep%2Fseq%3Adetector", "", ""});
  ASSERT_EQ(seq.status, 200) << seq.body;
  const json entry = json::parse(seq.body);
  EXPECT_EQ(entry.at("stats").at("partial_matches"), 2) << entry;
  EXPECT_EQ(entry.at("stats").at("matches"), 0) << entry;
  EXPECT_FALSE(entry.at("metadata").contains("partial_matches")) << entry;
  EXPECT_FALSE(entry.at("metadata").contains("matches")) << entry;
  // The detection's numbers under its endpoint's entry.
  const AdminResponse endpoint =
      api.handle(AdminRequest{"GET", "/api/components/a.cep%2Fseq", "", ""});
  ASSERT_EQ(endpoint.status, 200) << endpoint.body;
  EXPECT_EQ(json::parse(endpoint.body).at("stats").at("consumed"), 2) << endpoint.body;
  // And on /metrics, with the labels they had.
  const std::string metrics = renderMetrics(*bus.registry);
  EXPECT_NE(metrics.find("cepbus_query_partial_matches{name=\"a.cep/seq:detector\"} 2\n"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(metrics.find("cepbus_query_partial_matches{name=\"a.cep/join:detector\"}"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("cepbus_cep_detection_consumed_total{name=\"a.cep/join\"} 2\n"),
            std::string::npos)
      << metrics;
}

// A window query's memory: the open panes (partial_matches), the groups
// against the cap the descriptor sets, the events that cap refused and the
// values its numeric aggregates skipped, in /api/queries and /metrics.
TEST(AdminApiQueriesTest, AWindowQueryShowsItsGroupsAndWhatItsCapRefused) {
  TestBroker bus;
  OneCepServiceDeployer deployer(bus);
  ASSERT_TRUE(deployer.deployCep(R"(<service-assembly name="a">
  <service-unit name="cep" type="cep">
    <query name="avg" engine="window" input="in" output="out.avg">
      <text>FROM T t WINDOW TUMBLING 100 GROUP BY t.g RETURN R(t.g AS g, avg(t.v) AS mean)</text>
      <option name="max_groups" value="2"/>
    </query>
  </service-unit>
</service-assembly>)"));
  // Groups 1 and 2 fill the cap; 3 is refused; one value of 2 is no number.
  const std::pair<int64_t, Value> events[] = {
      {1, Value(int64_t{5})}, {2, Value("n/a")}, {3, Value(int64_t{7})}, {2, Value(int64_t{1})}};
  Timestamp ts = 0;
  for (const auto& [g, v] : events) {
    flows::Exchange exchange;
    exchange.event = EventBuilder("T").at(++ts).set("g", Value(g)).set("v", v).build();
    exchange.address = Symbol::intern("in");
    bus.broker->publish(exchange);
  }
  AdminApi api(*bus.broker, *bus.registry, "s3cret", "CEPBUS_TOKEN", &deployer);
  json avg;
  const bool consumed = testing::waitUntil([&] {
    const json body = json::parse(api.handle(AdminRequest{"GET", "/api/queries", "", ""}).body);
    avg = body.at("queries").at(0);
    // The counters are read only when the detector is free (a tick may hold
    // it): wait for them as well as for every event to be through.
    return avg.value("consumed", 0) == 4 && avg.value("queued", 1) == 0 &&
           avg.contains("engine_counters");
  });
  ASSERT_TRUE(consumed) << avg;
  EXPECT_EQ(avg.at("partial_matches"), 2) << avg;  // one open pane per group
  const json& counters = avg.at("engine_counters");
  EXPECT_EQ(counters.at("groups"), 2) << avg;
  EXPECT_EQ(counters.at("max_groups"), 2) << avg;
  EXPECT_EQ(counters.at("refused_events"), 1) << avg;
  EXPECT_EQ(counters.at("non_numeric"), 1) << avg;

  const std::string metrics = renderMetrics(*bus.registry);
  for (const char* sample : {"cepbus_query_groups{name=\"a.cep/avg:detector\"} 2\n",
                             "cepbus_query_max_groups{name=\"a.cep/avg:detector\"} 2\n",
                             "cepbus_query_refused_events_total{name=\"a.cep/avg:detector\"} 1\n",
                             "cepbus_query_non_numeric_total{name=\"a.cep/avg:detector\"} 1\n"}) {
    EXPECT_NE(metrics.find(sample), std::string::npos) << sample << metrics;
  }
}

// Output control's suppressed matches are the query's own count, beside its
// matches.
TEST(AdminApiQueriesTest, AQueryShowsTheMatchesItsOutputControlSuppressed) {
  TestBroker bus;
  OneCepServiceDeployer deployer(bus);
  ASSERT_TRUE(deployer.deployCep(R"(<service-assembly name="a">
  <service-unit name="cep" type="cep">
    <query name="first" engine="nfa" input="in" output="out.first">
      <text>PATTERN Stock s WHERE s.price &gt; 0 EMIT FIRST EVERY 100</text>
    </query>
  </service-unit>
</service-assembly>)"));
  // Five matches within 100 of the first: one passes, four are suppressed;
  // the one at 200 passes once time moves past it.
  for (int i = 1; i <= 5; ++i) bus.publish("in", i, i);
  bus.publish("in", 200, 1);
  bus.publish("in", 300, 1);
  AdminApi api(*bus.broker, *bus.registry, "s3cret", "CEPBUS_TOKEN", &deployer);
  json first;
  const bool counted = testing::waitUntil([&] {
    const json body = json::parse(api.handle(AdminRequest{"GET", "/api/queries", "", ""}).body);
    first = body.at("queries").at(0);
    return first.value("suppressed", 0) == 4 && first.value("matches", 0) >= 2;
  });
  ASSERT_TRUE(counted) << first;
  const std::string metrics = renderMetrics(*bus.registry);
  const std::string sample = "cepbus_query_suppressed_total{name=\"a.cep/first:detector\"} 4\n";
  EXPECT_NE(metrics.find(sample), std::string::npos) << metrics;
}

// One CEP unit "a.cep" with two petri queries sharing a detector.
constexpr std::string_view kRisingAndDear = R"(<service-assembly name="a">
  <service-unit name="cep" type="cep">
    <query name="rising" engine="petri" input="in" output="out.rising">
      <text>PATTERN SEQ(Stock a, Stock b) WHERE a.price &lt; b.price WITHIN 10</text>
    </query>
    <query name="dear" engine="petri" input="in" output="out.dear">
      <text>PATTERN Stock s WHERE s.price &gt; 2.5</text>
    </query>
  </service-unit>
</service-assembly>)";

// Queries sharing a detector still count their matches apart.
TEST(AdminApiQueriesTest, QueriesSharingADetectorShowTheirOwnMatches) {
  TestBroker bus;
  OneCepServiceDeployer deployer(bus);
  ASSERT_TRUE(deployer.deployCep(kRisingAndDear));
  for (int i = 1; i <= 3; ++i) bus.publish("in", i, i);
  AdminApi api(*bus.broker, *bus.registry, "s3cret", "CEPBUS_TOKEN", &deployer);
  std::map<std::string, json> by_name;
  ASSERT_TRUE(cepbus::testing::waitUntil([&] {
    const json body = json::parse(api.handle(AdminRequest{"GET", "/api/queries", "", ""}).body);
    for (const json& q : body.at("queries")) by_name[q.at("name").get<std::string>()] = q;
    // A query's matches are counted after its events are: wait for both.
    return by_name.size() == 2 && by_name["rising"].at("consumed") == 3 &&
           by_name["dear"].at("consumed") == 3 && by_name["rising"].at("matches") == 3 &&
           by_name["dear"].at("matches") == 1;
  })) << by_name["rising"]
      << by_name["dear"];
  EXPECT_EQ(by_name["rising"].at("matches"), 3) << by_name["rising"];
  EXPECT_EQ(by_name["dear"].at("matches"), 1) << by_name["dear"];
  for (const char* q : {"rising", "dear"}) {
    EXPECT_EQ(by_name[q].at("engine"), "petri") << by_name[q];
    EXPECT_EQ(by_name[q].at("shared_by"), "2") << by_name[q];
    EXPECT_EQ(by_name[q].at("endpoint"), "a.cep/shared-1:rising..dear") << by_name[q];
  }
}

// One CEP unit "a.cep" with one petri query "dear", which loads the petri
// plugin on demand.
constexpr std::string_view kOneDearQuery = R"(<service-assembly name="a">
  <service-unit name="cep" type="cep">
    <query name="dear" engine="petri" input="in" output="out.dear">
      <text>PATTERN Stock s WHERE s.price &gt; 2.5</text>
    </query>
  </service-unit>
</service-assembly>)";

// GET of one query answers the object /api/queries lists for it, by
// service and name or by name alone; an unknown one is a 404 naming it.
TEST(AdminApiQueriesTest, OneQueryIsTheSameObjectAsInTheList) {
  TestBroker bus;
  OneCepServiceDeployer deployer(bus);
  ASSERT_TRUE(deployer.deployCep(kOneDearQuery));
  for (int i = 1; i <= 3; ++i) bus.publish("in", i, i);
  AdminApi api(*bus.broker, *bus.registry, "s3cret", "CEPBUS_TOKEN", &deployer);
  const auto get = [&](std::string_view target) {
    return api.handle(AdminRequest{"GET", target, "", ""});
  };
  json listed;
  ASSERT_TRUE(cepbus::testing::waitUntil([&] {
    const json body = json::parse(get("/api/queries").body);
    listed = body.at("queries").at(0);
    return listed.at("consumed") == 3 && listed.at("queued") == 0;
  }));
  EXPECT_EQ(listed.at("missing_attribute"), 0);  // every Stock had its price
  EXPECT_EQ(listed.at("late"), 0);
  EXPECT_EQ(listed.at("watermark"), 3);  // the newest ts, no max_delay
  const AdminResponse one = get("/api/queries/a.cep/dear");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(json::parse(one.body), listed);
  EXPECT_EQ(json::parse(get("/api/queries/dear").body), listed);

  const AdminResponse unknown = get("/api/queries/a.cep/cheap");
  EXPECT_EQ(unknown.status, 404);
  EXPECT_NE(errorOf(unknown).find("'cheap'"), std::string::npos) << unknown.body;
  EXPECT_NE(errorOf(get("/api/queries/cheap")).find("'cheap'"), std::string::npos);
  EXPECT_EQ(get("/api/queries/no.such/dear").status, 404);
  EXPECT_EQ(api.handle(AdminRequest{"PATCH", "/api/queries/a.cep/dear", "", ""}).allow,
            "GET, PUT, DELETE");
}

// A PUT replaces the query by an edit of it and says what it carried over;
// the query's object shows the edit from then on. The petri engine does
// not hand its state over: the edited query starts empty, and says why.
TEST(AdminApiQueriesTest, APutReplacesTheQueryAndTheListShowsTheEdit) {
  TestBroker bus;
  OneCepServiceDeployer deployer(bus);
  ASSERT_TRUE(deployer.deployCep(kOneDearQuery));
  AdminApi api(*bus.broker, *bus.registry, "s3cret", "CEPBUS_TOKEN", &deployer);
  const std::string edited =
      "<query name=\"dear\" engine=\"petri\" input=\"in\" output=\"out.dear\">\n"
      "  <text>PATTERN Stock s WHERE s.price &gt; 1.5</text>\n</query>";
  const auto put = [&](std::string_view target, std::string_view body) {
    return api.handle(AdminRequest{"PUT", target, "Bearer s3cret", body});
  };
  EXPECT_EQ(api.handle(AdminRequest{"PUT", "/api/queries/a.cep/dear", "", edited}).status, 401);
  const AdminResponse done = put("/api/queries/a.cep/dear", edited);
  ASSERT_EQ(done.status, 200) << done.body;
  const json answer = json::parse(done.body);
  EXPECT_EQ(answer.at("carried_over"), false) << answer;
  EXPECT_NE(answer.at("why_not").get<std::string>().find("engine 'petri'"), std::string::npos)
      << answer;
  EXPECT_EQ(answer.at("from"), "PATTERN Stock s WHERE s.price > 2.5");
  const json one =
      json::parse(api.handle(AdminRequest{"GET", "/api/queries/a.cep/dear", "", ""}).body);
  EXPECT_EQ(one.at("edited"), json({{"at", answer.at("at")},
                                    {"carried_over", false},
                                    {"why_not", answer.at("why_not")},
                                    {"from", "PATTERN Stock s WHERE s.price > 2.5"}}))
      << one;
  EXPECT_EQ(one.at("text"), "PATTERN Stock s WHERE s.price > 1.5");
  // An unknown query (the body names it), a body naming another query.
  std::string cheap = edited;
  cheap.replace(cheap.find("dear"), 4, "cheap");
  EXPECT_EQ(put("/api/queries/a.cep/cheap", cheap).status, 404);
  EXPECT_EQ(put("/api/queries/a.cep/dear", cheap).status, 400);
  EXPECT_EQ(put("/api/queries/no.such/dear", edited).status, 404);
  EXPECT_EQ(put("/api/queries/a.cep/dear", "").status, 400);
}

// A query sharing its detector cannot be replaced in place: 409, saying why.
TEST(AdminApiQueriesTest, APutOfAQuerySharingItsDetectorIsAConflict) {
  TestBroker bus;
  OneCepServiceDeployer deployer(bus);
  ASSERT_TRUE(deployer.deployCep(kRisingAndDear));
  AdminApi api(*bus.broker, *bus.registry, "s3cret", "CEPBUS_TOKEN", &deployer);
  const AdminResponse refused = api.handle(
      AdminRequest{"PUT", "/api/queries/a.cep/dear", "Bearer s3cret",
                   "<query name=\"dear\" engine=\"petri\" input=\"in\" output=\"out.dear\">"
                   "<text>PATTERN Stock s WHERE s.price &gt; 1.5</text></query>"});
  EXPECT_EQ(refused.status, 409) << refused.body;
  EXPECT_NE(refused.body.find("shares its detector with other queries"), std::string::npos)
      << refused.body;
}

// A plugin a query's engine loaded after start-up is listed, marked
// on_demand; one the descriptor named (its registry entry) is listed once.
TEST(AdminApiPluginsTest, ListsPluginsLoadedOnDemand) {
  TestBroker bus;
  OneCepServiceDeployer deployer(bus);
  Result<plugin::PluginPtr> nfa = deployer.loader().load("nfa");
  ASSERT_TRUE(nfa) << nfa.status().message();
  auto entry = bus.registry->add("plugin:nfa", router::ComponentKind::kService);
  ASSERT_TRUE(entry);
  (*entry)->setMetadata("path", (*nfa)->path());
  (*entry)->setState(router::ComponentState::kStarted);
  AdminApi api(*bus.broker, *bus.registry, "s3cret", "CEPBUS_TOKEN", &deployer, &deployer.loader());
  const auto plugins = [&] {
    std::map<std::string, json> out;
    const json body = json::parse(api.handle(AdminRequest{"GET", "/api/plugins", "", ""}).body);
    for (const json& p : body.at("plugins")) out[p.at("name").get<std::string>()] = p;
    return out;
  };
  EXPECT_EQ(plugins().size(), 1u);

  ASSERT_TRUE(deployer.deployCep(kOneDearQuery));
  const std::map<std::string, json> listed = plugins();
  ASSERT_EQ(listed.size(), 2u) << json(listed);
  EXPECT_EQ(listed.at("nfa").at("on_demand"), false);
  const json& petri = listed.at("petri");
  EXPECT_EQ(petri.at("on_demand"), true);
  EXPECT_EQ(petri.at("state"), "started");
  EXPECT_NE(petri.at("path").get<std::string>().find("libcepbus_plugin_petri.so"),
            std::string::npos);
  EXPECT_NE(petri.at("engines").get<std::string>().find("petri"), std::string::npos);
  EXPECT_FALSE(petri.at("version").get<std::string>().empty());
}

// A route through a SEDA flow shows what waits in the flow's stages now:
// N while its endpoint is held, 0 once everything drained; "enqueued" keeps
// the total. (It showed the total as "queued" after everything drained.)
TEST(AdminApiRoutesTest, ARouteShowsNothingQueuedOnceDrained) {
  auto registry = std::make_shared<router::Registry>();
  auto policy = std::make_unique<router::DeliveryPolicy>("st");
  ASSERT_TRUE(policy->addFlow(std::make_unique<flows::StFlow>("st", registry->stats())));
  flows::SedaFlowConfig seda;
  seda.name = "seda";
  seda.stats = registry->stats();
  ASSERT_TRUE(policy->addFlow(std::make_unique<flows::SedaFlow>(std::move(seda))));
  ASSERT_TRUE(policy->addRoute(router::RouteRule{"ticks.#", "seda"}));
  router::Broker broker(std::move(policy), registry);
  ASSERT_TRUE(broker.start());
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> got{0};
  ASSERT_TRUE(broker.addEndpoint("slow", [&](const flows::Exchange&, flows::DeliveryContext&) {
    released.wait();
    ++got;
    return Status::ok();
  }));
  ASSERT_TRUE(broker.subscribe("slow", "ticks.#"));
  constexpr int kEvents = 5;
  for (int i = 0; i < kEvents; ++i) {
    ASSERT_EQ(broker.publish(stockExchange("ticks.x", i, 1.0)).queued, 1u);
  }
  const AdminApi api(broker, *registry, "", "");
  const auto ticks = [&] {
    const json body = json::parse(api.handle(AdminRequest{"GET", "/api/routes", "", ""}).body);
    for (const json& r : body.at("routes")) {
      if (r.at("route") == "ticks.#") return r;
    }
    return json();
  };
  // Queued, or taken off the queue by the held worker: not delivered yet.
  EXPECT_EQ(ticks().at("queued"), kEvents) << ticks();
  release.set_value();
  ASSERT_TRUE(cepbus::testing::waitUntil([&] { return got == kEvents; }));
  ASSERT_TRUE(cepbus::testing::waitUntil([&] { return ticks().at("queued") == 0; })) << ticks();
  EXPECT_EQ(ticks().at("enqueued"), kEvents);
  EXPECT_EQ(ticks().at("delivered"), 0);  // none finished before publish returned
  (void)broker.removeEndpoint("slow");
  broker.stop();
}

}  // namespace
}  // namespace cepbus::services::http
