#include "bus/app/match_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cepbus::app {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class MatchCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("match_command_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  MatchCommandOptions base(const std::string& events) {
    MatchCommandOptions o;
    o.engine = "nfa";
    o.events_file = events;
    const char* build = std::getenv("CEPBUS_BUILD_DIR");
    o.plugin_paths.push_back(std::string(build ? build : ".") + "/plugins");
    return o;
  }

  int run(const MatchCommandOptions& o) {
    out_.str("");
    err_.str("");
    return runMatchCommand(o, out_, err_);
  }

  std::vector<std::string> lines() const {
    std::vector<std::string> v;
    std::istringstream in(out_.str());
    for (std::string l; std::getline(in, l);) v.push_back(l);
    std::sort(v.begin(), v.end());
    return v;
  }

  // P2's stream: a1 c2 b3 a4 d5 b6 d7 c8 d9.
  std::string paperEvents() {
    std::string text;
    int ts = 0;
    for (char t : std::string("ACBADBDCD")) {
      ++ts;
      text += "{\"type\":\"" + std::string(1, t) + "\",\"ts\":" + std::to_string(ts) +
              ",\"attrs\":{\"price\":" + std::to_string(ts % 3) + "}}\n";
    }
    return write("p2.jsonl", text);
  }

  std::filesystem::path dir_;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(MatchCommandTest, PrintsOneTsArrayPerMatchInPatternOrder) {
  auto o = base(paperEvents());
  o.query = "PATTERN SEQ(A a, B b, D d) WITHIN 8";
  for (const char* construction : {"construction=per_event", "construction=batched"}) {
    o.options = {construction};
    ASSERT_EQ(run(o), 0) << err_.str();
    EXPECT_EQ(lines(), (std::vector<std::string>{"[1,3,5]", "[1,3,7]", "[1,3,9]", "[1,6,7]",
                                                 "[1,6,9]", "[4,6,7]", "[4,6,9]"}));
    EXPECT_EQ(err_.str(), "");
  }
}

TEST_F(MatchCommandTest, CountPrintsMatchesAndAnOrderIndependentChecksum) {
  auto o = base(paperEvents());
  o.query = "PATTERN SEQ(A a, B b, D d) WITHIN 8";
  o.count = true;
  uint64_t expected = 0;
  for (const std::vector<int64_t>& ts : std::vector<std::vector<int64_t>>{
           {1, 3, 5}, {1, 3, 7}, {1, 3, 9}, {1, 6, 7}, {1, 6, 9}, {4, 6, 7}, {4, 6, 9}}) {
    expected += matchChecksum(ts);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(expected));
  for (const char* construction : {"construction=per_event", "construction=batched"}) {
    o.options = {construction};
    ASSERT_EQ(run(o), 0) << err_.str();
    EXPECT_EQ(out_.str(), "{\"matches\":7,\"checksum\":\"" + std::string(hex) + "\"}\n");
  }
  // The checksum depends on the order of ts inside a match, not of matches.
  const std::vector<int64_t> a = {1, 3}, b = {3, 1};
  EXPECT_NE(matchChecksum(a), matchChecksum(b));
  EXPECT_EQ(matchChecksum(std::vector<int64_t>{}), 0xcbf29ce484222325ULL);
}

// Output control is in the query text and the same on every engine:
// SEQ(A a, B b, D d) WITHIN 8 over P2's stream matches [1,3,5], [1,3,7],
// [1,3,9], [1,6,7], [1,6,9], [4,6,7] and [4,6,9].
TEST_F(MatchCommandTest, OutputControlClausesRunOnEveryEngine) {
  struct Case {
    const char* clause;
    std::vector<std::string> expected;
    const char* suppressed;
  };
  const Case cases[] = {
      // 5 comes out; 7 is within 4 of it; 9 is not, and [1,3,9] is first of those ending there.
      {" EMIT FIRST EVERY 4", {"[1,3,5]", "[1,3,9]"}, "5 matches suppressed"},
      // [5, 10) holds every end; its last match.
      {" EMIT LAST EVERY 5", {"[4,6,9]"}, "6 matches suppressed"},
      // Every later match starts before 5.
      {" AFTER MATCH SKIP PAST LAST EVENT", {"[1,3,5]"}, "6 matches suppressed"},
  };
  auto o = base(paperEvents());
  for (const Case& c : cases) {
    for (const char* engine : {"nfa", "petri", "algebra"}) {
      for (const char* max_delay : {"max_delay=0", "max_delay=3"}) {
        o.engine = engine;
        o.query = std::string("PATTERN SEQ(A a, B b, D d) WITHIN 8") + c.clause +
                  (std::string(engine) == "algebra" ? " CONTEXT unrestricted" : "");
        o.options = {max_delay};
        ASSERT_EQ(run(o), 0) << err_.str();
        EXPECT_EQ(lines(), c.expected) << engine << ": " << o.query << " " << max_delay;
        EXPECT_THAT(err_.str(), HasSubstr(std::string("cepbus match: ") + c.suppressed +
                                          " by output control (EMIT, AFTER MATCH)"))
            << engine << ": " << o.query;
      }
    }
  }
}

