// End-to-end tests of the `cepbus` program: the real binary, real descriptors,
// real files, real signals.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bus/core/event_json.h"
#include "bus/core/plugin/plugin_abi.h"
#include "bus/host/loader/plugin_loader.h"
#include "tests/integration/child_process.h"
#include "tests/testing/http_get.h"
#include "tests/testing/ports.h"
#include "tests/testing/wait.h"

namespace cepbus {
namespace {

using cepbus::testing::eventually;
using cepbus::testing::httpGet;
using cepbus::testing::reservedPort;
using cepbus::testing::waitListening;

namespace fs = std::filesystem;
using testing::ChildProcess;
using ::testing::HasSubstr;
using ::testing::Not;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("cepbus-cli-" + std::to_string(rd()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  std::string read(const std::string& name) {
    std::ifstream in(dir_ / name);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::unique_ptr<ChildProcess> start(std::vector<std::string> args) {
    args.insert(args.begin(), CEPBUS_BINARY);
    auto p = std::make_unique<ChildProcess>(std::move(args), dir_);
    EXPECT_TRUE(p->started());
    return p;
  }
  // Runs cepbus to its end and returns the exit code.
  int run(std::vector<std::string> args, std::string* out = nullptr, std::string* err = nullptr) {
    auto p = start(std::move(args));
    int code = p->wait(std::chrono::seconds(120));
    if (out) *out = p->out();
    if (err) *err = p->err();
    return code;
  }

  // `n` events A0..: one per line, ts 1..n, with a sequence attribute.
  std::string events(int n) {
    std::string s;
    for (int i = 1; i <= n; ++i) {
      s += R"({"type":"Tick","ts":)" + std::to_string(i) + R"(,"attrs":{"n":)" + std::to_string(i) +
           R"(,"symbol":")" + (i % 2 ? "IBM" : "MSFT") + "\"}}\n";
    }
    return s;
  }

  static std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
      if (!l.empty()) out.push_back(l);
    }
    return out;
  }

  // A bus named `name` whose replay source publishes in.jsonl (at `rate`
  // events/s, 0 = full speed) to "ticks" and whose sink writes out.jsonl;
  // `listeners` goes inside <cepbus> before the assembly.
  static std::string replayToSink(const std::string& name, int rate,
                                  const std::string& listeners = "") {
    return "<cepbus name=\"" + name + "\">\n" + listeners + R"(
  <service-assembly name="a">
    <service-unit name="src" type="replay-source">
      <param name="file" value="in.jsonl"/>
      <param name="rate" value=")" +
           std::to_string(rate) + R"("/>
      <publish address="ticks"/>
    </service-unit>
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="out.jsonl"/>
      <subscribe address="ticks"/>
    </service-unit>
  </service-assembly>
</cepbus>
)";
  }

  fs::path dir_;
};

TEST_F(CliTest, VersionHelpAndUsageErrors) {
  std::string out, err;
  EXPECT_EQ(run({"--version"}, &out), 0);
  EXPECT_THAT(out, HasSubstr("cepbus "));
  EXPECT_EQ(run({"--help"}, &out), 0);
  EXPECT_THAT(out, HasSubstr("run"));
  EXPECT_THAT(out, HasSubstr("validate"));
  EXPECT_THAT(out, HasSubstr("match"));
  EXPECT_EQ(run({"run", "--help"}, &out), 0);
  EXPECT_THAT(out, HasSubstr("--exit-when-drained"));
  EXPECT_EQ(run({"validate", "--help"}, &out), 0);
  EXPECT_EQ(run({"match", "--help"}, &out), 0);
  EXPECT_THAT(out, HasSubstr("--engine"));
  EXPECT_EQ(run({"frobnicate"}, nullptr, &err), 2);
  EXPECT_THAT(err, HasSubstr("unknown command \"frobnicate\""));
  EXPECT_EQ(run({"run"}, nullptr, &err), 2);
  EXPECT_EQ(run({"run", "--no-such-option", "x.xml"}, nullptr, &err), 2);
  EXPECT_THAT(err, HasSubstr("no-such-option"));
  EXPECT_EQ(run({"run", "--help"}, &out), 0);
  EXPECT_THAT(out, HasSubstr("--wire-name-budget"));
  EXPECT_EQ(run({"run", "--wire-name-budget=lots", "x.xml"}, nullptr, &err), 2);
  EXPECT_THAT(err, HasSubstr("--wire-name-budget lots: expected a number"));
  EXPECT_EQ(run({}), 2);
}

