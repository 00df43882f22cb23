#include "services/http/prometheus.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>

#include "tests/services/http/test_broker.h"

namespace cepbus::services::http {
namespace {

// A scrape read back line by line, checking the exposition format on the way.
struct Scrape {
  std::map<std::string, std::string> type;  // family -> counter/gauge
  std::map<std::string, double> samples;    // `name{labels}` -> value
  std::vector<std::string> errors;          // what is wrong with the text
};

Scrape parseScrape(const std::string& text) {
  Scrape scrape;
  std::set<std::string> helped;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("# HELP ")) {
      helped.insert(line.substr(7, line.find(' ', 7) - 7));
      continue;
    }
    if (line.starts_with("# TYPE ")) {
      std::istringstream words(line.substr(7));
      std::string family, type;
      words >> family >> type;
      if (!helped.contains(family)) scrape.errors.push_back("TYPE before HELP: " + line);
      scrape.type[family] = type;
      continue;
    }
    const size_t space = line.rfind(' ');
    if (line.empty() || line[0] == '#' || space == std::string::npos) {
      scrape.errors.push_back("unexpected line: " + line);
      continue;
    }
    const std::string key = line.substr(0, space);
    const std::string family = key.substr(0, key.find('{'));
    if (!scrape.type.contains(family)) scrape.errors.push_back("sample without TYPE: " + line);
    if (scrape.type[family] == "counter" && !family.ends_with("_total")) {
      scrape.errors.push_back("counter not named _total: " + line);
    }
    scrape.samples[key] = std::stod(line.substr(space + 1));
  }
  return scrape;
}

TEST(EscapeLabelValueTest, EscapesBackslashQuoteAndLineFeed) {
  EXPECT_EQ(escapeLabelValue("plain.name-1"), "plain.name-1");
  EXPECT_EQ(escapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

TEST(RenderMetricsTest, EveryFamilyHasHelpAndTypeBeforeAnySample) {
  TestBroker bus;
  const Scrape scrape = parseScrape(renderMetrics(*bus.broker, *bus.registry));
  EXPECT_TRUE(scrape.errors.empty()) << scrape.errors.front();
  // Families show up even before anything was published.
  for (const char* family :
       {"cepbus_component_delivered_total", "cepbus_component_failed_total",
        "cepbus_component_rejected_total", "cepbus_route_published_total",
        "cepbus_route_unrouted_total", "cepbus_flow_sent_total", "cepbus_flow_delivered_total"}) {
    EXPECT_EQ(scrape.type.at(family), "counter") << family;
  }
  EXPECT_EQ(scrape.type.at("cepbus_component_queue_length"), "gauge");
  EXPECT_EQ(scrape.type.at("cepbus_component_throughput_per_second"), "gauge");
}

TEST(RenderMetricsTest, CountersFollowWhatIsPublished) {
  TestBroker bus;
  Recorder recorder(*bus.broker, "rec", "stocks.#");
  const Scrape before = parseScrape(renderMetrics(*bus.broker, *bus.registry));
  ASSERT_TRUE(before.errors.empty()) << before.errors.front();
  EXPECT_EQ(before.samples.at("cepbus_component_delivered_total{name=\"rec\",kind=\"endpoint\"}"),
            0);

  for (int i = 0; i < 3; ++i) bus.publish("stocks.ibm", i);
  for (int i = 0; i < 2; ++i) bus.publish("slow.nobody", i);

  const Scrape after = parseScrape(renderMetrics(*bus.broker, *bus.registry));
  ASSERT_TRUE(after.errors.empty()) << after.errors.front();
  EXPECT_EQ(after.samples.at("cepbus_component_delivered_total{name=\"rec\",kind=\"endpoint\"}"),
            3);
  EXPECT_EQ(after.samples.at("cepbus_component_failed_total{name=\"rec\",kind=\"endpoint\"}"), 0);
  EXPECT_EQ(after.samples.at("cepbus_component_queue_length{name=\"rec\",kind=\"endpoint\"}"), 0);
  EXPECT_EQ(after.samples.at("cepbus_route_published_total{route=\"(default)\",flow=\"st\"}"), 3);
  EXPECT_EQ(after.samples.at("cepbus_route_delivered_total{route=\"(default)\",flow=\"st\"}"), 3);
  EXPECT_EQ(after.samples.at("cepbus_route_unrouted_total{route=\"slow.#\",flow=\"st2\"}"), 2);
  EXPECT_EQ(after.samples.at("cepbus_route_unrouted_total{route=\"(default)\",flow=\"st\"}"), 0);
  EXPECT_EQ(after.samples.at("cepbus_flow_delivered_total{flow=\"st\"}"), 3);
  EXPECT_EQ(after.samples.at("cepbus_flow_delivered_total{flow=\"st2\"}"), 0);
}

TEST(RenderMetricsTest, EscapesComponentNamesInLabels) {
  TestBroker bus;
  ASSERT_TRUE(bus.registry->add("odd\"name\\with\nbreak", router::ComponentKind::kService));
  const std::string text = renderMetrics(*bus.broker, *bus.registry);
  const Scrape scrape = parseScrape(text);
  EXPECT_TRUE(scrape.errors.empty()) << scrape.errors.front();
  EXPECT_TRUE(scrape.samples.contains(
      "cepbus_component_delivered_total{name=\"odd\\\"name\\\\with\\nbreak\",kind=\"service\"}"))
      << text;
}

}  // namespace
}  // namespace cepbus::services::http
