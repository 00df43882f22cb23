// End-to-end tests of `cepbus match --engine all`: the real binary running a
// query on the nfa, algebra and petri plugins and comparing their matches,
// and the algebra engine's default context said on stderr and in the bus log;
// and of `--engine auto`: the engine it picks, on stderr and in the bus log.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/integration/child_process.h"

namespace cepbus {
namespace {

namespace fs = std::filesystem;
using testing::ChildProcess;
using ::testing::HasSubstr;
using ::testing::Not;

class MatchEnginesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("cepbus-match-engines-" + std::to_string(rd()));
    fs::create_directories(dir_);
    // A, B, C in turn with a repeating x: every SEQ(A, B, C) within 8 has
    // several starts per end, which is where CONTEXT recent keeps only one.
    std::ofstream events(dir_ / "events.jsonl");
    for (int i = 1; i <= 30; ++i) {
      events << R"({"type":")" << static_cast<char>('A' + i % 3) << R"(","ts":)" << i
             << R"(,"attrs":{"x":)" << i % 4 << "}}\n";
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  int run(std::vector<std::string> args, std::string* out, std::string* err) {
    args.insert(args.begin(), CEPBUS_BINARY);
    ChildProcess p(std::move(args), dir_);
    EXPECT_TRUE(p.started());
    const int code = p.wait(std::chrono::seconds(120));
    *out = p.out();
    *err = p.err();
    return code;
  }

  // `cepbus match --engine all` on `query`; its summary line, parsed.
  nlohmann::json compare(const std::string& query, int expected_exit, std::string* err) {
    std::string out;
    EXPECT_EQ(
        run({"match", "--engine", "all", "--query", query, "--events", "events.jsonl"}, &out, err),
        expected_exit)
        << query << "\n"
        << *err;
    auto summary = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(summary.is_discarded()) << out;
    return summary;
  }

  static const nlohmann::json& engine(const nlohmann::json& summary, const std::string& name) {
    for (const auto& e : summary["engines"]) {
      if (e["engine"] == name) return e;
    }
    ADD_FAILURE() << "no engine " << name << " in " << summary.dump();
    static const nlohmann::json none;
    return none;
  }

  fs::path dir_;
};

TEST_F(MatchEnginesTest, EveryEngineAgreesUnderContextUnrestricted) {
  std::string err;
  const auto summary =
      compare("PATTERN SEQ(A a, B b, C c) WHERE a.x != c.x WITHIN 8 CONTEXT unrestricted", 0, &err);
  EXPECT_EQ(summary["reference"], "nfa");
  EXPECT_EQ(summary["agree"], true);
  ASSERT_EQ(summary["engines"].size(), 3u);
  const auto& nfa = engine(summary, "nfa");
  EXPECT_EQ(nfa["reference"], true);
  EXPECT_GT(nfa["matches"].get<int>(), 10);
  for (const char* name : {"algebra", "petri"}) {
    const auto& e = engine(summary, name);
    EXPECT_EQ(e["accepted"], true) << name;
    EXPECT_EQ(e["agrees"], true) << name;
    EXPECT_EQ(e["matches"], nfa["matches"]) << name;
    EXPECT_EQ(e["checksum"], nfa["checksum"]) << name;
    EXPECT_TRUE(e["seconds"].is_number()) << name;
    EXPECT_GE(e["cpu_seconds"].get<double>(), 0.0) << name;
  }
  EXPECT_THAT(err, Not(HasSubstr("notice")));
}

// A real difference: without a CONTEXT clause the algebra engine keeps, per
// end time, only the latest-starting match, and says so.
TEST_F(MatchEnginesTest, AlgebrasDefaultContextDiffersAndIsNamed) {
  std::string err;
  const auto summary = compare("PATTERN SEQ(A a, B b, C c) WITHIN 8", 1, &err);
  EXPECT_EQ(summary["agree"], false);
  const auto& nfa = engine(summary, "nfa");
  const auto& algebra = engine(summary, "algebra");
  EXPECT_EQ(engine(summary, "petri")["agrees"], true);
  EXPECT_EQ(algebra["agrees"], false);
  EXPECT_LT(algebra["matches"].get<int>(), nfa["matches"].get<int>());
  // The earliest match that nfa has and algebra lacks: a3 b4 c5 has one
  // start; c8 is the first end with two (a3, a6), of which recent keeps a6.
  const auto& diff = algebra["first_difference"];
  EXPECT_EQ(diff["ts"], nlohmann::json::parse("[3,4,8]")) << diff.dump();
  EXPECT_EQ(diff["in_reference"], 1);
  EXPECT_EQ(diff["in_engine"], 0);
  ASSERT_TRUE(algebra.contains("notices")) << algebra.dump();
  EXPECT_THAT(algebra["notices"][0].get<std::string>(), HasSubstr("CONTEXT recent"));
  EXPECT_THAT(err, HasSubstr("notice: --query: the algebra engine runs this query under "
                             "CONTEXT recent"));
  EXPECT_THAT(err, HasSubstr("engine 'algebra' differs from 'nfa' (the reference)"));
}

// CONTEXT recent chooses the latest-starting instance before a WHERE
// conjunct relating two variables is checked: the one kept fails it and no
// earlier one takes its place. The notice says so rather than promise a match.
TEST_F(MatchEnginesTest, AlgebrasRecentChoosesBeforeWhereAndTheNoticeSaysSo) {
  std::ofstream(dir_ / "events.jsonl") << R"({"type":"A","ts":1,"attrs":{"x":1}})"
                                          "\n"
                                          R"({"type":"A","ts":2,"attrs":{"x":2}})"
                                          "\n"
                                          R"({"type":"B","ts":3,"attrs":{"x":1}})"
                                          "\n";
  std::string err;
  const auto summary = compare("PATTERN SEQ(A a, B b) WHERE a.x = b.x", 1, &err);
  EXPECT_EQ(engine(summary, "nfa")["matches"], 1) << summary.dump();
  EXPECT_EQ(engine(summary, "algebra")["matches"], 0) << summary.dump();
  EXPECT_THAT(err, HasSubstr("before the WHERE conjuncts relating its variables are checked"));
  EXPECT_THAT(err, HasSubstr("possibly none"));
}

// An engine that refuses is reported with its reason, which names an engine
// that runs the construct; the accepting ones still agree.
TEST_F(MatchEnginesTest, RefusalsAreReportedAndDoNotCountAsDifferences) {
  std::string err;
  const auto summary = compare("PATTERN SEQ(A a, B+ b[], NOT(C c), A d) WITHIN 4", 0, &err);
  EXPECT_EQ(summary["agree"], true);
  const auto& petri = engine(summary, "petri");
  EXPECT_EQ(petri["accepted"], false);
  EXPECT_THAT(petri["refusal"].get<std::string>(), HasSubstr("NOT(...) next to a Kleene element"));
  EXPECT_THAT(petri["refusal"].get<std::string>(), HasSubstr("the nfa engine runs it"));
}

// Every strategy runs on every engine (algebra and petri select among their
// skip_till_any_match matches), with the same matches and no notice.
TEST_F(MatchEnginesTest, EveryEngineAgreesUnderEveryStrategy) {
  int any_match = 0;
  for (const char* strategy :
       {"skip_till_any_match", "skip_till_next_match", "strict_contiguity"}) {
    std::string err;
    const auto summary =
        compare(std::string("PATTERN SEQ(A a, B b) WITHIN 4 STRATEGY ") + strategy +
                    " CONTEXT unrestricted",  // algebra's default, recent, keeps fewer
                0, &err);
    EXPECT_EQ(summary["agree"], true) << strategy << ": " << summary.dump();
    const int matches = engine(summary, "nfa")["matches"].get<int>();
    for (const char* name : {"algebra", "petri"}) {
      const auto& e = engine(summary, name);
      EXPECT_EQ(e["accepted"], true) << name << " " << strategy << ": " << e.dump();
      EXPECT_EQ(e["matches"], matches) << name << " " << strategy;
      EXPECT_FALSE(e.contains("notices")) << name << " " << strategy << ": " << e.dump();
    }
    // Each A is followed by B one and four time units later: two matches
    // per A for skip_till_any_match, one for the others.
    if (any_match == 0) {
      any_match = matches;
    } else {
      EXPECT_LT(matches, any_match) << strategy;
    }
    EXPECT_GT(matches, 0) << strategy;
  }
}

TEST_F(MatchEnginesTest, PatternsFilesNameThePatternThatDiffers) {
  std::ofstream(dir_ / "patterns.txt") << "same: PATTERN SEQ(A a, C c) WITHIN 2\n"
                                          "fewer: PATTERN SEQ(A a, B b, C c) WITHIN 8\n";
  std::string out, err;
  ASSERT_EQ(
      run({"match", "--engine", "all", "--patterns", "patterns.txt", "--events", "events.jsonl"},
          &out, &err),
      1)
      << err;
  const auto summary = nlohmann::json::parse(out);
  const auto& algebra = engine(summary, "algebra");
  // SEQ(A, C) within 2 has one start per end, so recent loses nothing there.
  EXPECT_EQ(algebra["first_difference"]["pattern"], "fewer") << out;
  EXPECT_THAT(err, HasSubstr("patterns.txt:2 (pattern 'fewer'): the algebra engine runs"));
}

// The "rising run" of docs/pattern-language.md under skip-till-any-match
// (and CONTEXT unrestricted, for every match on algebra), with
// `b[i].price >= b[1].price`, which every rising run satisfies: an
// iteration predicate reading b[1] keeps petri's Kleene loop from a lazy
// Kleene place, so it keeps every rising subsequence of the window as a
// token. On three copies of the quickstart's ticks, each far past the
// window of the one before, it needs about 4 s of CPU in a Release build
// (1.3 s a copy), nfa and algebra about 0.6 s; --timeout 1 stops it.
TEST_F(MatchEnginesTest, AnEngineStillRunningAtTheTimeoutIsReportedAsTimedOut) {
  std::ifstream quickstart(std::string(CEPBUS_TEST_SOURCE_DIR) +
                           "/examples/quickstart/stocks.jsonl");
  std::vector<nlohmann::json> ticks;
  for (std::string line; std::getline(quickstart, line);) {
    if (!line.empty()) ticks.push_back(nlohmann::json::parse(line));
  }
  ASSERT_EQ(ticks.size(), 600u);
  {
    std::ofstream stocks(dir_ / "stocks.jsonl");
    for (int64_t copy = 0; copy < 3; ++copy) {
      for (nlohmann::json tick : ticks) {
        tick["ts"] = tick["ts"].get<int64_t>() + copy * 100000;
        stocks << tick.dump() << '\n';
      }
    }
  }
  std::string out, err;
  const int status =
      run({"match", "--engine", "all", "--timeout", "1", "--events", "stocks.jsonl", "--query",
           "PATTERN SEQ(Stock a, Stock+ b[], Stock c) WHERE b[i].price > b[i-1].price AND "
           "b[i].price >= b[1].price AND b[i].symbol = a.symbol AND c.symbol = a.symbol AND "
           "c.price < b[1].price AND count(b[]) >= 3 WITHIN 500 PARTITION BY symbol "
           "CONTEXT unrestricted"},
          &out, &err);
  const auto summary = nlohmann::json::parse(out);
  const auto& petri = engine(summary, "petri");
  EXPECT_EQ(petri.value("timed_out", false), true) << out;
  // Stopped before the end of the 1,800 events (about 700 in a second on an
  // idle machine).
  EXPECT_LT(petri.value("after_events", 3 * ticks.size()), 3 * ticks.size()) << out;
  EXPECT_FALSE(petri.contains("matches")) << out;
  // nfa and algebra take about 0.6 s here, but several times that under a
  // sanitizer: either may time out too, and is then reported like petri.
  // Two that complete are compared; with fewer there is nothing to compare.
  int completed = 0;
  for (const char* name : {"nfa", "algebra"}) {
    const auto& e = engine(summary, name);
    if (e.contains("timed_out")) {
      EXPECT_EQ(e.value("timed_out", false), true) << out;
    } else {
      ++completed;
      EXPECT_EQ(e.value("matches", -1), 3 * 60209) << out;
    }
  }
  EXPECT_EQ(summary.contains("agree"), completed == 2) << out;
  EXPECT_EQ(summary.value("agree", completed == 2), completed == 2) << out;
  EXPECT_EQ(status, completed == 2 ? 0 : 1) << err;
  EXPECT_THAT(err, HasSubstr("engine 'petri' timed out after 1 s"));
}

// With one engine completing there is nothing to compare: no "agree", the
// reason instead, and exit status 1.
TEST_F(MatchEnginesTest, OneCompletedEngineIsNotAnAgreement) {
  std::string err;
  const auto summary =
      compare("PATTERN SEQ(A a, NOT(C c), B+ b[], A d) WHERE c.x = a.x WITHIN 4", 1, &err);
  EXPECT_FALSE(summary.contains("agree")) << summary.dump();
  EXPECT_EQ(summary["nothing_to_compare"],
            "only nfa completed: algebra refused the query, petri refused the query");
  EXPECT_THAT(err, HasSubstr("nothing to compare"));
}

TEST_F(MatchEnginesTest, TheSummaryCountsTheSkippedLines) {
  std::ofstream(dir_ / "events.jsonl", std::ios::app) << "{\"type\":\"A\"}\n";
  std::string err;
  const auto summary = compare("PATTERN SEQ(A a, B b) WITHIN 4 CONTEXT unrestricted", 0, &err);
  EXPECT_EQ(summary["skipped"], 1) << summary.dump();
  EXPECT_THAT(err, HasSubstr("events.jsonl: line 31: missing field \"ts\" (skipped)"));
}

// An event behind the newest is late for every engine alike: they still
// complete and agree, and the summary counts it.
TEST_F(MatchEnginesTest, TheSummaryCountsTheLateEvents) {
  std::ofstream(dir_ / "events.jsonl", std::ios::app)
      << "{\"type\":\"A\",\"ts\":2,\"attrs\":{\"x\":0}}\n";
  std::string err;
  const auto summary = compare("PATTERN SEQ(A a, B b) WITHIN 4 CONTEXT unrestricted", 0, &err);
  EXPECT_EQ(summary["late"], 1) << summary.dump();
  EXPECT_EQ(summary["agree"], true) << summary.dump();
  EXPECT_THAT(err, HasSubstr("cepbus match: events.jsonl: 1 late event"));
}

// No engine runs the Kleene star, and no refusal sends the reader to one
// that would.
TEST_F(MatchEnginesTest, EveryEngineRefusesTheKleeneStarWithoutPointingElsewhere) {
  std::string err;
  const auto summary = compare("PATTERN SEQ(A a, B* b[], C c) WITHIN 4", 1, &err);
  for (const char* name : {"nfa", "algebra", "petri"}) {
    const auto& e = engine(summary, name);
    ASSERT_EQ(e["accepted"], false) << name;
    const std::string refusal = e["refusal"].get<std::string>();
    EXPECT_THAT(refusal, HasSubstr("nor does any other engine: write 'B+ b[]'")) << name;
    EXPECT_THAT(refusal, Not(HasSubstr("--engine"))) << name;
  }
  EXPECT_EQ(summary["nothing_to_compare"],
            "no engine completed: nfa refused the query, algebra refused the query, petri "
            "refused the query");
}

TEST_F(MatchEnginesTest, TimeoutIsForEngineAllOnly) {
  std::string out, err;
  EXPECT_EQ(run({"match", "--engine", "nfa", "--timeout", "1", "--query", "PATTERN SEQ(A a, B b)",
                 "--events", "events.jsonl"},
                &out, &err),
            2);
  EXPECT_THAT(err, HasSubstr("--timeout limits each engine of --engine all only"));
  EXPECT_EQ(run({"match", "--engine", "all", "--timeout", "-1", "--query", "PATTERN SEQ(A a, B b)",
                 "--events", "events.jsonl"},
                &out, &err),
            2);
  EXPECT_THAT(err, HasSubstr("--timeout -1: expected seconds, 0 or more"));
}

TEST_F(MatchEnginesTest, AllRefusesTheSingleEngineOutputs) {
  std::string out, err;
  EXPECT_EQ(run({"match", "--engine", "all", "--query", "PATTERN SEQ(A a, B b)", "--events",
                 "events.jsonl", "--count"},
                &out, &err),
            2);
  EXPECT_THAT(err, HasSubstr("--engine all prints a comparison"));
  EXPECT_EQ(run({"match", "--help"}, &out, &err), 0);
  EXPECT_THAT(out, HasSubstr("--engine all"));
  EXPECT_THAT(out, HasSubstr("CONTEXT recent"));
}

// `cepbus match --engine auto`: the engine it names on stderr, run by hand
// on the same input, gives the same output.
TEST_F(MatchEnginesTest, AutoReportsItsChoiceAndMatchesLikeTheChosenEngine) {
  std::ofstream patterns(dir_ / "many.patterns");
  for (int k = 0; k < 40; ++k) {
    patterns << "p" << k << ": PATTERN SEQ(A a, B b, C c) WHERE a.x = " << k % 4
             << " AND c.x != " << k / 4 % 4 << " WITHIN " << 4 + k % 5 << "\n";
  }
  patterns.close();
  struct Case {
    std::vector<std::string> input;
    std::string engine;
  };
  const std::vector<Case> cases = {
      {{"--query", "PATTERN SEQ(A a, B b) WHERE a.x < b.x WITHIN 6"}, "nfa"},
      {{"--patterns", "many.patterns"}, "petri"},
      // nfa and petri refuse CONTEXT recent: only algebra runs it.
      {{"--query", "PATTERN SEQ(A a, B b, C c) WITHIN 8 CONTEXT recent"}, "algebra"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"match", "--engine", "auto", "--events", "events.jsonl"};
    args.insert(args.end(), c.input.begin(), c.input.end());
    std::string auto_out, auto_err;
    ASSERT_EQ(run(args, &auto_out, &auto_err), 0) << auto_err;
    EXPECT_THAT(auto_err, HasSubstr("cepbus match: engine " + c.engine + " (auto: ")) << c.engine;
    // nfa and petri go on trial against each other; 30 events end within it.
    if (c.engine == "algebra") {
      EXPECT_THAT(auto_err, Not(HasSubstr("trial"))) << auto_err;
    } else {
      EXPECT_THAT(auto_err,
                  HasSubstr("; trial against " + std::string(c.engine == "nfa" ? "petri" : "nfa") +
                            " over 4096 events after the first 256, or 10 ms of CPU)\n"))
          << auto_err;
      EXPECT_THAT(auto_err, HasSubstr("cepbus match: trial undecided: the events ended within "
                                      "it; " +
                                      c.engine + " ran them\n"))
          << auto_err;
    }
    args[2] = c.engine;
    std::string out, err;
    ASSERT_EQ(run(args, &out, &err), 0) << err;
    EXPECT_FALSE(out.empty()) << c.engine;
    EXPECT_EQ(auto_out, out) << c.engine;
  }
}

std::vector<std::string> sortedLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

// Past the trial, auto says which engine it kept, with the CPU each took,
// and prints that engine's matches: nfa's and petri's are the same here.
TEST_F(MatchEnginesTest, AutoSaysWhatItsTrialKeptAndMatchesLikeIt) {
  {
    std::ofstream events(dir_ / "long.jsonl");
    for (int i = 1; i <= 6000; ++i) {
      events << R"({"type":")" << static_cast<char>('A' + i % 3) << R"(","ts":)" << i
             << R"(,"attrs":{"x":)" << i * 7 % 5 << "}}\n";
    }
  }
  std::ofstream(dir_ / "two.patterns") << "PATTERN SEQ(A a, B b) WHERE a.x = b.x WITHIN 6\n"
                                       << "PATTERN SEQ(A a, C c) WHERE a.x < c.x WITHIN 4\n";
  std::vector<std::string> args = {"match",        "--engine", "auto",      "--patterns",
                                   "two.patterns", "--events", "long.jsonl"};
  std::string auto_out, auto_err;
  ASSERT_EQ(run(args, &auto_out, &auto_err), 0) << auto_err;
  EXPECT_THAT(auto_err, HasSubstr("cepbus match: engine petri (auto: 2 patterns, merged Petri "
                                  "net from 2 patterns; trial against nfa over 4096 events "
                                  "after the first 256, or 10 ms of CPU)\n"));
  const std::string kept =
      auto_err.find("cepbus match: trial kept nfa: petri ") != std::string::npos ? "nfa" : "petri";
  EXPECT_THAT(auto_err, HasSubstr("cepbus match: trial kept " + kept + ": petri "));
  EXPECT_THAT(auto_err, HasSubstr(" ms CPU on "));
  for (const std::string engine : {"nfa", "petri"}) {
    args[2] = engine;
    std::string out, err;
    ASSERT_EQ(run(args, &out, &err), 0) << err;
    EXPECT_GT(out.size(), 1000u);
    EXPECT_EQ(sortedLines(auto_out), sortedLines(out)) << engine;  // engines differ in order
  }
}

TEST_F(MatchEnginesTest, AutoPassesOverAnEngineThatRefusesAnOptionAndSaysSo) {
  std::ofstream patterns(dir_ / "many.patterns");
  for (int k = 0; k < 10; ++k) patterns << "PATTERN SEQ(A a, B b) WHERE a.x = " << k % 4 << "\n";
  patterns.close();
  std::string out, err;
  // construction is an nfa option: petri, preferred for 10 patterns, refuses it.
  ASSERT_EQ(run({"match", "--engine", "auto", "--patterns", "many.patterns", "--events",
                 "events.jsonl", "--option", "construction=per_event", "--count"},
                &out, &err),
            0)
      << err;
  EXPECT_THAT(err, HasSubstr("cepbus match: engine nfa (auto: 10 patterns, merged Petri net"));
  EXPECT_THAT(err, HasSubstr("petri refuses: "));
  EXPECT_THAT(err, HasSubstr("; nfa runs it)"));
}

TEST_F(MatchEnginesTest, AutoWithNoEngineAcceptingListsEveryRefusal) {
  std::string out, err;
  EXPECT_EQ(run({"match", "--engine", "auto", "--query", "PATTERN SEQ(A a, B b)", "--events",
                 "events.jsonl", "--option", "no_such_option=1"},
                &out, &err),
            1);
  for (const char* engine : {"nfa", "petri", "algebra", "join"}) {
    EXPECT_THAT(err, HasSubstr(std::string(engine) + " refuses: ")) << err;
  }
  EXPECT_TRUE(out.empty()) << out;
}

// The choice in the bus log when a CEP service unit deploys an auto query.
TEST_F(MatchEnginesTest, TheBusLogSaysWhichEngineAutoChose) {
  std::ofstream(dir_ / "bus.xml") << R"(<cepbus name="auto">
  <service-assembly name="a">
    <service-unit name="src" type="replay-source">
      <param name="file" value="events.jsonl"/>
      <publish address="in"/>
    </service-unit>
    <service-unit name="cep" type="cep">
      <query name="recent" engine="auto" input="in" output="out">
        <text>PATTERN SEQ(A a, B b, C c) WITHIN 8 CONTEXT recent</text>
      </query>
    </service-unit>
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="out.jsonl"/>
      <subscribe address="out"/>
    </service-unit>
  </service-assembly>
</cepbus>
)";
  std::string out, err;
  ASSERT_EQ(run({"run", "bus.xml", "--exit-when-drained"}, &out, &err), 0) << err;
  EXPECT_THAT(err, HasSubstr("<query name=\"recent\">: engine algebra (auto: 1 pattern with no "
                             "filter on its first variable, one NFA"));
  EXPECT_THAT(err, HasSubstr("nfa refuses: "));
  EXPECT_GT(fs::file_size(dir_ / "out.jsonl"), 0u);
}

// The same notice in the bus log when a CEP service unit deploys the query.
TEST_F(MatchEnginesTest, TheBusLogSaysWhichContextTheAlgebraQueryRunsUnder) {
  std::ofstream(dir_ / "bus.xml") << R"(<cepbus name="ctx">
  <plugins><plugin name="algebra"/></plugins>
  <service-assembly name="a">
    <service-unit name="src" type="replay-source">
      <param name="file" value="events.jsonl"/>
      <publish address="in"/>
    </service-unit>
    <service-unit name="cep" type="cep">
      <query name="abc" engine="algebra" input="in" output="out">
        <text>PATTERN SEQ(A a, B b, C c) WITHIN 8</text>
      </query>
    </service-unit>
    <service-unit name="sink" type="replay-sink">
      <param name="file" value="out.jsonl"/>
      <subscribe address="out"/>
    </service-unit>
  </service-assembly>
</cepbus>
)";
  std::string out, err;
  ASSERT_EQ(run({"run", "bus.xml", "--exit-when-drained"}, &out, &err), 0) << err;
  EXPECT_THAT(err, HasSubstr("<query name=\"abc\">: the algebra engine runs this query under "
                             "CONTEXT recent"));
}

}  // namespace
}  // namespace cepbus
