#include "bus/app/bus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "bus/core/event_json.h"
#include "bus/host/descriptor/parser.h"
#include "flows/source_ends.h"
#include "services/http/http_listener_config.h"
#include "services/protocols/amqp/listener_config.h"
#include "tests/testing/stats.h"
#include "tests/testing/wait.h"

namespace cepbus::app {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class BusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("cepbus-bus-" + std::to_string(rd()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result<std::unique_ptr<Bus>> build(const std::string& xml) {
    auto d =
        descriptor::parseDescriptorString(xml, "test.xml", nullptr, dir_, &builtinElementParsers());
    if (!d) return d.status();
    return Bus::create(*d);
  }

  void writeEvents(const std::string& name, int n) {
    std::ofstream out(dir_ / name);
    for (int i = 1; i <= n; ++i) {
      out << R"({"type":"T","ts":)" << i << R"(,"attrs":{"i":)" << i << "}}\n";
    }
  }

  size_t lineCount(const std::string& name) {
    std::ifstream in(dir_ / name);
    size_t n = 0;
    for (std::string l; std::getline(in, l);) n += !l.empty();
    return n;
  }

  static ::testing::AssertionResult drained(Bus& bus) {
    return cepbus::testing::eventually("the bus to drain", [&] { return bus.drained(); });
  }

  fs::path dir_;
};

TEST_F(BusTest, UnknownServiceTypeNamesTheUnitAndLine) {
  auto bus = build(R"(<cepbus name="t">
  <service-assembly name="a">
    <service-unit name="u" type="teleporter"/>
  </service-assembly>
</cepbus>)");
  ASSERT_FALSE(bus.isOk());
  EXPECT_THAT(bus.status().message(), HasSubstr("test.xml:3:"));
  EXPECT_THAT(bus.status().message(), HasSubstr("unknown type \"teleporter\""));
  EXPECT_THAT(bus.status().message(), HasSubstr("replay-sink"));  // lists the known types
}

TEST_F(BusTest, CollectsEveryServiceErrorNotOnlyTheFirst) {
  auto bus = build(R"(<cepbus name="t">
  <service-assembly name="a">
    <service-unit name="u1" type="replay-source">
      <publish address="x"/>
    </service-unit>
    <service-unit name="u2" type="replay-sink">
      <param name="file" value="o"/>
      <param name="colour" value="red"/>
      <subscribe address="x"/>
    </service-unit>
  </service-assembly>
</cepbus>)");
  ASSERT_FALSE(bus.isOk());
  EXPECT_THAT(bus.status().message(), HasSubstr("test.xml:3:"));
  EXPECT_THAT(bus.status().message(), HasSubstr("test.xml:8:"));
  EXPECT_THAT(bus.status().message(), HasSubstr("colour"));
}

TEST_F(BusTest, MissingPluginIsAClearError) {
  auto bus = build(R"(<cepbus name="t">
  <plugins><plugin name="nonexistent"/></plugins>
</cepbus>)");
  ASSERT_FALSE(bus.isOk());
  EXPECT_THAT(bus.status().message(), HasSubstr("test.xml:2:"));
  EXPECT_THAT(bus.status().message(), HasSubstr("nonexistent"));
}

TEST_F(BusTest, AQueryNamingWhatTheSchemasDoNotDeclareIsAStartUpError) {
  const std::string query = R"(
  <service-assembly name="a">
    <service-unit name="cep" type="cep">
      <query name="rise" engine="nfa" input="x" output="y">
        <text>PATTERN SEQ(Stock a, Stock b) WHERE b.prize > a.price</text>
      </query>
    </service-unit>
  </service-assembly>)";
  const std::string schemas = R"(
  <schemas><event type="Stock"><attribute name="price"/></event></schemas>)";
  auto bus = build("<cepbus name=\"t\">" + schemas + query + "\n</cepbus>");
  ASSERT_FALSE(bus.isOk());
  EXPECT_THAT(bus.status().message(),
              HasSubstr("test.xml:5: <query name=\"rise\">: line 1, column 37: attribute 'prize' "
                        "is not declared on a Stock event in <schemas>; did you mean 'price'?"));
  // Without schemas nothing is checked (the run warns instead); here the
  // engine may not be on the test's plugin path, so only the absence of the
  // schema error is asserted.
  auto plain = build("<cepbus name=\"t\">" + query + "\n</cepbus>");
  if (!plain) {
    EXPECT_THAT(plain.status().message(), ::testing::Not(HasSubstr("<schemas>")));
  }
}