// What a plugin author needs to match and a bug report needs to say.
TEST_F(CliTest, VersionNamesThePluginAbiAndTheBuildTag) {
  std::string out;
  EXPECT_EQ(run({"--version"}, &out), 0);
  EXPECT_THAT(out, HasSubstr("cepbus " CEPBUS_VERSION "\nplugin ABI " +
                             std::to_string(CEPBUS_PLUGIN_ABI_VERSION) + "\nbuild tag "));
  EXPECT_THAT(out, HasSubstr(plugin::hostBuildTag()));
}

// `cepbus help COMMAND` is `cepbus COMMAND --help`: the man pages are made from it.
TEST_F(CliTest, HelpCommandIsTheCommandsHelp) {
  for (const char* cmd :
       {"run", "validate", "match", "join", "publish", "subscribe", "plugins", "cluster"}) {
    std::string help, dashed;
    EXPECT_EQ(run({"help", cmd}, &help), 0) << cmd;
    EXPECT_EQ(run({cmd, "--help"}, &dashed), 0) << cmd;
    EXPECT_EQ(help, dashed) << cmd;
    EXPECT_FALSE(help.empty()) << cmd;
  }
}

// Every command: --help without anything else (no descriptor read), one
// usage line, the sections the man pages are made of; a flag it does not
// take, worded one way.
TEST_F(CliTest, EveryCommandsHelpAndUnknownFlagLookTheSame) {
  const std::vector<std::vector<std::string>> helps = {
      {"run", "--help"},
      {"validate", "--help"},
      {"match", "--help"},
      {"join", "--help"},
      {"publish", "--help"},
      {"subscribe", "--help"},
      {"plugins", "--help"},
      {"cluster", "--help"},
      {"cluster", "init", "--help"},
      {"cluster", "publish", "no-such.xml", "--help"},
      {"--help"}};
  for (const auto& args : helps) {
    std::string out, err;
    ASSERT_EQ(run(args, &out, &err), 0) << args[0] << " " << args.back() << ": " << err;
    EXPECT_TRUE(out.starts_with("usage: cepbus ")) << out;
    EXPECT_EQ(out.find("usage:", 1), std::string::npos) << "two usage lines:\n" << out;
    for (const char* section :
         {"\nExamples:\n", "\nEnvironment:\n", "\nFiles:\n", "\nExit status:\n"}) {
      EXPECT_THAT(out, HasSubstr(section)) << args[0];
    }
  }
  for (const char* cmd :
       {"run", "validate", "match", "join", "publish", "subscribe", "plugins", "cluster"}) {
    std::string err;
    EXPECT_EQ(run({cmd, "--no-such-flag"}, nullptr, &err), 2) << cmd;
    EXPECT_THAT(err,
                HasSubstr(std::string("cepbus ") + cmd +
                          ": unknown argument '--no-such-flag' (see cepbus " + cmd + " --help)"))
        << cmd;
  }
}