TEST_F(MatchCommandTest, PatternsFileRunsNamedAndUnnamedQueriesInOnePass) {
  auto o = base(paperEvents());
  o.patterns_file = write("patterns.txt",
                          "# two queries\n"
                          "abd: PATTERN SEQ(A a, B b, D d) WITHIN 8 STRATEGY skip_till_next_match\n"
                          "\n"
                          "PATTERN SEQ(C c, D d) WHERE d.price = 0 WITHIN 2\n");
  ASSERT_EQ(run(o), 0) << err_.str();
  EXPECT_EQ(lines(), (std::vector<std::string>{"{\"pattern\":\"2\",\"ts\":[8,9]}",
                                               "{\"pattern\":\"abd\",\"ts\":[1,3,5]}",
                                               "{\"pattern\":\"abd\",\"ts\":[4,6,7]}"}));
  o.count = true;
  ASSERT_EQ(run(o), 0) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("{\"pattern\":\"abd\",\"matches\":2,\"checksum\":\""));
  EXPECT_THAT(out_.str(), HasSubstr("{\"pattern\":\"2\",\"matches\":1,\"checksum\":\""));
}

TEST_F(MatchCommandTest, FullFormatPrintsCompositeEvents) {
  auto o = base(paperEvents());
  o.query = "PATTERN SEQ(C c, D d) WHERE d.price = 0 WITHIN 2 RETURN Pair(c.price AS cp)";
  o.full = true;
  ASSERT_EQ(run(o), 0) << err_.str();
  const std::string line = out_.str();
  EXPECT_THAT(line, HasSubstr("\"type\":\"Pair\""));
  EXPECT_THAT(line, HasSubstr("\"cp\":2"));
  EXPECT_THAT(line, HasSubstr("\"start\":8"));
  EXPECT_THAT(line, HasSubstr("\"ts\":9"));
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1);
}

TEST_F(MatchCommandTest, WarnsAboutNamesTheEventsNeverHadWithoutChangingTheExitStatus) {
  auto o = base(paperEvents());
  o.query = "PATTERN SEQ(A a, B b)\nWHERE b.prize > a.price\nPARTITION BY price";
  o.count = true;
  ASSERT_EQ(run(o), 0) << err_.str();
  EXPECT_EQ(err_.str(),
            "cepbus match: warning: --query: line 2, column 7: attribute 'prize' never occurred on "
            "a B event in the input; did you mean 'price'?\n");
  EXPECT_THAT(out_.str(), HasSubstr("\"matches\":0"));

  o.query = "PATTERN SEQ(A a, B b) WHERE b.price > a.price";
  ASSERT_EQ(run(o), 0) << err_.str();
  EXPECT_EQ(err_.str(), "");

  o.query.clear();
  o.patterns_file =
      write("patterns.txt", "ok: PATTERN SEQ(A a, B b)\nbad: PATTERN SEQ(A a, Bb b)\n");
  ASSERT_EQ(run(o), 0) << err_.str();
  EXPECT_EQ(err_.str(), "cepbus match: warning: " + (dir_ / "patterns.txt").string() +
                            ":2 (pattern 'bad'): line 1, column 18: event type 'Bb' never "
                            "occurred in the input; did you mean 'B'?\n");
}

TEST_F(MatchCommandTest, EngineAllWarnsAboutNamesTheEventsNeverHadToo) {
  auto o = base(paperEvents());
  o.engine = "all";
  o.query = "PATTERN SEQ(A a, B b)\nWHERE b.prize > a.price";
  run(o);
  EXPECT_THAT(err_.str(),
              HasSubstr("cepbus match: warning: --query: line 2, column 7: attribute 'prize' never "
                        "occurred on a B event in the input; did you mean 'price'?\n"));
}