TEST_F(BusTest, ReplaysThroughEachFlowKind) {
  writeEvents("in.jsonl", 500);
  auto bus = build(R"(<cepbus name="t">
  <journal path="journal.db"/>
  <stages><stage name="s" capacity="10000"/></stages>
  <routes default-flow="st">
    <route address="seda.#" flow="seda" stage="s"/>
    <route address="reliable.#" flow="reliable" qos="reliable" stage="s"/>
  </routes>
  <service-assembly name="a">
    <service-unit name="st-src" type="replay-source">
      <param name="file" value="in.jsonl"/><publish address="st.x"/>
    </service-unit>
    <service-unit name="seda-src" type="replay-source">
      <param name="file" value="in.jsonl"/><publish address="seda.x"/>
    </service-unit>
    <service-unit name="rel-src" type="replay-source">
      <param name="file" value="in.jsonl"/><publish address="reliable.x"/>
    </service-unit>
    <service-unit name="st-sink" type="replay-sink">
      <param name="file" value="st.jsonl"/><subscribe address="st.x"/>
    </service-unit>
    <service-unit name="seda-sink" type="replay-sink">
      <param name="file" value="seda.jsonl"/><subscribe address="seda.*"/>
    </service-unit>
    <service-unit name="rel-sink" type="replay-sink">
      <param name="file" value="rel.jsonl"/><subscribe address="reliable.#"/>
    </service-unit>
    <service-unit name="all" type="replay-sink">
      <param name="file" value="all.jsonl"/><subscribe address="#" filter="i &lt;= 10"/>
    </service-unit>
  </service-assembly>
</cepbus>)");
  ASSERT_TRUE(bus.isOk()) << bus.status().toString();
  // The sources are declared before the sinks; they must still not publish
  // before the sinks subscribe (sources begin only once all have started).
  ASSERT_TRUE((*bus)->start().isOk());
  ASSERT_TRUE(drained(**bus));
  // Every flow, its stages and the reliable flow's journal report into the
  // registry's stats store, which /metrics and /api render.
  const stats::Store& store = (*bus)->registry().stats();
  for (const char* flow : {"st", "seda:s", "reliable:s"}) {
    EXPECT_EQ(cepbus::testing::statValue(store, "flow", {{"flow", flow}}, "sent"), 500) << flow;
  }
  // Drained: nothing queued; the last handler may still be running.
  EXPECT_TRUE(cepbus::testing::waitUntil([&] {
    return cepbus::testing::statValue(store, "stage",
                                      {{"flow", "seda:s"}, {"stage", "seda:s/a.seda-sink:in"}},
                                      "processed") == 500;
  }));
  EXPECT_TRUE(cepbus::testing::statValue(store, "journal", {{"flow", "reliable:s"}}, "commits"));
  (*bus)->stop();
  EXPECT_EQ(lineCount("seda.jsonl"), 500u);
  EXPECT_EQ(lineCount("rel.jsonl"), 500u);
  EXPECT_TRUE(fs::exists(dir_ / "journal.db.s"));
  EXPECT_EQ(lineCount("st.jsonl"), 500u);
  EXPECT_EQ(lineCount("all.jsonl"), 30u);  // i <= 10 from each of the three sources
}

// A replay is a source of its own, which ends with its file, so that the
// queries it fed stop waiting for it (services/cep reads the ends).
TEST_F(BusTest, AReplayEndsItsSourceAtTheEndOfItsFile) {
  writeEvents("in.jsonl", 20);
  auto bus = build(R"(<cepbus name="t">
  <service-assembly name="a">
    <service-unit name="src" type="replay-source">
      <param name="file" value="in.jsonl"/><publish address="x"/>
    </service-unit>
  </service-assembly>
</cepbus>)");
  ASSERT_TRUE(bus.isOk()) << bus.status().toString();
  const uint64_t before = flows::sourceEnds().count();
  ASSERT_TRUE((*bus)->start().isOk());
  ASSERT_TRUE(drained(**bus));
  ASSERT_TRUE(cepbus::testing::waitUntil([&] { return flows::sourceEnds().count() > before; }));
  const std::vector<uint64_t> ended =
      flows::sourceEnds().read(before, flows::sourceEnds().count()).sources;
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_NE(ended[0], 0u);  // 0 is the source of events of no known link
  (*bus)->stop();
}