// `validate` means "will start": the files a run opens are checked, each
// error naming the descriptor line of the element or param that names it.
TEST_F(CliTest, ValidateChecksTheFilesARunWillOpen) {
  write("files.xml", R"(<cepbus name="files">
  <journal path="no-such-folder/journal.db"/>
  <listeners>
    <amqp host="127.0.0.1" port="0" allow-anonymous="true">
      <tls cert="missing-cert.pem" key="missing-key.pem"/>
    </amqp>
  </listeners>
  <plugins>
    <plugin name="nfa" library="./no-such-plugin.so"/>
  </plugins>
  <service-assembly name="a">
    <service-unit name="src" type="replay-source">
      <param name="file" value="missing.jsonl"/>
      <publish address="ticks"/>
    </service-unit>
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="no-such-folder/out.jsonl"/>
      <subscribe address="ticks"/>
    </service-unit>
    <service-unit name="hq" type="amqp-bridge">
      <param name="url" value="amqps://127.0.0.1:5671"/>
      <param name="remote-address" value="x"/>
      <param name="direction" value="out"/>
      <param name="ca" value="missing-ca.pem"/>
      <subscribe address="ticks"/>
    </service-unit>
  </service-assembly>
</cepbus>
)");
  std::string out, err;
  EXPECT_EQ(run({"validate", "files.xml"}, &out, &err), 1) << out;
  // Paths as the descriptor resolves them: relative to its folder, here ".".
  EXPECT_THAT(err, HasSubstr("files.xml:2: <journal>: cannot write no-such-folder/journal.db: "
                             "its folder no-such-folder: No such file or directory"));
  EXPECT_THAT(err, HasSubstr("files.xml:5: <tls>: cannot read missing-cert.pem"));
  EXPECT_THAT(err, HasSubstr("files.xml:9: plugin \"nfa\": "));
  EXPECT_THAT(err, HasSubstr("files.xml:13: replay-source \"src\": cannot read missing.jsonl: "
                             "No such file or directory"));
  EXPECT_THAT(err, HasSubstr("files.xml:17: replay-sink \"sink\": cannot write "
                             "no-such-folder/out.jsonl"));
  EXPECT_THAT(err, HasSubstr("files.xml:24: amqp-bridge \"hq\": ca: cannot read missing-ca.pem"));

  // A certificate that exists but is none: Proton's refusal, at validate.
  write("cert.pem", "not a certificate\n");
  write("key.pem", "not a key\n");
  write("tls.xml", R"(<cepbus name="tls">
  <listeners>
    <amqp host="127.0.0.1" port="0"><tls cert="cert.pem" key="key.pem"/></amqp>
  </listeners>
</cepbus>
)");
  EXPECT_EQ(run({"validate", "tls.xml"}, &out, &err), 1) << out;
  EXPECT_THAT(err, HasSubstr("tls.xml:3: <tls>: certificate cert.pem / key key.pem not usable: "));
}

// The build tree's plugins are found by default (bus/app/cepbus ->
// ../../plugins), with their engines and options; a --plugin-path folder
// comes first.
TEST_F(CliTest, PluginsListsTheSearchPathEnginesAndOptions) {
  std::string out, err;
  EXPECT_EQ(run({"plugins", "--plugin-path", dir_.string()}, &out, &err), 0) << out << err;
  EXPECT_THAT(out, HasSubstr("search path:\n  " + dir_.string() + "\n"));
  EXPECT_THAT(out, HasSubstr(std::string(CEPBUS_TEST_BUILD_DIR) + "/plugins\n"));
  EXPECT_THAT(out, HasSubstr("plugin nfa 1.0.0\n    engine nfa (options: key=VALUE: meaning)\n"
                             "      construction=batched|per_event: "));
  EXPECT_THAT(out, HasSubstr("      max_delay=D >= 0 (or slack=D): (every engine; the host's)"));
  // A file that is no plugin is reported, and makes the exit status 1.
  write("libcepbus_plugin_broken.so", "not an ELF file");
  EXPECT_EQ(run({"plugins", "--plugin-path", dir_.string()}, &out, &err), 1);
  EXPECT_THAT(out, HasSubstr("libcepbus_plugin_broken.so\n  NOT USABLE: "));
  EXPECT_EQ(run({"plugins", "--bogus"}, nullptr, &err), 2);
}

TEST_F(CliTest, ValidateAcceptsTheQuickstart) {
  std::string out, err;
  const fs::path quickstart =
      fs::path(CEPBUS_TEST_SOURCE_DIR) / "examples/quickstart/quickstart.xml";
  EXPECT_EQ(run({"validate", quickstart.string()}, &out, &err), 0) << err;
  EXPECT_THAT(out, HasSubstr("OK"));
}

TEST_F(CliTest, ValidateNamesFileAndLineOfEveryError) {
  write("bad.xml", R"(<cepbus name="bad">
  <stages>
    <stage name="s" capacity="-3"/>
  </stages>
  <routes>
    <route address="a.#" flow="seda" stage="nowhere"/>
  </routes>
</cepbus>
)");
  std::string err;
  EXPECT_EQ(run({"validate", "bad.xml"}, nullptr, &err), 1);
  EXPECT_THAT(err, HasSubstr("bad.xml:3:"));
  EXPECT_THAT(err, HasSubstr("capacity"));
  EXPECT_THAT(err, HasSubstr("bad.xml:6:"));
  EXPECT_THAT(err, HasSubstr("nowhere"));

  write("broken.xml", "<cepbus name=\"x\">\n  <stages>\n</cepbus>\n");
  EXPECT_EQ(run({"validate", "broken.xml"}, nullptr, &err), 1);
  EXPECT_THAT(err, HasSubstr("broken.xml:"));

  EXPECT_EQ(run({"validate", "missing.xml"}, nullptr, &err), 1);
  EXPECT_THAT(err, HasSubstr("missing.xml"));
}

