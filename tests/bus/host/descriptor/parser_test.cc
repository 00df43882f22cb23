#include "bus/host/descriptor/parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "tests/testing/descriptor_errors.h"

namespace cepbus::descriptor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The example of the documentation; line numbers matter to the tests.
constexpr std::string_view kFullExample = R"(<cepbus name="quickstart">
  <logging level="notice"/>
  <journal path="var/quickstart-journal.db"/>
  <listeners>
    <probe port="5672"/>
    <!-- the listeners of services, each read by its own element parser -->
  </listeners>
  <stages>
    <stage name="dispatch" capacity="4096" min-threads="1" max-threads="4"
           degrade-at="0.75" reject-at="1.0" />
    <stage name="cep" capacity="100"/>
  </stages>
  <plugins>
    <search-path>plugins</search-path>
    <search-path>/opt/cepbus/plugins</search-path>
    <plugin name="nfa"/>
    <plugin name="join" library="lib/libjoin.so"/>
  </plugins>
  <routes default-flow="st">
    <route address="stocks.#" flow="seda" qos="reliable" stage="dispatch"/>
    <route address="alarms.*" flow="reliable"/>
  </routes>
  <service-assembly name="stocks">
    <service-unit name="feed" type="replay-source">
      <param name="file" value="stocks.jsonl"/>
      <param name="rate" value=""/>
      <publish address="stocks.ticks"/>
    </service-unit>
    <service-unit name="printer" type="replay-sink">
      <param name="file" value="-"/>
      <subscribe address="stocks.equal" filter="price &gt; 10"/>
      <subscribe address="stocks.#" durable="all-stocks"/>
    </service-unit>
    <service-unit name="detector" type="cep">
      <query name="equal-prices" engine="nfa" input="stocks.ticks, stocks.news" output="stocks.equal">
        <option name="construction" value="batched"/>
        <text>
          PATTERN SEQ(Stock a, Stock b, Stock c)
          WHERE a.price = b.price WITHIN 1000 RETURN EqualPrices(a.symbol)
        </text>
      </query>
    </service-unit>
  </service-assembly>
  <service-assembly name="empty"/>
</cepbus>
)";

std::vector<std::string> errorsOf(std::string_view text) { return testing::descriptorErrors(text); }

// A service's listener element as the full example declares it.
struct ProbeConfig {
  uint64_t port = 0;
  Location where;
};
class ProbeElement final : public ElementParser {
 public:
  std::string_view parent() const override { return kListenersElement; }
  std::string_view tag() const override { return "probe"; }
  std::any parse(const Element& e) const override {
    e.allowAttributes({"port"});
    return ProbeConfig{e.integer("port", 0, kMaxPort).value_or(0), e.where()};
  }
};
const ElementParsers& probeElement() { return testing::onlyElement<ProbeElement>(); }

// A descriptor whose <stages> holds `stage_lines` (from line 3 on).
std::string withStages(std::string_view stage_lines) {
  return "<cepbus name=\"t\">\n<stages>\n" + std::string(stage_lines) + "\n</stages>\n</cepbus>\n";
}