// The first scrape of a bus shows every family its components may report,
// those of components it does not run included.
TEST_F(BusTest, ABusDeclaresEveryFamilyItsComponentsMayReport) {
  auto bus = build(R"(<cepbus name="t"/>)");
  ASSERT_TRUE(bus.isOk()) << bus.status().toString();
  std::set<std::string> components;
  for (const stats::Family& family : (*bus)->registry().stats().families()) {
    components.insert(family.component);
  }
  EXPECT_EQ(components,
            (std::set<std::string>{"amqp", "amqp_bridge", "amqp_link", "cep_detection", "cluster",
                                   "cluster_partition", "component", "flow", "http", "journal",
                                   "query", "route", "stage", "wire_names"}));
}

TEST_F(BusTest, StartAndStopAreIdempotent) {
  auto bus = build(R"(<cepbus name="t"/>)");
  ASSERT_TRUE(bus.isOk()) << bus.status().toString();
  EXPECT_TRUE((*bus)->start().isOk());
  EXPECT_TRUE((*bus)->start().isOk());
  EXPECT_TRUE((*bus)->drained());
  (*bus)->stop();
  (*bus)->stop();
}

// The replay file is there when the bus is built (validate checks it) and
// gone when it starts: the source's own start fails.
TEST_F(BusTest, AServiceThatFailsToStartStopsTheOthers) {
  std::ofstream(dir_ / "gone-at-start.jsonl") << "";
  auto bus = build(R"(<cepbus name="t">
  <service-assembly name="a">
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="out.jsonl"/><subscribe address="x"/>
    </service-unit>
    <service-unit name="src" type="replay-source">
      <param name="file" value="gone-at-start.jsonl"/><publish address="x"/>
    </service-unit>
  </service-assembly>
</cepbus>)");
  ASSERT_TRUE(bus.isOk()) << bus.status().toString();
  fs::remove(dir_ / "gone-at-start.jsonl");
  Status s = (*bus)->start();
  ASSERT_FALSE(s.isOk());
  EXPECT_THAT(s.message(), HasSubstr("gone-at-start.jsonl"));
  EXPECT_EQ((*bus)->broker().endpoint("a.sink:in"), nullptr);  // the sink was stopped again
}

// Run-time deployment (services::Deployer).
class BusDeployTest : public BusTest {
 protected:
  descriptor::ServiceAssembly fragment(const std::string& xml) {
    auto a = descriptor::parseServiceAssembly(xml, "fragment.xml", nullptr, dir_);
    EXPECT_TRUE(a.isOk()) << a.status().toString();
    return a.isOk() ? *a : descriptor::ServiceAssembly{};
  }
  std::unique_ptr<Bus> sinkBus() {
    auto bus = build(R"(<cepbus name="t">
  <service-assembly name="sinks">
    <service-unit name="out" type="replay-sink">
      <param name="file" value="out.jsonl"/><subscribe address="x"/>
    </service-unit>
  </service-assembly>
</cepbus>)");
    EXPECT_TRUE(bus.isOk()) << bus.status().toString();
    return bus.isOk() ? std::move(*bus) : nullptr;
  }
  static constexpr const char* kSource = R"(<service-assembly name="src">
  <service-unit name="feed" type="replay-source">
    <param name="file" value="in.jsonl"/><publish address="x"/>
  </service-unit>
</service-assembly>)";
};

TEST_F(BusDeployTest, DeployedAssemblyRunsAndUndeployRemovesIt) {
  writeEvents("in.jsonl", 300);
  std::unique_ptr<Bus> bus = sinkBus();
  ASSERT_NE(bus, nullptr);
  ASSERT_TRUE(bus->start().isOk());
  ASSERT_TRUE(bus->deploy(fragment(kSource)).isOk());
  auto assemblies = bus->assemblies();
  ASSERT_EQ(assemblies.size(), 2u);
  EXPECT_EQ(assemblies[1].name, "src");
  EXPECT_TRUE(assemblies[1].runtime);
  EXPECT_FALSE(assemblies[0].runtime);
  EXPECT_EQ(assemblies[1].services, std::vector<std::string>{"src.feed"});
  ASSERT_NE(bus->findService("src.feed"), nullptr);
  ASSERT_TRUE(drained(*bus));
  bool found = false;
  for (const auto& s : bus->deployedServices()) {
    if (s.name == "src.feed") {
      found = true;
      EXPECT_EQ(s.type, "replay-source");
      EXPECT_EQ(s.assembly, "src");
    }
  }
  EXPECT_TRUE(found);

  ASSERT_TRUE(bus->undeploy("src").isOk());
  EXPECT_EQ(bus->findService("src.feed"), nullptr);
  EXPECT_EQ(bus->assemblies().size(), 1u);
  EXPECT_EQ(bus->undeploy("src").code(), Status::Code::kNotFound);
  // Its name is free again: deploying it twice replays the file twice.
  ASSERT_TRUE(bus->deploy(fragment(kSource)).isOk());
  ASSERT_TRUE(drained(*bus));
  bus->stop();
  EXPECT_EQ(lineCount("out.jsonl"), 600u);
}