TEST_F(MatchCommandTest, BadQueryUnsupportedOperatorAndBadOptionFailClearly) {
  auto o = base(paperEvents());
  o.query = "PATTERN SEQ(A a, B b";
  EXPECT_EQ(run(o), 1);
  EXPECT_THAT(err_.str(), HasSubstr("bad query: line 1, column"));
  o.query = "PATTERN OR(A a, B b)";
  EXPECT_EQ(run(o), 1);
  EXPECT_THAT(err_.str(), HasSubstr("does not support the disjunction"));
  o.query = "PATTERN SEQ(A a, B b)";
  o.options = {"construction=eventually"};
  EXPECT_EQ(run(o), 1);
  EXPECT_THAT(err_.str(), HasSubstr("construction=eventually"));
  o.options = {"novalue"};
  EXPECT_EQ(run(o), 2);
  o.options.clear();
  o.patterns_file = write("bad_patterns.txt", "ok: PATTERN SEQ(A a, B b)\nbad: PATTERN SEQ(\n");
  o.query.clear();
  EXPECT_EQ(run(o), 1);
  EXPECT_THAT(err_.str(), HasSubstr("bad_patterns.txt:2 (pattern 'bad'): bad query"));
}

// A bad line is named, counted and skipped, as the bus's replay does; the
// events around it still match.
TEST_F(MatchCommandTest, BadEventLinesAreNamedCountedAndSkipped) {
  const std::string events = write("bad.jsonl",
                                   "{\"type\":\"A\",\"ts\":1}\n\n{\"type\":\"B\"}\nnot json\n"
                                   "{\"type\":\"B\",\"ts\":4}\n");
  auto o = base(events);
  o.query = "PATTERN SEQ(A a, B b)";
  ASSERT_EQ(run(o), 0) << err_.str();
  EXPECT_EQ(lines(), (std::vector<std::string>{"[1,4]"}));
  EXPECT_THAT(err_.str(),
              HasSubstr("cepbus match: " + events + ": line 3: missing field \"ts\" (skipped)"));
  EXPECT_THAT(err_.str(), HasSubstr("cepbus match: " + events + ": line 4: "));
  EXPECT_THAT(err_.str(), HasSubstr("cepbus match: " + events + ": 2 bad lines skipped"));
}

TEST_F(MatchCommandTest, StrictStopsAtTheFirstBadEventLine) {
  auto o = base(write("bad.jsonl", "{\"type\":\"A\",\"ts\":1}\n\n{\"type\":\"B\"}\n"));
  o.query = "PATTERN SEQ(A a, B b)";
  o.strict = true;
  EXPECT_EQ(run(o), 1);
  EXPECT_THAT(err_.str(), HasSubstr("bad.jsonl: line 3: missing field \"ts\""));
  EXPECT_THAT(err_.str(), Not(HasSubstr("skipped")));
  const std::vector<std::string> args = {"--engine", "nfa",     "--query", "PATTERN SEQ(A a, B b)",
                                         "--events", "x.jsonl", "--strict"};
  auto parsed = parseMatchArguments(args);
  ASSERT_TRUE(parsed) << parsed.status().message();
  EXPECT_TRUE(parsed->strict);
}