TEST(ParserTest, FullExampleParsesIntoTheModel) {
  ParseReport report;
  auto result =
      parseDescriptorString(kFullExample, "quickstart.xml", &report, "/srv/qs", &probeElement());
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  EXPECT_TRUE(report.ok());
  const Descriptor& d = *result;

  EXPECT_EQ(d.name, "quickstart");
  EXPECT_EQ(d.source, "quickstart.xml");
  EXPECT_EQ(d.base_dir, std::filesystem::path("/srv/qs"));
  EXPECT_EQ(d.where.toString(), "quickstart.xml:1");
  EXPECT_EQ(d.logging.level, LogLevel::kNotice);
  EXPECT_EQ(d.logging.where.line, 2);
  ASSERT_TRUE(d.journal.has_value());
  EXPECT_EQ(d.journal->path, std::filesystem::path("/srv/qs/var/quickstart-journal.db"));
  EXPECT_EQ(d.journal->where.line, 3);
  EXPECT_FALSE(d.journal->commit_delay_us.has_value());  // the journal writer's default

  const ProbeConfig* probe = d.element<ProbeConfig>();
  ASSERT_NE(probe, nullptr);
  EXPECT_EQ(probe->port, 5672u);
  EXPECT_EQ(probe->where.line, 5);
  ASSERT_EQ(d.elements.size(), 1u);
  EXPECT_EQ(d.elements[0].parent, "listeners");
  EXPECT_EQ(d.elements[0].tag, "probe");

  ASSERT_EQ(d.stages.size(), 2u);
  const StageSpec& dispatch = d.stages[0];
  EXPECT_EQ(dispatch.name, "dispatch");
  EXPECT_EQ(dispatch.capacity, 4096u);
  EXPECT_EQ(dispatch.min_threads, 1u);
  EXPECT_EQ(dispatch.max_threads, 4u);
  EXPECT_DOUBLE_EQ(dispatch.degrade_at, 0.75);
  EXPECT_DOUBLE_EQ(dispatch.reject_at, 1.0);
  EXPECT_EQ(dispatch.where.line, 9);
  EXPECT_EQ(d.stage("cep")->capacity, 100u);

  EXPECT_THAT(d.plugins.search_paths, ElementsAre(std::filesystem::path("/srv/qs/plugins"),
                                                  std::filesystem::path("/opt/cepbus/plugins")));
  ASSERT_EQ(d.plugins.plugins.size(), 2u);
  EXPECT_EQ(d.plugins.plugins[0].name, "nfa");
  EXPECT_TRUE(d.plugins.plugins[0].library.empty());
  EXPECT_EQ(d.plugins.plugins[0].where.line, 16);
  EXPECT_EQ(d.plugins.plugins[1].library, std::filesystem::path("/srv/qs/lib/libjoin.so"));

  EXPECT_EQ(d.routes.default_flow, FlowKind::kSt);
  ASSERT_EQ(d.routes.routes.size(), 2u);
  EXPECT_EQ(d.routes.routes[0].address, "stocks.#");
  EXPECT_EQ(d.routes.routes[0].flow, FlowKind::kSeda);
  EXPECT_EQ(d.routes.routes[0].qos, Qos::kReliable);
  EXPECT_EQ(d.routes.routes[0].stage, "dispatch");
  EXPECT_EQ(d.routes.routes[0].where.line, 20);
  EXPECT_EQ(d.routes.routes[1].flow, FlowKind::kReliable);
  EXPECT_EQ(d.routes.routes[1].qos, Qos::kBestEffort);
  EXPECT_EQ(d.routes.routes[1].stage, "");

  ASSERT_EQ(d.assemblies.size(), 2u);
  const ServiceAssembly& sa = d.assemblies[0];
  EXPECT_EQ(sa.name, "stocks");
  EXPECT_EQ(sa.where.line, 23);
  EXPECT_EQ(sa.base_dir, std::filesystem::path("/srv/qs"));
  EXPECT_EQ(sa.resolvePath("stocks.jsonl"), std::filesystem::path("/srv/qs/stocks.jsonl"));
  ASSERT_EQ(sa.units.size(), 3u);

  const ServiceUnit& feed = sa.units[0];
  EXPECT_EQ(feed.name, "feed");
  EXPECT_EQ(feed.type, "replay-source");
  ASSERT_EQ(feed.params.size(), 2u);
  EXPECT_EQ(feed.param("file")->value, "stocks.jsonl");
  EXPECT_EQ(feed.param("file")->where.toString(), "quickstart.xml:25");
  EXPECT_EQ(feed.param("rate")->value, "");
  ASSERT_EQ(feed.publications.size(), 1u);
  EXPECT_EQ(feed.publications[0].address, "stocks.ticks");
  EXPECT_EQ(feed.publications[0].where.line, 27);
  EXPECT_TRUE(feed.subscriptions.empty());
  EXPECT_TRUE(feed.queries.empty());

  const ServiceUnit& printer = sa.units[1];
  ASSERT_EQ(printer.subscriptions.size(), 2u);
  EXPECT_EQ(printer.subscriptions[0].address, "stocks.equal");
  EXPECT_EQ(printer.subscriptions[0].filter, "price > 10");
  EXPECT_EQ(printer.subscriptions[0].filter_where.toString(), "quickstart.xml:31");
  EXPECT_EQ(printer.subscriptions[0].durable, "");
  EXPECT_EQ(printer.subscriptions[1].address, "stocks.#");
  EXPECT_EQ(printer.subscriptions[1].filter, "");
  EXPECT_EQ(printer.subscriptions[1].durable, "all-stocks");

  const ServiceUnit& detector = sa.units[2];
  EXPECT_EQ(detector.type, "cep");
  ASSERT_EQ(detector.queries.size(), 1u);
  const QuerySpec& q = detector.queries[0];
  EXPECT_EQ(q.name, "equal-prices");
  EXPECT_EQ(q.engine, "nfa");
  EXPECT_THAT(q.inputs, ElementsAre("stocks.ticks", "stocks.news"));
  EXPECT_EQ(q.output, "stocks.equal");
  ASSERT_EQ(q.options.size(), 1u);
  EXPECT_EQ(q.option("construction")->value, "batched");
  EXPECT_EQ(q.option("construction")->where.line, 36);
  EXPECT_EQ(q.text,
            "PATTERN SEQ(Stock a, Stock b, Stock c)\n"
            "          WHERE a.price = b.price WITHIN 1000 RETURN EqualPrices(a.symbol)");
  EXPECT_EQ(q.text_where.toString(), "quickstart.xml:38");
  EXPECT_EQ(q.where.line, 35);

  EXPECT_EQ(d.assemblies[1].name, "empty");
  EXPECT_TRUE(d.assemblies[1].units.empty());
  EXPECT_EQ(d.assembly("stocks"), &d.assemblies[0]);
}