TEST_F(CliTest, ValidateRejectsBadFiltersAndServiceParams) {
  write("in.jsonl", events(1));
  write("svc.xml", R"(<cepbus name="svc">
  <service-assembly name="a">
    <service-unit name="src" type="replay-source">
      <param name="file" value="in.jsonl"/>
      <param name="rate" value="fast"/>
      <publish address="in.ticks"/>
    </service-unit>
    <service-unit name="out" type="replay-sink">
      <param name="file" value="out.jsonl"/>
      <subscribe address="in.#" filter="price &gt;"/>
    </service-unit>
    <service-unit name="x" type="no-such-type"/>
  </service-assembly>
</cepbus>
)");
  std::string err;
  EXPECT_EQ(run({"validate", "svc.xml"}, nullptr, &err), 1);
  EXPECT_THAT(err, HasSubstr("svc.xml:5:"));   // rate
  EXPECT_THAT(err, HasSubstr("svc.xml:10:"));  // filter
  EXPECT_THAT(err, HasSubstr("svc.xml:12:"));  // unknown type
  EXPECT_THAT(err, HasSubstr("no-such-type"));
}

// Replay source -> router -> SEDA flow (a stage) -> replay sink: the sink's
// file holds every event of the source, in order, and the bad line of the
// source is reported with its file and line but loses no good event.
TEST_F(CliTest, ReplayThroughASedaFlowDeliversEveryEventInOrder) {
  std::string input = events(2000);
  input.insert(input.find('\n', input.size() / 2) + 1, "{\"type\":\"Tick\"}\n");
  write("in.jsonl", input);
  write("pipe.xml", R"(<cepbus name="pipe">
  <stages>
    <stage name="dispatch" capacity="100000" min-threads="1" max-threads="1"/>
  </stages>
  <routes default-flow="st">
    <route address="ticks.#" flow="seda" stage="dispatch"/>
  </routes>
  <service-assembly name="a">
    <service-unit name="src" type="replay-source">
      <param name="file" value="in.jsonl"/>
      <publish address="ticks.all"/>
    </service-unit>
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="out.jsonl"/>
      <subscribe address="ticks.*"/>
    </service-unit>
    <service-unit name="ibm" type="replay-sink">
      <param name="file" value="ibm.jsonl"/>
      <subscribe address="ticks.#" filter="symbol = 'IBM' AND n &gt; 1000"/>
    </service-unit>
  </service-assembly>
</cepbus>
)");
  std::string out, err;
  ASSERT_EQ(run({"run", "pipe.xml", "--exit-when-drained"}, &out, &err), 0) << err;
  const auto got = lines(read("out.jsonl"));
  ASSERT_EQ(got.size(), 2000u) << err;
  for (size_t i = 0; i < got.size(); ++i) {
    auto e = decodeEvent(got[i]);
    ASSERT_TRUE(e.isOk()) << got[i];
    EXPECT_EQ((*e)->ts(), static_cast<Timestamp>(i + 1));
  }
  EXPECT_EQ(lines(read("ibm.jsonl")).size(), 500u);  // odd seq in 1001..2000
  const size_t bad_line = lines(input.substr(0, input.find("{\"type\":\"Tick\"}\n"))).size() + 1;
  EXPECT_THAT(err,
              HasSubstr("in.jsonl: line " + std::to_string(bad_line) + ": missing field \"ts\""));
  // The closing line accounts for the whole file, the skipped line included.
  EXPECT_THAT(err, HasSubstr("src: replayed 2000 events from in.jsonl, skipped 1 bad line"));
}