TEST_F(BusDeployTest, UndeployingTheConsumerLosesNothingItAccepted) {
  writeEvents("in.jsonl", 2000);
  auto bus = build(R"(<cepbus name="t">
  <stages><stage name="s" capacity="10000"/></stages>
  <routes default-flow="seda" default-stage="s"/>
  <service-assembly name="src">
    <service-unit name="feed" type="replay-source">
      <param name="file" value="in.jsonl"/><publish address="x"/>
    </service-unit>
  </service-assembly>
  <service-assembly name="sinks">
    <service-unit name="out" type="replay-sink">
      <param name="file" value="out.jsonl"/><subscribe address="x"/>
    </service-unit>
  </service-assembly>
</cepbus>)");
  ASSERT_TRUE(bus.isOk()) << bus.status().toString();
  ASSERT_TRUE((*bus)->start().isOk());
  // Undeployed while events may still be queued for it: its endpoint's queue
  // is drained before it stops, so every event it was handed is written.
  ASSERT_TRUE((*bus)->undeploy("sinks").isOk());
  const auto delivered = [&] {
    for (const auto& c : (*bus)->registry().snapshot()) {
      if (c.name == "flow/seda:s") return c.delivered;
    }
    return uint64_t{0};
  }();
  (*bus)->stop();
  EXPECT_EQ(lineCount("out.jsonl"), delivered);
}

TEST_F(BusDeployTest, RefusalsNameTheProblem) {
  writeEvents("in.jsonl", 1);
  std::unique_ptr<Bus> bus = sinkBus();
  ASSERT_NE(bus, nullptr);
  EXPECT_EQ(bus->deploy(fragment(kSource)).code(), Status::Code::kUnavailable);  // not started
  ASSERT_TRUE(bus->start().isOk());
  EXPECT_EQ(bus->deploy(fragment(R"(<service-assembly name="sinks"/>)")).code(),
            Status::Code::kAlreadyExists);
  const Status unknown = bus->deploy(fragment(R"(<service-assembly name="b">

  <service-unit name="u" type="no-such-type"/>
</service-assembly>)"));
  EXPECT_EQ(unknown.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(unknown.message(), HasSubstr("fragment.xml:3"));
  EXPECT_THAT(unknown.message(), HasSubstr("no-such-type"));
  EXPECT_EQ(bus->assemblies().size(), 1u);
  EXPECT_EQ(bus->undeploy("nope").code(), Status::Code::kNotFound);
  bus->stop();
  EXPECT_EQ(bus->deploy(fragment(kSource)).code(), Status::Code::kUnavailable);
  EXPECT_EQ(bus->undeploy("sinks").code(), Status::Code::kUnavailable);
}

// A redeploy keeps the units running and changes queries only (the CEP
// side is end to end in tests/integration/query_edit_test.cc).
TEST_F(BusDeployTest, ARedeployDeploysWhatDoesNotRunAndRefusesChangesBeyondQueries) {
  writeEvents("in.jsonl", 100);
  std::unique_ptr<Bus> bus = sinkBus();
  ASSERT_NE(bus, nullptr);
  EXPECT_EQ(bus->redeploy(fragment(kSource)).status().code(), Status::Code::kUnavailable);
  ASSERT_TRUE(bus->start().isOk());
  const std::string sinks = R"(<service-assembly name="sinks">
    <service-unit name="out" type="replay-sink">
      <param name="file" value="out.jsonl"/><subscribe address="x"/>
    </service-unit>
  </service-assembly>)";
  const std::shared_ptr<services::Service> before = bus->findService("sinks.out");
  auto same = bus->redeploy(fragment(sinks));
  ASSERT_TRUE(same) << same.status().message();
  EXPECT_FALSE(same->deployed);
  EXPECT_TRUE(same->changed.empty());
  EXPECT_EQ(bus->findService("sinks.out"), before);  // the same unit runs on

  std::string moved = sinks;
  moved.replace(moved.find("out.jsonl"), 9, "elsewhere.jsonl");
  auto refused = bus->redeploy(fragment(moved));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.status().code(), Status::Code::kRejected);
  EXPECT_THAT(refused.status().message(), HasSubstr("fragment.xml:2"));
  EXPECT_THAT(refused.status().message(), HasSubstr("\"out\": its params differ"));
  EXPECT_EQ(bus->findService("sinks.out"), before);

  // Not deployed yet: deployed as by deploy().
  auto fresh = bus->redeploy(fragment(kSource));
  ASSERT_TRUE(fresh) << fresh.status().message();
  EXPECT_TRUE(fresh->deployed);
  ASSERT_TRUE(drained(*bus));
  bus->stop();
  EXPECT_EQ(lineCount("out.jsonl"), 100u);
}