TEST(ParserTest, OmittedElementsAndAttributesTakeTheirDefaults) {
  auto result = parseDescriptorString(R"(<cepbus name="min">
  <listeners/>
  <stages>
    <stage name="a"/>
    <stage name="b" min-threads="3" run-inline="when-idle"/>
  </stages>
  <routes default-flow="seda" default-stage="a">
    <route address="x"/>
    <route address="y" flow="st"/>
  </routes>
</cepbus>)",
                                      "min.xml");
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  const Descriptor& d = *result;
  EXPECT_EQ(d.logging.level, LogLevel::kInformation);
  EXPECT_EQ(d.logging.where.line, 0);
  EXPECT_FALSE(d.journal.has_value());
  EXPECT_TRUE(d.base_dir.empty());
  EXPECT_TRUE(d.elements.empty());
  const StageSpec& a = d.stages[0];
  EXPECT_EQ(a.capacity, 4096u);
  EXPECT_EQ(a.min_threads, 1u);
  EXPECT_EQ(a.max_threads, 1u);
  EXPECT_DOUBLE_EQ(a.degrade_at, 0.75);
  EXPECT_DOUBLE_EQ(a.reject_at, 1.0);
  EXPECT_FALSE(a.run_inline_when_idle);
  EXPECT_EQ(d.stages[1].min_threads, 3u);
  EXPECT_EQ(d.stages[1].max_threads, 3u);  // follows min-threads when not given
  EXPECT_TRUE(d.stages[1].run_inline_when_idle);
  EXPECT_EQ(d.routes.default_flow, FlowKind::kSeda);
  EXPECT_EQ(d.routes.default_stage, "a");
  // A route without a flow takes the default flow and stage.
  EXPECT_EQ(d.routes.routes[0].flow, FlowKind::kSeda);
  EXPECT_EQ(d.routes.routes[0].stage, "a");
  EXPECT_EQ(d.routes.routes[1].flow, FlowKind::kSt);
  EXPECT_EQ(d.routes.routes[1].stage, "");
}

TEST(ParserTest, QueryTextLineInCdataAndPlainText) {
  auto result = parseDescriptorString(R"(<cepbus name="t">
<service-assembly name="sa">
<service-unit name="u" type="cep">
<query name="cdata" engine="nfa" input="a" output="b"><text>

  <![CDATA[

    PATTERN SEQ(A a, B b) WHERE a.x < b.x
  ]]>
</text></query>
<query name="plain" engine="nfa" input="a" output="c"><text>PATTERN A a</text></query>
</service-unit>
</service-assembly>
</cepbus>)",
                                      "t.xml");
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  const ServiceUnit& u = result->assemblies[0].units[0];
  EXPECT_EQ(u.queries[0].text, "PATTERN SEQ(A a, B b) WHERE a.x < b.x");
  EXPECT_EQ(u.queries[0].text_where.line, 8);
  EXPECT_EQ(u.queries[1].text, "PATTERN A a");
  EXPECT_EQ(u.queries[1].text_where.line, 11);
}

// engine="auto" is a name like any other for the parser: the CEP service
// picks the engine when it deploys the query.
TEST(ParserTest, EngineAutoIsKeptForTheCepServiceToChoose) {
  auto result = parseDescriptorString(R"(<cepbus name="t">
<service-assembly name="sa">
<service-unit name="u" type="cep">
<query name="q" engine="auto" input="a" output="b"><text>PATTERN SEQ(A a, B b)</text></query>
</service-unit>
</service-assembly>
</cepbus>)",
                                      "t.xml");
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  const QuerySpec& q = result->assemblies[0].units[0].queries[0];
  EXPECT_EQ(q.engine, "auto");
  EXPECT_EQ(q.where.toString(), "t.xml:4");
}

TEST(ParserTest, QueryTimeUnit) {
  auto result = parseDescriptorString(R"(<cepbus name="t">
<service-assembly name="sa">
<service-unit name="u" type="cep">
<query name="ms" engine="nfa" input="a" output="b" time-unit="ms"><text>PATTERN A a</text></query>
<query name="s" engine="nfa" input="a" output="c" time-unit="s"><text>PATTERN A a</text></query>
<query name="us" engine="nfa" input="a" output="d" time-unit="us"><text>PATTERN A a</text></query>
<query name="none" engine="nfa" input="a" output="e"><text>PATTERN A a</text></query>
</service-unit>
</service-assembly>
</cepbus>)",
                                      "t.xml");
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  const std::vector<QuerySpec>& q = result->assemblies[0].units[0].queries;
  EXPECT_EQ(q[0].ts_unit, pattern::TimeUnit::kMilliseconds);
  EXPECT_EQ(q[1].ts_unit, pattern::TimeUnit::kSeconds);
  EXPECT_EQ(q[2].ts_unit, pattern::TimeUnit::kMicroseconds);
  EXPECT_EQ(q[3].ts_unit, pattern::TimeUnit::kNone);
}

TEST(ParserTest, SchemasDeclareEventTypesAndTheirAttributes) {
  auto result = parseDescriptorString(R"(<cepbus name="t">
<schemas>
  <event type="Stock"><attribute name="symbol"/><attribute name="price"/></event>
  <event type="Tick"/>
</schemas>
</cepbus>)",
                                      "t.xml");
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  ASSERT_EQ(result->schemas.size(), 2u);
  EXPECT_EQ(result->schemas[0].type, "Stock");
  EXPECT_EQ(result->schemas[0].attributes, (std::vector<std::string>{"symbol", "price"}));
  EXPECT_EQ(result->schemas[0].where.toString(), "t.xml:3");
  EXPECT_EQ(result->schemas[1].type, "Tick");
  EXPECT_TRUE(result->schemas[1].attributes.empty());
}

