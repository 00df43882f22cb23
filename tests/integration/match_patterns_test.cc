// End-to-end tests of `cepbus match --patterns FILE` and `--export`: the real
// binary loading the petri and nfa plugins, many patterns merged into one
// net, each match labelled with its pattern.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "tests/integration/child_process.h"

namespace cepbus {
namespace {

namespace fs = std::filesystem;
using testing::ChildProcess;
using ::testing::HasSubstr;
using ::testing::Not;

class MatchPatternsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("cepbus-match-patterns-" + std::to_string(rd()));
    fs::create_directories(dir_);
    // Stock ticks: three symbols in turn, each round of three at one price
    // (so equal prices recur), and a News event every fifth step.
    std::ofstream events(dir_ / "ticks.jsonl");
    const char* symbols[] = {"IBM", "MSFT", "ORCL"};
    for (int i = 1; i <= 30; ++i) {
      events << R"({"type":"Stock","ts":)" << i << R"(,"attrs":{"symbol":")" << symbols[i % 3]
             << R"(","price":)" << ((i - 1) / 3) % 3 << "}}\n";
      if (i % 5 == 0) events << R"({"type":"News","ts":)" << i << "}\n";
    }
    std::ofstream(dir_ / "patterns.txt")
        << "# equal prices of two different stocks, and variants sharing its prefix\n"
           "pair: PATTERN SEQ(Stock a, Stock b) WHERE a.price = b.price AND "
           "a.symbol != b.symbol WITHIN 6\n"
           "\n"
           "triple: PATTERN SEQ(Stock a, Stock b, Stock c) WHERE a.price = b.price AND "
           "a.symbol != b.symbol AND b.price = c.price AND c.symbol != a.symbol AND "
           "c.symbol != b.symbol WITHIN 6\n"
           "news: PATTERN SEQ(Stock a, Stock b, News n) WHERE a.price = b.price AND "
           "a.symbol != b.symbol WITHIN 6\n"
           "PATTERN SEQ(News n, Stock s) WHERE s.price > 0 WITHIN 3\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  int run(std::vector<std::string> args, std::string* out, std::string* err = nullptr) {
    args.insert(args.begin(), CEPBUS_BINARY);
    ChildProcess p(std::move(args), dir_);
    EXPECT_TRUE(p.started());
    const int code = p.wait(std::chrono::seconds(120));
    *out = p.out();
    if (err != nullptr) *err = p.err();
    return code;
  }

  static std::vector<std::string> sortedLines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
      if (!l.empty()) out.push_back(l);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path dir_;
};

TEST_F(MatchPatternsTest, PetriMergedNetLabelsEveryMatchAndAgreesWithNfa) {
  std::string petri;
  std::string nfa;
  std::string err;
  ASSERT_EQ(
      run({"match", "--engine", "petri", "--patterns", "patterns.txt", "--events", "ticks.jsonl"},
          &petri, &err),
      0)
      << err;
  ASSERT_EQ(run({"match", "--engine", "nfa", "--patterns", "patterns.txt", "--events",
                 "ticks.jsonl", "--option", "construction=per_event"},
                &nfa, &err),
            0)
      << err;
  const std::vector<std::string> lines = sortedLines(petri);
  EXPECT_EQ(lines, sortedLines(nfa));
  // Every pattern matched at least once and every line names its pattern.
  for (const char* name : {"pair", "triple", "news", "4"}) {
    EXPECT_THAT(petri, HasSubstr(std::string("{\"pattern\":\"") + name + "\",\"ts\":["))
        << name << "\n"
        << petri;
  }
  for (const std::string& line : lines) {
    const auto j = nlohmann::json::parse(line);
    ASSERT_TRUE(j.contains("pattern")) << line;
    ASSERT_TRUE(j["ts"].is_array()) << line;
  }

  std::string counted;
  ASSERT_EQ(run({"match", "--engine", "petri", "--patterns", "patterns.txt", "--events",
                 "ticks.jsonl", "--count"},
                &counted, &err),
            0)
      << err;
  EXPECT_EQ(sortedLines(counted).size(), 4u) << counted;
}

TEST_F(MatchPatternsTest, ExportsTheMergedNetAsDotAndJson) {
  std::string dot;
  std::string err;
  ASSERT_EQ(run({"match", "--engine", "petri", "--patterns", "patterns.txt", "--export", "dot"},
                &dot, &err),
            0)
      << err;
  EXPECT_TRUE(dot.starts_with("digraph petri {")) << dot;
  for (const char* name : {"pair", "triple", "news"}) {
    EXPECT_THAT(dot, HasSubstr(std::string("\"out:") + name + "\"")) << dot;
  }

  std::string json_text;
  ASSERT_EQ(run({"match", "--engine", "petri", "--patterns", "patterns.txt", "--export", "json"},
                &json_text, &err),
            0)
      << err;
  const auto json = nlohmann::json::parse(json_text);
  ASSERT_EQ(json["patterns"].size(), 4u);
  // pair, triple and news share SEQ(Stock a, Stock b) and its guard: the
  // merged net is smaller than the four nets alone.
  EXPECT_LT(json["size"]["transitions"].get<int>(),
            json["unmerged_size"]["transitions"].get<int>());
  EXPECT_EQ(json["transitions"].size(), json["size"]["transitions"].get<size_t>());

  std::string out;
  EXPECT_EQ(run({"match", "--engine", "nfa", "--query", "PATTERN SEQ(A a, B b)", "--export", "dot"},
                &out, &err),
            1);
  EXPECT_THAT(err, HasSubstr("does not export its model"));
  EXPECT_EQ(
      run({"match", "--engine", "petri", "--query", "PATTERN SEQ(A a, B b)", "--export", "svg"},
          &out, &err),
      2);
  EXPECT_THAT(err, HasSubstr("--export svg: expected dot or json"));
}