// A query checkpointed once a minute on a reliable route: only the stop
// writes a checkpoint, and it must do so while the flows still run, so that
// the input's acknowledgements commit and every composite the query held
// for it comes out before `--exit-when-drained` exits.
TEST_F(CliTest, AStopStoresTheLastCheckpointAndPublishesWhatItHeld) {
  std::string input;
  for (int ts = 1; ts <= 1000; ++ts) {
    input += std::string("{\"type\":\"") + (ts % 2 == 1 ? "A" : "B") +
             "\",\"ts\":" + std::to_string(ts) +
             ",\"attrs\":{\"g\":" + std::to_string((ts - 1) / 2) + "}}\n";
  }
  write("in.jsonl", input);
  write("kept.xml", R"(<cepbus name="kept">
  <journal path="journal.db"/>
  <routes default-flow="st">
    <route address="ticks" flow="reliable" qos="reliable"/>
  </routes>
  <service-assembly name="a">
    <service-unit name="src" type="replay-source">
      <param name="file" value="in.jsonl"/>
      <publish address="ticks"/>
    </service-unit>
    <service-unit name="cep" type="cep">
      <query name="pairs" engine="nfa" input="ticks" output="pairs">
        <option name="checkpoint_interval" value="60000"/>
        <text>PATTERN SEQ(A a, B b) WHERE a.g = b.g WITHIN 5 RETURN Pair(a.g AS g)</text>
      </query>
    </service-unit>
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="pairs.jsonl"/>
      <subscribe address="pairs"/>
    </service-unit>
  </service-assembly>
</cepbus>
)");
  std::string out, err;
  ASSERT_EQ(run({"run", "kept.xml", "--exit-when-drained"}, &out, &err), 0) << err;
  EXPECT_EQ(lines(read("pairs.jsonl")).size(), 500u) << err;
  EXPECT_THAT(err, Not(HasSubstr("not stored"))) << err;
  EXPECT_THAT(err, Not(HasSubstr("stopped without a checkpoint"))) << err;
}

TEST_F(CliTest, SigtermDrainsAndExitsCleanly) {
  write("in.jsonl", events(100000));
  write("slow.xml", replayToSink("slow", 2000));
  auto p = start({"run", "slow.xml"});
  ASSERT_TRUE(eventually("50 events written before the SIGTERM",
                         [&] { return lines(read("out.jsonl")).size() >= 50; }));
  p->signal(SIGTERM);
  EXPECT_EQ(p->wait(std::chrono::seconds(30)), 0) << p->err();
  EXPECT_THAT(p->err(), HasSubstr("draining and stopping"));
  const std::string text = read("out.jsonl");
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');  // only whole lines
  const auto got = lines(text);
  EXPECT_GE(got.size(), 50u);
  EXPECT_LT(got.size(), 100000u);
}

// The main job: the quickstart descriptor's equal-prices query detects each
// moment the generator planted (three symbols at one price).
TEST_F(CliTest, QuickstartDetectsThePlantedEqualPrices) {
  const fs::path src = fs::path(CEPBUS_TEST_SOURCE_DIR) / "examples/quickstart";
  fs::copy_file(src / "stocks.jsonl", dir_ / "stocks.jsonl");
  std::string xml;
  {
    std::ifstream in(src / "quickstart.xml");
    std::stringstream ss;
    ss << in.rdbuf();
    xml = ss.str();
  }
  // Full speed: the test checks what is detected, not the pacing.
  const std::string rate = "<param name=\"rate\" value=\"200\"/>";
  ASSERT_NE(xml.find(rate), std::string::npos);
  xml.replace(xml.find(rate), rate.size(), "<param name=\"rate\" value=\"0\"/>");
  write("quickstart.xml", xml);
  std::string out, err;
  ASSERT_EQ(run({"run", "quickstart.xml", "--exit-when-drained"}, &out, &err), 0) << err;
  const auto got = lines(out);
  EXPECT_EQ(got.size(), 9u) << out << err;
  for (const auto& l : got) {
    auto e = decodeEvent(l);
    ASSERT_TRUE(e.isOk()) << l;
    EXPECT_EQ((*e)->type().name(), "EqualPrices");
  }
}