TEST(ParserErrorTest, SchemasRefuseRepeatedTypesAndAttributesAndStrangeChildren) {
  EXPECT_THAT(errorsOf("<cepbus name=\"t\">\n<schemas>\n<event type=\"A\"/>\n"
                       "<event type=\"A\"/>\n</schemas>\n</cepbus>"),
              ElementsAre(HasSubstr("t.xml:4:")));
  EXPECT_THAT(errorsOf("<cepbus name=\"t\">\n<schemas>\n<event type=\"A\">\n"
                       "<attribute name=\"x\"/>\n<attribute name=\"x\"/>\n</event>\n"
                       "</schemas>\n</cepbus>"),
              ElementsAre(HasSubstr("t.xml:5:")));
  EXPECT_THAT(errorsOf("<cepbus name=\"t\">\n<schemas>\n<type name=\"A\"/>\n</schemas>\n"
                       "</cepbus>"),
              ElementsAre(HasSubstr("t.xml:3: unknown element <type>")));
  EXPECT_THAT(errorsOf("<cepbus name=\"t\">\n<schemas>\n<event/>\n</schemas>\n</cepbus>"),
              ElementsAre(HasSubstr("missing required attribute \"type\"")));
}

// ---- each kind of error ------------------------------------------------------

TEST(ParserErrorTest, MalformedXmlNamesTheLine) {
  EXPECT_THAT(errorsOf("<cepbus name=\"t\">\n<stages>\n<stage name=\"a\">\n</stages>\n</cepbus>"),
              ElementsAre("t.xml:3: malformed XML: element <stage> is not closed by its "
                          "matching end tag"));
  EXPECT_THAT(errorsOf("<cepbus name=\"t\">\n\n<logging level=trace/>\n</cepbus>"),
              ElementsAre("t.xml:3: malformed XML: malformed or repeated attribute in <logging> "
                          "(values must be quoted; an attribute may appear once)"));
  EXPECT_THAT(errorsOf(""), ElementsAre("t.xml: malformed XML: the document is empty"));
  EXPECT_THAT(errorsOf("<cepbus name=\"t\">\n<stages>\n"),
              ElementsAre(HasSubstr("t.xml:2: malformed XML: the document ends before")));
}

TEST(ParserErrorTest, WrongOrExtraRootElement) {
  EXPECT_THAT(errorsOf("<bus name=\"t\"/>"),
              ElementsAre("t.xml:1: the root element must be <cepbus>, got <bus>"));
  EXPECT_THAT(errorsOf("<service-assembly name=\"sa\"/>"),
              ElementsAre(HasSubstr("got <service-assembly> (a lone <service-assembly> is a "
                                    "fragment")));
  EXPECT_THAT(errorsOf("<cepbus name=\"t\"/>\n<cepbus name=\"u\"/>"),
              ElementsAre("t.xml:2: second root element <cepbus>; a document has one root "
                          "element <cepbus>"));
}

TEST(ParserErrorTest, UnknownElement) {
  EXPECT_THAT(errorsOf(withStages("<stag name=\"a\"/>")),
              ElementsAre("t.xml:3: unknown element <stag> in <stages> (did you mean <stage>?)"));
  EXPECT_THAT(errorsOf("<cepbus name=\"t\">\n<queues/>\n</cepbus>"),
              ElementsAre("t.xml:2: unknown element <queues> in <cepbus name=\"t\">; expected "
                          "<logging>, <journal>, <listeners>, <stages>, <plugins>, <routes>, "
                          "<schemas>, <service-assembly>"));
  EXPECT_THAT(errorsOf(withStages("<stage name=\"a\"><tls/></stage>")),
              ElementsAre("t.xml:3: unknown element <tls> in <stage name=\"a\">; <stage> has no "
                          "child elements"));
}

TEST(ParserErrorTest, UnexpectedText) {
  EXPECT_THAT(errorsOf(withStages("stage a")),
              ElementsAre("t.xml:3: <stages>: unexpected text \"stage a\""));
}

TEST(ParserErrorTest, UnknownAttribute) {
  EXPECT_THAT(errorsOf(withStages("<stage name=\"a\" capcity=\"3\"/>")),
              ElementsAre("t.xml:3: <stage name=\"a\">: unknown attribute \"capcity\" (did you "
                          "mean \"capacity\"?)"));
  EXPECT_THAT(errorsOf("<cepbus name=\"t\" version=\"2\"/>"),
              ElementsAre("t.xml:1: <cepbus name=\"t\">: unknown attribute \"version\"; expected "
                          "one of \"name\""));
  EXPECT_THAT(errorsOf("<cepbus name=\"t\"><stages size=\"2\"/></cepbus>"),
              ElementsAre("t.xml:1: <stages>: unknown attribute \"size\"; <stages> takes no "
                          "attributes"));
}