// Deploy/undeploy from another thread while the bus stops: no deadlock, no
// race (TSan), and once stop() returned they are refused.
TEST_F(BusDeployTest, DeployRacesWithStop) {
  writeEvents("in.jsonl", 50);
  std::unique_ptr<Bus> bus = sinkBus();
  ASSERT_NE(bus, nullptr);
  ASSERT_TRUE(bus->start().isOk());
  const descriptor::ServiceAssembly source = fragment(kSource);
  std::atomic<bool> done{false};
  std::atomic<int> deployed{0};
  std::thread admin([&] {
    while (!done.load()) {
      if (bus->deploy(source).isOk()) deployed.fetch_add(1);
      (void)bus->undeploy("src");
      (void)bus->drained();
      (void)bus->deployedServices();
    }
  });
  EXPECT_TRUE(
      cepbus::testing::eventually("three deployments", [&] { return deployed.load() >= 3; }));
  bus->stop();
  done.store(true);
  admin.join();
  EXPECT_EQ(bus->deploy(source).code(), Status::Code::kUnavailable);
}

// The quickstart's descriptor, read with the elements of the bus's services.
TEST(BusDescriptorTest, QuickstartExampleParses) {
  const std::filesystem::path path =
      std::filesystem::path(CEPBUS_TEST_SOURCE_DIR) / "examples/quickstart/quickstart.xml";
  auto result = descriptor::parseDescriptorFile(path, nullptr, &builtinElementParsers());
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  const descriptor::Descriptor& d = *result;
  EXPECT_EQ(d.name, "quickstart");
  EXPECT_EQ(d.source, path.string());
  const auto* amqp = d.element<services::amqp::AmqpListenerConfig>();
  ASSERT_NE(amqp, nullptr);
  EXPECT_EQ(amqp->port, 5672);
  EXPECT_NE(d.element<services::http::HttpListenerConfig>(), nullptr);
  const descriptor::ServiceAssembly* sa = d.assembly("stocks");
  ASSERT_NE(sa, nullptr);
  EXPECT_EQ(sa->resolvePath(sa->unit("feed")->param("file")->value),
            path.parent_path() / "stocks.jsonl");
  EXPECT_EQ(sa->unit("feed")->publications.at(0).address, "stocks.ticks");
  const descriptor::QuerySpec& q = sa->unit("detector")->queries.at(0);
  EXPECT_EQ(q.engine, "nfa");
  EXPECT_THAT(q.inputs, ElementsAre("stocks.ticks"));
  EXPECT_EQ(q.output, "stocks.equal");
  EXPECT_EQ(sa->unit("printer")->param("file")->value, "-");
  EXPECT_EQ(sa->unit("printer")->subscriptions.at(0).address, "stocks.equal");

  // The query text starts on the line of the file that holds "PATTERN".
  std::ifstream in(path);
  std::string line;
  int line_no = 0;
  int pattern_line = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find("PATTERN") != std::string::npos) pattern_line = line_no;
  }
  EXPECT_EQ(q.text.substr(0, 7), "PATTERN");
  EXPECT_EQ(q.text_where.line, pattern_line);
}

}  // namespace
}  // namespace cepbus::app
