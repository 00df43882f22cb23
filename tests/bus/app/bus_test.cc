#include "bus/app/bus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "bus/core/descriptor/parser.h"
#include "bus/core/event_json.h"

namespace cepbus::app {
namespace {

namespace fs = std::filesystem;
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
    auto d = descriptor::parseDescriptorString(xml, "test.xml", nullptr, dir_);
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

  static void waitDrained(Bus& bus) {
    for (int i = 0; i < 2000 && !bus.drained(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
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
  waitDrained(**bus);
  (*bus)->stop();
  EXPECT_EQ(lineCount("seda.jsonl"), 500u);
  EXPECT_EQ(lineCount("rel.jsonl"), 500u);
  EXPECT_TRUE(fs::exists(dir_ / "journal.db.s"));
  EXPECT_EQ(lineCount("st.jsonl"), 500u);
  EXPECT_EQ(lineCount("all.jsonl"), 30u);  // i <= 10 from each of the three sources
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

TEST_F(BusTest, AServiceThatFailsToStartStopsTheOthers) {
  auto bus = build(R"(<cepbus name="t">
  <service-assembly name="a">
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="out.jsonl"/><subscribe address="x"/>
    </service-unit>
    <service-unit name="src" type="replay-source">
      <param name="file" value="does-not-exist.jsonl"/><publish address="x"/>
    </service-unit>
  </service-assembly>
</cepbus>)");
  ASSERT_TRUE(bus.isOk()) << bus.status().toString();
  Status s = (*bus)->start();
  ASSERT_FALSE(s.isOk());
  EXPECT_THAT(s.message(), HasSubstr("does-not-exist.jsonl"));
  EXPECT_EQ((*bus)->broker().endpoint("a.sink:in"), nullptr);  // the sink was stopped again
}

}  // namespace
}  // namespace cepbus::app