TEST(ParserErrorTest, MissingOrEmptyAttribute) {
  EXPECT_THAT(errorsOf(withStages("<stage capacity=\"3\"/>")),
              ElementsAre("t.xml:3: <stage>: missing required attribute \"name\""));
  EXPECT_THAT(errorsOf("<cepbus/>"),
              ElementsAre("t.xml:1: <cepbus>: missing required attribute \"name\""));
  EXPECT_THAT(
      errorsOf(R"(<cepbus name="t">
<service-assembly name="sa">
  <service-unit name="u" type="  ">
    <param name="p"/>
  </service-unit>
</service-assembly>
</cepbus>)"),
      ElementsAre("t.xml:3: <service-unit name=\"u\">: attribute \"type\" must not be empty",
                  "t.xml:4: <param name=\"p\">: missing required attribute \"value\""));
}

TEST(ParserErrorTest, BadNumbers) {
  // The example of the brief, verbatim.
  ParseReport report;
  std::string text = "<cepbus name=\"quickstart\">\n";
  for (int i = 2; i < 11; ++i) text += "<!-- -->\n";
  text += "<stages>\n<stage name=\"dispatch\" capacity=\"-3\"/>\n</stages></cepbus>";
  EXPECT_FALSE(parseDescriptorString(text, "quickstart.xml", &report).isOk());
  ASSERT_EQ(report.errors.size(), 1u);
  EXPECT_EQ(report.errors[0].toString(),
            "quickstart.xml:12: <stage name=\"dispatch\">: attribute \"capacity\" must be a "
            "positive integer, got \"-3\"");

  EXPECT_THAT(
      errorsOf(withStages(R"(<stage name="a" capacity="4k" min-threads="0" max-threads="2000"
  degrade-at="1.5" reject-at="0"/>
<stage name="b" min-threads="4" max-threads="2"/>
<stage name="c" degrade-at="0.9" reject-at="0.5"/>
<stage name="d" degrade-at="nan"/>)")),
      ElementsAre(
          "t.xml:3: <stage name=\"a\">: attribute \"capacity\" must be a positive integer, got "
          "\"4k\"",
          "t.xml:3: <stage name=\"a\">: attribute \"min-threads\" must be between 1 and 1024, got "
          "\"0\"",
          "t.xml:3: <stage name=\"a\">: attribute \"max-threads\" must be between 1 and 1024, got "
          "\"2000\"",
          "t.xml:4: <stage name=\"a\">: attribute \"degrade-at\" must be a number between 0 and 1, "
          "got \"1.5\"",
          "t.xml:4: <stage name=\"a\">: attribute \"reject-at\" must be a number greater than 0 "
          "and at most 1, got \"0\"",
          "t.xml:5: <stage name=\"b\">: attribute \"max-threads\" must be at least min-threads "
          "(4), got \"2\"",
          "t.xml:6: <stage name=\"c\">: reject-at (0.5) must not be below degrade-at (0.9)",
          "t.xml:7: <stage name=\"d\">: attribute \"degrade-at\" must be a number between 0 and 1, "
          "got \"nan\""));
  EXPECT_THAT(errorsOf(withStages("<stage name=\"a\" run-inline=\"always\"/>")),
              ElementsAre("t.xml:3: <stage name=\"a\">: attribute \"run-inline\" must be one of "
                          "never, when-idle; got \"always\""));
  // reject-at below the default degrade-at.
  EXPECT_THAT(errorsOf(withStages("<stage name=\"a\" reject-at=\"0.5\"/>")),
              ElementsAre("t.xml:3: <stage name=\"a\">: reject-at (0.5) must not be below "
                          "degrade-at (0.75)"));
}

TEST(ParserErrorTest, BadEnumValues) {
  EXPECT_THAT(errorsOf(R"(<cepbus name="t">
<logging level="info"/>
<routes default-flow="fast">
<route address="a" flow="sed" qos="at-most-once"/>
</routes>
</cepbus>)"),
              ElementsAre("t.xml:2: <logging>: attribute \"level\" must be one of trace, debug, "
                          "information, notice, warning, error; got \"info\"",
                          "t.xml:3: <routes>: attribute \"default-flow\" must be one of st, seda, "
                          "reliable; got \"fast\"",
                          "t.xml:4: <route address=\"a\">: attribute \"flow\" must be one of st, "
                          "seda, reliable; got \"sed\"",
                          "t.xml:4: <route address=\"a\">: attribute \"qos\" must be one of "
                          "best-effort, reliable; got \"at-most-once\""));
}

TEST(ParserErrorTest, DuplicateNames) {
  EXPECT_THAT(
      errorsOf(R"(<cepbus name="t">
<stages><stage name="a"/>
<stage name="a"/></stages>
<plugins><plugin name="nfa"/><plugin name="nfa"/></plugins>
<service-assembly name="sa">
  <service-unit name="u" type="cep">
    <param name="p" value="1"/>
    <param name="p" value="2"/>
    <query name="q" engine="nfa" input="a" output="b">
      <option name="o" value="1"/><option name="o" value="2"/><text>PATTERN A a</text>
    </query>
    <query name="q" engine="nfa" input="a" output="b"><text>PATTERN A a</text></query>
  </service-unit>
  <service-unit name="u" type="cep"/>
</service-assembly>
<service-assembly name="sa"><service-unit name="u" type="cep"/></service-assembly>
<logging level="debug"/>
<logging level="debug"/>
</cepbus>)"),
      ElementsAre("t.xml:3: <stage name=\"a\">: duplicate stage \"a\" (first at line 2)",
                  "t.xml:4: <plugin name=\"nfa\">: duplicate plugin \"nfa\" (first at line "
                  "4)",
                  "t.xml:8: <param name=\"p\">: duplicate param \"p\" (first at line 7)",
                  "t.xml:10: <option name=\"o\">: duplicate option \"o\" (first at line 10)",
                  "t.xml:12: <query name=\"q\">: duplicate query \"q\" (first at line 9)",
                  "t.xml:14: <service-unit name=\"u\">: duplicate service unit \"u\" "
                  "(first at line 6)",
                  "t.xml:16: <service-assembly name=\"sa\">: duplicate service assembly "
                  "\"sa\" (first at line 5)",
                  "t.xml:18: <logging> appears twice in <cepbus name=\"t\"> (first at "
                  "line 17)"));
}

TEST(ParserErrorTest, UnitNamesAreScopedToTheirAssembly) {
  auto result = parseDescriptorString(R"(<cepbus name="t">
<service-assembly name="a"><service-unit name="u" type="x"/></service-assembly>
<service-assembly name="b"><service-unit name="u" type="x"/></service-assembly>
</cepbus>)",
                                      "t.xml");
  EXPECT_TRUE(result.isOk()) << result.status().toString();
}