// Hierarchical queries on the bus, each reading another's output address: a
// window counting a pattern's composites per group, and a pattern over a
// window's results (two consecutive averages that rise).
TEST_F(CliTest, WindowsAndPatternsReadEachOthersResults) {
  write("in.jsonl", R"({"type":"A","ts":1,"attrs":{"g":"x"}}
{"type":"B","ts":2,"attrs":{"g":"x"}}
{"type":"Tick","ts":3,"attrs":{"v":1}}
{"type":"Tick","ts":5,"attrs":{"v":3}}
{"type":"A","ts":10,"attrs":{"g":"y"}}
{"type":"Tick","ts":11,"attrs":{"v":5}}
{"type":"B","ts":12,"attrs":{"g":"y"}}
{"type":"A","ts":20,"attrs":{"g":"x"}}
{"type":"B","ts":21,"attrs":{"g":"x"}}
{"type":"Tick","ts":25,"attrs":{"v":4}}
{"type":"Tick","ts":31,"attrs":{"v":10}}
{"type":"Tick","ts":45,"attrs":{"v":0}}
{"type":"A","ts":150,"attrs":{"g":"x"}}
{"type":"B","ts":151,"attrs":{"g":"x"}}
)");
  write("levels.xml", R"(<cepbus name="levels">
  <service-assembly name="a">
    <service-unit name="src" type="replay-source">
      <param name="file" value="in.jsonl"/>
      <publish address="ticks"/>
    </service-unit>
    <service-unit name="cep" type="cep">
      <query name="pairs" engine="nfa" input="ticks" output="pairs">
        <text>PATTERN SEQ(A a, B b) WHERE a.g = b.g WITHIN 5 RETURN Pair(a.g AS g)</text>
      </query>
      <query name="per_group" engine="auto" input="pairs" output="counts">
        <text>FROM Pair p WINDOW TUMBLING 100 GROUP BY p.g RETURN Pairs(p.g AS g, count(p) AS n)</text>
      </query>
      <query name="means" engine="auto" input="ticks" output="means">
        <text>FROM Tick t WINDOW TUMBLING 10 RETURN Mean(avg(t.v) AS mean)</text>
      </query>
      <query name="rises" engine="nfa" input="means" output="rises">
        <text>PATTERN SEQ(Mean x, Mean y) WHERE y.mean &gt; x.mean STRATEGY strict_contiguity RETURN Rise(x.mean AS low, y.mean AS high)</text>
      </query>
    </service-unit>
    <service-unit name="counts" type="replay-sink">
      <param name="file" value="counts.jsonl"/>
      <subscribe address="counts"/>
    </service-unit>
    <service-unit name="rises" type="replay-sink">
      <param name="file" value="rises.jsonl"/>
      <subscribe address="rises"/>
    </service-unit>
  </service-assembly>
</cepbus>
)");
  std::string out, err;
  ASSERT_EQ(run({"run", "levels.xml", "--exit-when-drained"}, &out, &err), 0) << err;
  auto describe = [](const std::string& line) {
    auto e = decodeEvent(line);
    if (!e.isOk()) return "bad line: " + line;
    std::string text = std::string((*e)->type().name()) + " [" + std::to_string((*e)->start()) +
                       "," + std::to_string((*e)->ts()) + "]";
    for (const char* name : {"g", "n", "low", "high"}) {
      if (const Value* v = (*e)->find(Symbol::intern(name))) text += " " + v->toString();
    }
    return text;
  };
  std::vector<std::string> counts, rises;
  for (const std::string& l : lines(read("counts.jsonl"))) counts.push_back(describe(l));
  for (const std::string& l : lines(read("rises.jsonl"))) rises.push_back(describe(l));
  // The pair at 151 closes [0, 100): x paired at 2 and 21, y at 12; the
  // stop closes [100, 200) after the pattern's last pair reached it.
  EXPECT_EQ(counts, (std::vector<std::string>{"Pairs [0,99] \"x\" 2", "Pairs [0,99] \"y\" 1",
                                              "Pairs [100,199] \"x\" 1"}))
      << err;
  // Means 2, 5, 4, 10, 0 over [0,10) .. [40,50): rises 2 -> 5 and 4 -> 10,
  // each from the first mean's window start to the second's end.
  EXPECT_EQ(rises, (std::vector<std::string>{"Rise [0,19] 2.0 5.0", "Rise [20,39] 4.0 10.0"}))
      << err;
}