// A trailing negation's matches: the ones whose window closes before the
// last event come out as time passes them, and the end of the input lets
// time pass to the end, so the ones still open come out too.
TEST_F(MatchCommandTest, TheEndOfTheInputEmitsTheTrailingNegationsPendingMatches) {
  auto o = base(write("orders.jsonl", R"({"type":"Order","ts":0,"attrs":{"id":1}}
{"type":"Order","ts":10,"attrs":{"id":2}}
{"type":"Ship","ts":40,"attrs":{"id":1}}
{"type":"Order","ts":95,"attrs":{"id":3}}
{"type":"Order","ts":96,"attrs":{"id":4}}
{"type":"Ship","ts":100,"attrs":{"id":4}}
)"));
  o.query = "PATTERN SEQ(Order o, NOT(Ship s)) WHERE s.id = o.id WITHIN 60";
  for (const char* construction : {"construction=per_event", "construction=batched"}) {
    for (const char* max_delay : {"max_delay=0", "max_delay=30"}) {
      o.options = {construction, max_delay};
      ASSERT_EQ(run(o), 0) << err_.str();
      EXPECT_EQ(lines(), (std::vector<std::string>{"[10]", "[95]"}))
          << construction << " " << max_delay;
    }
  }
  // The petri and algebra engines run it through the host's edge negation.
  for (const char* engine : {"petri", "algebra"}) {
    o.engine = engine;
    o.options = {"max_delay=30"};
    ASSERT_EQ(run(o), 0) << engine << ": " << err_.str();
    EXPECT_EQ(lines(), (std::vector<std::string>{"[10]", "[95]"})) << engine;
  }
}

// Events out of order: within --max-delay they are matched as the sorted
// stream is; further behind they are late, not matched, counted on stderr
// and (--late) written as read, and the run succeeds.
TEST_F(MatchCommandTest, LateEventsAreSetAsideAndTheRestMatchAsSorted) {
  // In the writer's form (keys sorted), so a late one is written back as is.
  const std::vector<std::string> events = {
      R"({"attrs":{"x":1},"ts":1,"type":"A"})",
      R"({"attrs":{},"ts":4,"type":"B"})",
      R"({"attrs":{},"ts":3,"type":"B"})",                        // 1 behind 4
      R"({"attrs":{},"key":"k1","prob":0.5,"ts":2,"type":"A"})",  // 2 behind 4
      R"({"attrs":{},"ts":5,"type":"D"})",
      R"({"attrs":{"y":"s"},"ts":1,"type":"B"})",  // 4 behind 5
      R"({"attrs":{},"ts":6,"type":"D"})",
  };
  auto file = [&](const std::string& name, std::initializer_list<size_t> which) {
    std::string text;
    for (size_t i : which) text += events[i] + "\n";
    return write(name, text);
  };
  const std::string arrived = file("arrived.jsonl", {0, 1, 2, 3, 4, 5, 6});
  struct Case {
    const char* max_delay;
    std::initializer_list<size_t> sorted;  // the events not late, sorted by ts
    std::vector<std::string> late;
  };
  const Case cases[] = {
      {"0", {0, 1, 4, 6}, {events[2], events[3], events[5]}},
      {"2", {0, 3, 2, 1, 4, 6}, {events[5]}},
  };
  for (const Case& c : cases) {
    auto sorted = base(file(std::string("sorted") + c.max_delay + ".jsonl", c.sorted));
    sorted.query = "PATTERN SEQ(A a, B b, D d) WITHIN 10";
    ASSERT_EQ(run(sorted), 0) << err_.str();
    const std::vector<std::string> expected = lines();
    ASSERT_FALSE(expected.empty());

    auto o = sorted;
    o.events_file = arrived;
    o.options = {std::string("max_delay=") + c.max_delay};
    ASSERT_EQ(run(o), 0) << err_.str();
    EXPECT_EQ(lines(), expected) << "max_delay " << c.max_delay;
    EXPECT_THAT(err_.str(),
                HasSubstr("arrived.jsonl: " + std::to_string(c.late.size()) + " late event"));
    EXPECT_THAT(err_.str(), HasSubstr("--late FILE keeps them"));

    o.late_file = (dir_ / "late.jsonl").string();
    ASSERT_EQ(run(o), 0) << err_.str();
    EXPECT_EQ(lines(), expected) << "max_delay " << c.max_delay;
    EXPECT_THAT(err_.str(), HasSubstr("written to " + o.late_file));
    std::ifstream in(o.late_file);
    std::vector<std::string> late;
    for (std::string l; std::getline(in, l);) late.push_back(l);
    EXPECT_EQ(late, c.late) << "max_delay " << c.max_delay;
  }
}

TEST_F(MatchCommandTest, NoLateEventsNoLateLineAndAnUnwritableLateFileFails) {
  auto o = base(paperEvents());
  o.query = "PATTERN SEQ(A a, B b)";
  o.late_file = (dir_ / "late.jsonl").string();
  ASSERT_EQ(run(o), 0) << err_.str();
  EXPECT_THAT(err_.str(), Not(HasSubstr("late")));
  EXPECT_TRUE(std::filesystem::exists(o.late_file));
  EXPECT_EQ(std::filesystem::file_size(o.late_file), 0u);
  o.late_file = (dir_ / "no" / "such" / "late.jsonl").string();
  EXPECT_EQ(run(o), 1);
  EXPECT_THAT(err_.str(), HasSubstr("cannot open --late file"));
}

TEST_F(MatchCommandTest, MissingEngineOrFilesFail) {
  auto o = base(paperEvents());
  o.query = "PATTERN SEQ(A a, B b)";
  o.engine = "warp";
  EXPECT_EQ(run(o), 1);
  EXPECT_THAT(err_.str(), HasSubstr("libcepbus_plugin_warp.so"));
  o.engine = "nfa";
  o.events_file = (dir_ / "none.jsonl").string();
  EXPECT_EQ(run(o), 1);
  EXPECT_THAT(err_.str(), HasSubstr("cannot open events file"));
}

TEST(MatchArgumentsTest, ParsesFlagsInBothSpellings) {
  const std::vector<std::string> args = {
      "--engine", "nfa",      "--query=PATTERN SEQ(A a, B b)", "--events",         "e.jsonl",
      "--count",  "--option", "construction=per_event",        "--option=slack=3", "--plugin-path",
      "/p"};
  auto o = parseMatchArguments(args);
  ASSERT_TRUE(o.isOk()) << o.status().message();
  EXPECT_EQ(o->engine, "nfa");
  EXPECT_EQ(o->query, "PATTERN SEQ(A a, B b)");
  EXPECT_EQ(o->events_file, "e.jsonl");
  EXPECT_TRUE(o->count);
  EXPECT_FALSE(o->full);
  EXPECT_EQ(o->options, (std::vector<std::string>{"construction=per_event", "slack=3"}));
  EXPECT_EQ(o->plugin_paths, (std::vector<std::string>{"/p"}));
}

TEST(MatchArgumentsTest, MaxDelayIsTheOptionAndLateNamesAFile) {
  const std::vector<std::string> args = {"--engine", "nfa",         "--query", "Q",      "--events",
                                         "e.jsonl",  "--max-delay", "250",     "--late", "l.jsonl"};
  auto o = parseMatchArguments(args);
  ASSERT_TRUE(o.isOk()) << o.status().message();
  EXPECT_EQ(o->options, (std::vector<std::string>{"max_delay=250"}));
  EXPECT_EQ(o->late_file, "l.jsonl");
}

TEST(MatchArgumentsTest, RejectsBadCommandLines) {
  const std::pair<std::vector<std::string>, const char*> cases[] = {
      {{"--query", "Q", "--events", "e"}, "--engine is required"},
      {{"--engine", "nfa", "--events", "e"}, "exactly one of --query and --patterns"},
      {{"--engine", "nfa", "--query", "Q", "--patterns", "p", "--events", "e"}, "exactly one of"},
      {{"--engine", "nfa", "--query", "Q"}, "--events is required"},
      {{"--engine", "nfa", "--query"}, "--query needs a value"},
      {{"--engine", "nfa", "--engine", "x"}, "--engine given twice"},
      {{"--engine", "nfa", "--query", "Q", "--events", "e", "--format", "xml"},
       "--format xml: expected ts or full"},
      {{"--engine", "nfa", "--query", "Q", "--events", "e", "--option", "k"},
       "--option k: expected key=value"},
      {{"--engine", "nfa", "--query", "Q", "--events", "e", "--max-delay", "-1"},
       "--max-delay -1: expected a non-negative integer"},
      {{"--engine", "nfa", "--query", "Q", "--events", "e", "--max-delay", "1", "--max-delay", "2"},
       "--max-delay given twice"},
      {{"--engine", "all", "--query", "Q", "--events", "e", "--late", "l"}, "no --count"},
      {{"--engine", "nfa", "--query", "Q", "--export", "dot", "--late", "l"}, "or --late"},
      {{"--engine", "nfa", "--query", "Q", "--events", "e", "--verbose"},
       "unknown argument '--verbose'"},
      {{"--engine", "nfa", "--query", "Q", "--events", "e", "--count", "--format", "full"},
       "exclude each other"},
  };
  for (const auto& [args, what] : cases) {
    auto o = parseMatchArguments(args);
    ASSERT_FALSE(o.isOk()) << what;
    EXPECT_THAT(o.status().message(), HasSubstr(what));
  }
}

}  // namespace
TEST_F(MatchCommandTest, FullFormatPrintsTheMatchProbability) {
  auto o = base(write("uncertain.jsonl",
                      "{\"type\":\"A\",\"ts\":1,\"prob\":0.5}\n"
                      "{\"type\":\"B\",\"ts\":2,\"prob\":0.5}\n"
                      "{\"type\":\"B\",\"ts\":3}\n"));
  o.query = "PATTERN SEQ(A a, B b) PROBABILITY >= 0.5 RETURN P(prob() AS p)";
  o.full = true;
  for (const char* engine : {"nfa", "algebra", "petri"}) {
    o.engine = engine;
    ASSERT_EQ(run(o), 0) << engine << ": " << err_.str();
    // a1-b2 has probability 1/4, below the bound; a1-b3 has 1/2.
    const std::string line = out_.str();
    EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << engine << ": " << line;
    EXPECT_THAT(line, HasSubstr("\"prob\":0.5")) << engine;
    EXPECT_THAT(line, HasSubstr("\"p\":0.5")) << engine;
    EXPECT_THAT(line, HasSubstr("\"start\":1")) << engine;
    EXPECT_THAT(line, HasSubstr("\"ts\":3")) << engine;
  }
}

}  // namespace cepbus::app