TEST(ParserErrorTest, BadNames) {
  EXPECT_THAT(errorsOf(withStages("<stage name=\"my stage\"/>")),
              ElementsAre("t.xml:3: <stage name=\"my stage\">: attribute \"name\" must be a name "
                          "made of letters, digits, '_', '-' and '.', got \"my stage\""));
}

TEST(ParserErrorTest, DanglingStageReference) {
  EXPECT_THAT(errorsOf(R"(<cepbus name="t">
<routes default-flow="reliable" default-stage="io">
<route address="a.#" flow="seda" stage="dispatc"/>
</routes>
<stages><stage name="dispatch"/></stages>
<journal path="j.db"/>
</cepbus>)"),
              ElementsAre("t.xml:2: <routes>: attribute \"default-stage\" names an undeclared "
                          "stage \"io\"; declared stages: dispatch",
                          "t.xml:3: <route address=\"a.#\">: attribute \"stage\" names an "
                          "undeclared stage \"dispatc\" (did you mean \"dispatch\"?)"));
  EXPECT_THAT(errorsOf("<cepbus name=\"t\"><routes>\n<route address=\"a\" flow=\"seda\" "
                       "stage=\"s\"/></routes></cepbus>"),
              ElementsAre("t.xml:2: <route address=\"a\">: attribute \"stage\" names an "
                          "undeclared stage \"s\"; no <stage> is declared in <stages>"));
}

TEST(ParserErrorTest, FlowsAndTheirStagesAndJournal) {
  EXPECT_THAT(errorsOf(R"(<cepbus name="t">
<stages><stage name="s"/></stages>
<routes>
<route address="a" flow="seda"/>
<route address="b" stage="s"/>
<route address="c" flow="reliable"/>
</routes>
</cepbus>)"),
              ElementsAre("t.xml:4: <route address=\"a\">: flow \"seda\" needs a stage: set "
                          "attribute \"stage\", or \"default-stage\" on <routes>",
                          "t.xml:5: <route address=\"b\">: attribute \"stage\" is not used by flow "
                          "\"st\" (the default flow); remove it or use flow \"seda\"",
                          "t.xml:6: <route address=\"c\">: flow \"reliable\" needs a <journal "
                          "path=\"...\"/> element to journal events in"));
  // A seda default flow without a default stage is reported once, on <routes>.
  EXPECT_THAT(errorsOf("<cepbus name=\"t\">\n<routes default-flow=\"seda\">\n<route "
                       "address=\"a\"/>\n</routes></cepbus>"),
              ElementsAre("t.xml:2: <routes>: default flow \"seda\" needs attribute "
                          "\"default-stage\""));
}

TEST(ParserErrorTest, BadAddresses) {
  EXPECT_THAT(errorsOf(R"(<cepbus name="t">
<routes><route address="stocks..x"/></routes>
<service-assembly name="sa"><service-unit name="u" type="cep">
  <publish address="stocks.*"/>
  <subscribe address="stocks.ti cks"/>
  <subscribe address="" filter=" "/>
  <query name="q" engine="nfa" input="a.#, ,b,b" output="c">
    <text>PATTERN A a</text>
  </query>
</service-unit></service-assembly>
</cepbus>)"),
              ElementsAre("t.xml:2: <route address=\"stocks..x\">: attribute \"address\" is not a "
                          "valid address \"stocks..x\": segment 2 is empty",
                          "t.xml:4: <publish address=\"stocks.*\">: attribute \"address\" is not a "
                          "valid address \"stocks.*\": segment 2 is the wildcard '*', allowed only "
                          "in subscriptions and routes",
                          "t.xml:5: <subscribe address=\"stocks.ti cks\">: attribute \"address\" "
                          "is not a valid address \"stocks.ti cks\": segment 2 \"ti cks\" contains "
                          "a space; segments are made of letters, digits, '_' and '-'",
                          "t.xml:6: <subscribe address=\"\">: attribute \"address\" must not be "
                          "empty",
                          "t.xml:6: <subscribe address=\"\">: attribute \"filter\" must not be "
                          "empty",
                          "t.xml:7: <query name=\"q\">: attribute \"input\" holds an invalid "
                          "address \"a.#\": segment 2 is the wildcard '#', allowed only in "
                          "subscriptions and routes",
                          "t.xml:7: <query name=\"q\">: attribute \"input\" has an empty item in "
                          "\"a.#, ,b,b\"; separate addresses by commas",
                          "t.xml:7: <query name=\"q\">: attribute \"input\" lists \"b\" twice"));
}