// The real bus with its AMQP listener, and Debian's python3-qpid-proton as an
// independent client: it subscribes with a wildcard, publishes unsettled
// messages (each accepted only once the bus admitted it), sees a malformed one
// rejected with a reason on the same link, and receives what it published; a
// replay sink on the bus records the same events.
TEST_F(CliTest, AnIndependentAmqpClientPublishesAndSubscribes) {
  const int port = reservedPort();
  write("amqp.xml", R"(<cepbus name="amqp">
  <listeners><amqp host="127.0.0.1" port=")" +
                        std::to_string(port) +
                        R"(" allow-anonymous="true"/></listeners>
  <service-assembly name="a">
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="out.jsonl"/>
      <subscribe address="ticks.#"/>
    </service-unit>
  </service-assembly>
</cepbus>
)");
  write("client.py", R"(import sys, time
from proton import Message
from proton.utils import BlockingConnection, SendException
url = "127.0.0.1:" + sys.argv[1]
for attempt in range(100):
    try:
        conn = BlockingConnection(url, timeout=10)
        break
    except Exception:
        time.sleep(0.1)
receiver = conn.create_receiver("ticks.#")
sender = conn.create_sender("ticks.ibm")
for i in range(1, 6):
    sender.send(Message(subject="Tick", properties={"ts": i, "n": i}))
try:
    sender.send(Message(subject="Tick", properties={"n": 99}))
    print("malformed accepted")
except SendException as e:
    print("malformed rejected:", e.state)
sender.send(Message(subject="Tick", properties={"ts": 6, "n": 6}))
for i in range(6):
    m = receiver.receive(timeout=10)
    receiver.accept()
    print("got", m.subject, m.properties["ts"], m.body["n"] if isinstance(m.body, dict) else m.properties.get("n"))
conn.close()
)");
  auto bus = start({"run", "amqp.xml"});
  std::vector<std::string> py = {"/usr/bin/python3", (dir_ / "client.py").string(),
                                 std::to_string(port)};
  fs::create_directories(dir_ / "client");
  ChildProcess client(py, dir_ / "client");
  ASSERT_TRUE(client.started());
  ASSERT_EQ(client.wait(std::chrono::seconds(60)), 0) << client.out() << client.err() << bus->err();
  const std::string out = client.out();
  EXPECT_THAT(out, HasSubstr("malformed rejected"));
  for (int i = 1; i <= 6; ++i) {
    EXPECT_THAT(out, HasSubstr("got Tick " + std::to_string(i) + " " + std::to_string(i))) << out;
  }
  bus->signal(SIGTERM);
  ASSERT_EQ(bus->wait(std::chrono::seconds(30)), 0) << bus->err();
  const auto recorded = lines(read("out.jsonl"));
  ASSERT_EQ(recorded.size(), 6u);
  auto first = decodeEvent(recorded[0]);
  ASSERT_TRUE(first.isOk()) << recorded[0];
  EXPECT_EQ((*first)->ts(), 1);
  EXPECT_EQ((*first)->find(Symbol::intern("n"))->asInt(), 1);
}

// The real bus with its admin listener: Prometheus metrics and the registry
// over REST, while a replay runs through it.
TEST_F(CliTest, TheAdminListenerServesMetricsAndTheRegistry) {
  const int port = reservedPort();
  write("in.jsonl", events(100));
  write("admin.xml", replayToSink("admin", 0,
                                  "  <listeners><http host=\"127.0.0.1\" port=\"" +
                                      std::to_string(port) + "\"/></listeners>"));
  auto bus = start({"run", "admin.xml"});
  ASSERT_TRUE(
      eventually("the 100 events written", [&] { return lines(read("out.jsonl")).size() >= 100; }));
  ASSERT_TRUE(waitListening(port)) << bus->err();
  // A delivery is counted once the sink's write returned, which may be after
  // the line is in the file: the scrape is repeated until it shows all 100.
  const std::string delivered =
      "cepbus_component_delivered_total{name=\"a.sink:in\",kind=\"endpoint\"} 100";
  std::string metrics;
  EXPECT_TRUE(eventually("the 100 deliveries counted", [&] {
    metrics = httpGet(port, "/metrics");
    return metrics.find(delivered) != std::string::npos;
  })) << metrics;
  EXPECT_THAT(metrics, HasSubstr("200 OK"));
  EXPECT_THAT(metrics, HasSubstr("# TYPE cepbus_component_delivered_total counter"));
  EXPECT_THAT(httpGet(port, "/api/components"), HasSubstr("\"a.src\""));
  EXPECT_THAT(httpGet(port, "/no/such/path"), HasSubstr("404"));
  bus->signal(SIGINT);
  EXPECT_EQ(bus->wait(std::chrono::seconds(30)), 0) << bus->err();
  EXPECT_THAT(bus->err(), HasSubstr("http://127.0.0.1:" + std::to_string(port) + "/"));
}

}  // namespace
}  // namespace cepbus