TEST_F(MatchPatternsTest, AnUnsupportedPatternIsNamedWithItsLine) {
  std::ofstream(dir_ / "bad.txt") << "ok: PATTERN SEQ(A a, B b)\n"
                                     "star: PATTERN SEQ(A a, B* b[])\n";
  std::string out;
  std::string err;
  EXPECT_EQ(run({"match", "--engine", "petri", "--patterns", "bad.txt", "--events", "ticks.jsonl"},
                &out, &err),
            1);
  EXPECT_THAT(err, HasSubstr("bad.txt:2 (pattern 'star'): "));
  EXPECT_THAT(err, HasSubstr("Kleene star"));
}

// With --time-unit ms a duration may carry a unit: WITHIN 2 s is WITHIN 2000
// on a stream whose ts counts milliseconds, on every pattern of a file.
TEST_F(MatchPatternsTest, DurationsWithUnitsOnAMillisecondStream) {
  std::ofstream(dir_ / "ms.jsonl") << R"({"type":"A","ts":0})"
                                      "\n"
                                      R"({"type":"B","ts":1500})"
                                      "\n"
                                      R"({"type":"B","ts":2000})"
                                      "\n"
                                      R"({"type":"B","ts":2500})"
                                      "\n"
                                      R"({"type":"A","ts":10000})"
                                      "\n"
                                      R"({"type":"B","ts":12000})"
                                      "\n"
                                      R"({"type":"B","ts":12001})"
                                      "\n";
  std::ofstream(dir_ / "units.txt")
      << "seq: PATTERN SEQ(A a, B b) WITHIN 2 s CONTEXT unrestricted\n"
         "any: PATTERN SEQ(A a, B b) WITHIN 2000000 us CONTEXT unrestricted\n";
  std::ofstream(dir_ / "bare.txt")
      << "seq: PATTERN SEQ(A a, B b) WITHIN 2000 CONTEXT unrestricted\n"
         "any: PATTERN SEQ(A a, B b) WITHIN 2000 CONTEXT unrestricted\n";
  for (const char* engine : {"nfa", "petri", "algebra"}) {
    std::string with_units;
    std::string bare;
    std::string err;
    ASSERT_EQ(run({"match", "--engine", engine, "--patterns", "units.txt", "--events", "ms.jsonl",
                   "--time-unit", "ms"},
                  &with_units, &err),
              0)
        << engine << ": " << err;
    ASSERT_EQ(run({"match", "--engine", engine, "--patterns", "bare.txt", "--events", "ms.jsonl"},
                  &bare, &err),
              0)
        << engine << ": " << err;
    EXPECT_EQ(sortedLines(with_units), sortedLines(bare)) << engine;
    EXPECT_THAT(with_units, HasSubstr(R"({"pattern":"seq","ts":[0,1500]})")) << engine;
    EXPECT_THAT(with_units, HasSubstr(R"({"pattern":"seq","ts":[10000,12000]})")) << engine;
    EXPECT_THAT(with_units, Not(HasSubstr("[0,2500]"))) << engine;
  }
  // The algebra's time restriction takes a unit the same way.
  std::string with_units;
  std::string bare;
  std::string err;
  ASSERT_EQ(run({"match", "--engine", "algebra", "--query", "PATTERN WITHIN(A ; B, 2 s)",
                 "--events", "ms.jsonl", "--time-unit", "ms"},
                &with_units, &err),
            0)
      << err;
  ASSERT_EQ(run({"match", "--engine", "algebra", "--query", "PATTERN WITHIN(A ; B, 2000)",
                 "--events", "ms.jsonl"},
                &bare, &err),
            0)
      << err;
  EXPECT_EQ(with_units, bare);
  EXPECT_THAT(with_units, HasSubstr("[10000,12000]"));
  EXPECT_THAT(with_units, Not(HasSubstr("[10000,12001]")));
}

TEST_F(MatchPatternsTest, AUnitNeedsTimeUnitAndTimeUnitIsUsMsOrS) {
  std::string out;
  std::string err;
  EXPECT_EQ(run({"match", "--engine", "nfa", "--query", "PATTERN SEQ(A a, B b) WITHIN 2 s",
                 "--events", "ticks.jsonl"},
                &out, &err),
            1);
  EXPECT_THAT(err, HasSubstr("cepbus match: --query: bad query: line 1, column 32: WITHIN 2 s: "
                             "the input's ts has no declared time unit"));
  EXPECT_EQ(run({"match", "--engine", "nfa", "--query", "PATTERN SEQ(A a, B b) WITHIN 2 s",
                 "--events", "ticks.jsonl", "--time-unit", "min"},
                &out, &err),
            2);
  EXPECT_THAT(err, HasSubstr("--time-unit min: expected us, ms or s"));
  EXPECT_EQ(run({"match", "--engine", "nfa", "--query", "PATTERN SEQ(A a, B b) WITHIN 2500 ms",
                 "--events", "ticks.jsonl", "--time-unit", "s"},
                &out, &err),
            1);
  EXPECT_THAT(err, HasSubstr("WITHIN 2500 ms is not a whole number of the input's ts units (s)"));
}

}  // namespace
}  // namespace cepbus