TEST(ParserErrorTest, QueryNeedsText) {
  EXPECT_THAT(errorsOf(R"(<cepbus name="t">
<service-assembly name="sa"><service-unit name="u" type="cep">
  <query name="q" engine="nfa" input="a" output="b"/>
  <query name="r" engine="nfa" input="a" output="b"><text>
  </text></query>
  <query name="s" engine="nfa" input="a" output="b"><text>A</text><text>B</text></query>
</service-unit></service-assembly>
</cepbus>)"),
              ElementsAre("t.xml:3: <query name=\"q\">: missing required element <text> holding "
                          "the query",
                          "t.xml:4: <text>: must hold text",
                          "t.xml:6: <text> appears twice in <query name=\"s\"> (first at line 6)"));
}

TEST(ParserErrorTest, QueryTimeUnitIsUsMsOrS) {
  EXPECT_THAT(errorsOf(R"(<cepbus name="t">
<service-assembly name="sa"><service-unit name="u" type="cep">
  <query name="q" engine="nfa" input="a" output="b" time-unit="min">
    <text>PATTERN A a</text>
  </query>
  <query name="r" engine="nfa" input="a" output="c"
         time-unit="">
    <text>PATTERN A a</text>
  </query>
</service-unit></service-assembly>
</cepbus>)"),
              ElementsAre("t.xml:3: <query name=\"q\">: attribute \"time-unit\" must be us, ms "
                          "or s (ts in microseconds, milliseconds or seconds since the epoch); got "
                          "\"min\"",
                          "t.xml:7: <query name=\"r\">: attribute \"time-unit\" must not be "
                          "empty"));
}

TEST(ParserErrorTest, DurableNamesAreUnique) {
  EXPECT_THAT(errorsOf(R"(<cepbus name="t">
<service-assembly name="a"><service-unit name="u" type="x">
  <subscribe address="x" durable="d"/></service-unit></service-assembly>
<service-assembly name="b"><service-unit name="u" type="x">
  <subscribe address="y" durable="d"/></service-unit></service-assembly>
</cepbus>)"),
              ElementsAre("t.xml:5: <subscribe address=\"y\">: attribute \"durable\" names durable "
                          "subscription \"d\" again (first at line 3); durable names are unique"));
}

TEST(ParserErrorTest, AttributeErrorsNameTheAttributesLine) {
  EXPECT_THAT(errorsOf(withStages(R"(<stage
    name="a"
    capacity="0"/>)")),
              ElementsAre("t.xml:5: <stage name=\"a\">: attribute \"capacity\" must be between 1 "
                          "and 1073741824, got \"0\""));
}

TEST(ParserErrorTest, CollectsEveryErrorInLineOrder) {
  ParseReport report;
  auto result = parseDescriptorString(R"(<cepbus name="t">
  <logging level="verbose"/>
  <stages>
    <stage name="dispatch" capacity="-3"/>
    <stag name="x"/>
  </stages>
  <routes>
    <route address="a.#" flow="seda" stage="nowhere"/>
  </routes>
  <service-assembly name="sa">
    <service-unit name="u" typ="cep"/>
    <service-unit name="u" type="cep">
      <publish address="a..b"/>
    </service-unit>
  </service-assembly>
</cepbus>)",
                                      "many.xml", &report);
  ASSERT_FALSE(result.isOk());
  std::vector<int> lines;
  for (const DescriptorError& e : report.errors) lines.push_back(e.line);
  // Line 8's stage reference is resolved after the whole document was read,
  // yet reported in line order.
  EXPECT_THAT(lines, ElementsAre(2, 4, 5, 8, 11, 11, 12, 13));
  EXPECT_THAT(report.errors[6].message, HasSubstr("duplicate service unit \"u\""));
  const std::string all = report.toString();
  EXPECT_EQ(result.status().message(), all);
  EXPECT_EQ(std::count(all.begin(), all.end(), '\n'), 7);
}

TEST(ParserErrorTest, ReportIsOverwrittenAndEmptyOnSuccess) {
  ParseReport report;
  report.errors.push_back(DescriptorError{"old.xml", 1, "stale"});
  EXPECT_TRUE(parseDescriptorString("<cepbus name=\"t\"/>", "t.xml", &report).isOk());
  EXPECT_TRUE(report.ok());
}

TEST(ParserErrorTest, UnreadableFileIsAnIoError) {
  ParseReport report;
  auto result = parseDescriptorFile("/nonexistent/cepbus.xml", &report);
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(result.status().code(), Status::Code::kIoError);
  ASSERT_EQ(report.errors.size(), 1u);
  EXPECT_EQ(report.errors[0].toString(),
            "/nonexistent/cepbus.xml: cannot read the descriptor: No such file or directory");
}

TEST(ParserErrorTest, FileErrorsNameThePathAsGiven) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() /
      ("cepbus_descriptor_test_" + std::to_string(::getpid()) + ".xml");
  {
    std::ofstream out(path);
    out << "<cepbus name=\"t\">\n<journal/>\n</cepbus>\n";
  }
  ParseReport report;
  EXPECT_FALSE(parseDescriptorFile(path, &report).isOk());
  std::filesystem::remove(path);
  ASSERT_EQ(report.errors.size(), 1u);
  EXPECT_EQ(report.errors[0].toString(),
            path.string() + ":2: <journal>: missing required attribute \"path\"");
}

TEST(ParserTest, JournalCommitDelay) {
  auto result = parseDescriptorString(
      "<cepbus name=\"t\">\n<journal path=\"j.db\" commit-delay-us=\"0\"/>\n</cepbus>\n", "t.xml");
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  EXPECT_EQ(result->journal->commit_delay_us, 0u);
  EXPECT_THAT(errorsOf("<cepbus name=\"t\">\n<journal path=\"j.db\" "
                       "commit-delay-us=\"2000000\"/>\n</cepbus>\n"),
              ElementsAre("t.xml:2: <journal>: attribute \"commit-delay-us\" must be between 0 "
                          "and 1000000, got \"2000000\""));
}

TEST(ParserTest, JournalRetryDelays) {
  auto result = parseDescriptorString(
      "<cepbus name=\"t\">\n<journal path=\"j.db\" retry-delay-ms=\"20\" "
      "max-retry-delay-ms=\"800\"/>\n</cepbus>\n",
      "t.xml");
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  EXPECT_EQ(result->journal->retry_delay_ms, 20u);
  EXPECT_EQ(result->journal->max_retry_delay_ms, 800u);
  EXPECT_THAT(errorsOf("<cepbus name=\"t\">\n<journal path=\"j.db\" retry-delay-ms=\"900\" "
                       "max-retry-delay-ms=\"800\"/>\n</cepbus>\n"),
              ElementsAre("t.xml:2: <journal>: retry-delay-ms=900 is longer than "
                          "max-retry-delay-ms=800"));
  EXPECT_THAT(errorsOf("<cepbus name=\"t\">\n<journal path=\"j.db\" "
                       "retry-delay-ms=\"0\"/>\n</cepbus>\n"),
              ElementsAre("t.xml:2: <journal>: attribute \"retry-delay-ms\" must be between 1 "
                          "and 3600000, got \"0\""));
}

// ---- fragments -------------------------------------------------------------

TEST(FragmentTest, ParsesALoneServiceAssembly) {
  ParseReport report;
  auto result = parseServiceAssembly(R"(<?xml version="1.0"?>
<!-- deployed through the admin API -->
<service-assembly name="alerts">
  <service-unit name="watch" type="cep">
    <subscribe address="alerts.#" filter="level = 'high'"/>
    <query name="burst" engine="algebra" input="alerts.raw" output="alerts.burst">
      <text>PATTERN A a</text>
    </query>
  </service-unit>
</service-assembly>
)",
                                     "POST /assemblies", &report, "/srv/deploy");
  ASSERT_TRUE(result.isOk()) << result.status().toString();
  EXPECT_TRUE(report.ok());
  const ServiceAssembly& sa = *result;
  EXPECT_EQ(sa.name, "alerts");
  EXPECT_EQ(sa.where.toString(), "POST /assemblies:3");
  EXPECT_EQ(sa.base_dir, std::filesystem::path("/srv/deploy"));
  ASSERT_EQ(sa.units.size(), 1u);
  EXPECT_EQ(sa.units[0].subscriptions[0].filter, "level = 'high'");
  EXPECT_EQ(sa.units[0].queries[0].engine, "algebra");
  EXPECT_EQ(sa.units[0].queries[0].text_where.line, 7);
}

TEST(FragmentTest, ReportsErrorsWithTheFragmentName) {
  ParseReport report;
  auto result = parseServiceAssembly(R"(<service-assembly name="a">
  <service-unit name="u"/>
  <service-unit name="v" type="x"><publish adress="x"/></service-unit>
</service-assembly>)",
                                     "fragment", &report);
  ASSERT_FALSE(result.isOk());
  EXPECT_EQ(report.toString(),
            "fragment:2: <service-unit name=\"u\">: missing required attribute \"type\"\n"
            "fragment:3: <publish>: unknown attribute \"adress\" (did you mean \"address\"?)\n"
            "fragment:3: <publish>: missing required attribute \"address\"");
}

TEST(FragmentTest, RootMustBeAServiceAssembly) {
  ParseReport report;
  EXPECT_FALSE(parseServiceAssembly("<cepbus name=\"t\"/>", "fragment", &report).isOk());
  ASSERT_EQ(report.errors.size(), 1u);
  EXPECT_EQ(report.errors[0].toString(),
            "fragment:1: the root element must be <service-assembly>, got <cepbus>");
}

}  // namespace
}  // namespace cepbus::descriptor
