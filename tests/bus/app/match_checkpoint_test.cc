// `cepbus match --checkpoint FILE --stop-after N` then `--resume FILE`: the
// two outputs together are the output of one run, for every split point N,
// per engine that snapshots (nfa, window, algebra, petri, join), over strategies, negation,
// Kleene, PARTITION BY, construction methods, windows with GROUP BY and EMIT
// EVERY, the join's workers and expiry over uncertain events, the host's
// output control (EMIT FIRST/LAST EVERY, SKIP PAST LAST EVENT), and
// --max-delay over re-ordered input; engine auto's trial refusing while it
// runs; and every bad checkpoint
// file is refused with a message naming the file and the reason.
//
// CEPBUS_CHECKPOINT_CASES (streams per query, default 3) and
// CEPBUS_CHECKPOINT_SEED run it longer.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "bus/app/match_command.h"
#include "bus/core/plugin/snapshot.h"

namespace cepbus::app {
namespace {

struct Case {
  std::string engine;
  std::string query;
  std::vector<std::string> options;
};

// The algebra engine's block: contexts, negation of a gap, Kleene runs,
// P1's operators, strategies run natively and selected, PARTITION BY, and a
// NOT at the start or end (the host's edge negation stage on this engine).
void algebraCases(std::vector<Case>& all) {
  for (const char* q : {
           "PATTERN SEQ(A a, B b, C c) WHERE a.x <= c.x WITHIN 12",
           "PATTERN SEQ(A a, B b) WITHIN 6 CONTEXT recent",
           "PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x = a.x WITHIN 10",
           "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x >= b[i-1].x WITHIN 10",
           "PATTERN WITHIN((A ; B) ~ (C ; D), 10) CONTEXT unrestricted",
           "PATTERN SEQ(A a, B b, C c) WITHIN 12 STRATEGY skip_till_next_match",
           "PATTERN SEQ(A a, B b) WITHIN 6 STRATEGY strict_contiguity",
           "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > a.x STRATEGY skip_till_next_match",
           "PATTERN SEQ(A a, B b, C c) WITHIN 15 PARTITION BY k",
           "PATTERN SEQ(A a, NOT(D d), B b) WITHIN 9 PARTITION BY k",
           // A NOT at an end: the host's edge negation stage in front of it.
           "PATTERN SEQ(A a, B b, NOT(D d)) WITHIN 7",
           "PATTERN SEQ(NOT(D d), A a, B b) WHERE d.k = a.k WITHIN 8",
       }) {
    all.push_back({"algebra", q, {}});
  }
}

// The petri engine's block: the marking with shared tokens, inhibitor
// places, lazy Kleene places, the consuming policies, strategies,
// PARTITION BY.
void petriCases(std::vector<Case>& all) {
  for (const char* q : {
           "PATTERN SEQ(A a, B b, C c) WHERE a.x <= c.x WITHIN 12",
           "PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x = a.x WITHIN 10",
           "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x >= b[i-1].x WITHIN 10",
           "PATTERN AND(SEQ(A a, B b), C c) WHERE a.x = b.x WITHIN 6",
           "PATTERN SEQ(A a, B b, C c) WITHIN 12 STRATEGY skip_till_next_match",
           "PATTERN SEQ(A a, B b) WITHIN 6 STRATEGY strict_contiguity",
           "PATTERN SEQ(A a, B b, C c) WITHIN 15 PARTITION BY k",
       }) {
    all.push_back({"petri", q, {}});
  }
  all.push_back({"petri", "PATTERN SEQ(A a, B b, C c) WITHIN 8", {"policy=conflict"}});
  all.push_back({"petri", "PATTERN SEQ(A a, B b, C c) WITHIN 8", {"policy=concurrency"}});
}

// The join engine over uncertain events (one worker on the caller's thread
// or several, either expiry, spilling to disk over a small budget), and queries the host runs
// through its output control stage (EMIT FIRST/LAST EVERY, AFTER MATCH SKIP PAST LAST EVENT) in
// front of an engine.
std::vector<Case> joinAndHostStageCases() {
  return {
      {"join", "PATTERN AND(A a, B b) WHERE a.k = b.k", {"window=6", "threshold=0.3", "batch=1"}},
      {"join",
       "PATTERN AND(A a, A b) WHERE a.k = b.k RETURN P(a.x AS ax, b.x AS bx)",
       {"window=5", "threshold=0.5"}},
      {"join",
       "PATTERN AND(A a, C c) WHERE a.k = c.k",
       {"window=8", "workers=3", "batch=4", "expiry=batch", "deletion_interval=3"}},
      {"join",
       "PATTERN AND(A a, B b) WHERE a.k = b.k",
       {"window=8", "threshold=0.3", "batch=1", "spill=window_half", "memory_budget=600"}},
      {"nfa", "PATTERN SEQ(A a, B b) WITHIN 6 EMIT FIRST EVERY 5 PER a.k", {}},
      {"nfa", "PATTERN SEQ(A a, B b) WITHIN 6 EMIT LAST EVERY 4", {"construction=batched"}},
      {"nfa", "PATTERN SEQ(A a, B b, NOT(D d)) WITHIN 5 EMIT LAST EVERY 3 PER a.k", {}},
      {"nfa",
       "PATTERN SEQ(A a, B b, C c) WITHIN 8 PARTITION BY k AFTER MATCH SKIP PAST LAST EVENT",
       {"construction=batched"}},
  };
}

// The queries of the differential: each exercises a kind of state.
std::vector<Case> cases() {
  std::vector<Case> all = joinAndHostStageCases();
  const std::vector<std::string> nfa = {
      "PATTERN SEQ(A a, B b, C c) WHERE a.x <= c.x WITHIN 12",
      "PATTERN SEQ(A a, B b, C c) WITHIN 12 STRATEGY skip_till_next_match",
      "PATTERN SEQ(A a, B b) WITHIN 6 STRATEGY strict_contiguity",
      "PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x = a.x WITHIN 10",
      "PATTERN SEQ(A a, B b, NOT(D d)) WITHIN 7",
      "PATTERN SEQ(NOT(D d), A a, B b) WHERE d.k = a.k WITHIN 8",
      "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x >= b[i-1].x WITHIN 10",
      "PATTERN SEQ(A a, B+ b[], C c) WITHIN 10 STRATEGY skip_till_next_match",
      "PATTERN SEQ(A a, B b, C c) WITHIN 15 PARTITION BY k",
      "PATTERN SEQ(A a, B b, NOT(D d)) WITHIN 9 PARTITION BY k",
  };
  for (const std::string& q : nfa) {
    for (const char* construction : {"construction=per_event", "construction=batched"}) {
      all.push_back({"nfa", q, {construction}});
    }
  }
  all.push_back(
      {"nfa", "PATTERN SEQ(A a, B b, C c) WITHIN 12", {"construction=batched", "batch_period=5"}});
  // Caps on the state that strike often: what they dropped, and the least
  // recently active partitions they shed, are part of the state.
  all.push_back(
      {"nfa",
       "PATTERN SEQ(A a, B b, C c) WITHIN 15 PARTITION BY k",
       {"construction=per_event", "max_partition_partial_matches=3", "max_partial_matches=5"}});
  all.push_back(
      {"nfa",
       "PATTERN SEQ(A a, B b, C c) WITHIN 15 PARTITION BY k",
       {"construction=batched", "max_partition_partial_matches=2", "state_policy=refuse_new"}});
  for (const char* engine : {"algebra", "petri"}) {
    all.push_back({engine,
                   "PATTERN SEQ(A a, B b, C c) WITHIN 15 PARTITION BY k CONTEXT unrestricted",
                   {"max_partition_partial_matches=3", "max_partial_matches=5"}});
    all.push_back({engine,
                   "PATTERN SEQ(A a, B b, C c) WITHIN 15 CONTEXT unrestricted",
                   {"max_partition_partial_matches=2", "state_policy=refuse_new"}});
  }
  // FROM A a WINDOW <window> RETURN R(<columns>) <emit>.
  struct WindowQuery {
    std::string window, columns, emit;
  };
  const std::vector<WindowQuery> windows = {
      {"TUMBLING 10 GROUP BY a.k", "a.k AS k, count(a) AS n, sum(a.x) AS s", ""},
      {"SLIDING 12 EVERY 4 GROUP BY a.k", "a.k AS k, avg(a.x) AS m, min(a.x) AS lo, max(a.x) AS hi",
       ""},
      {"SESSION GAP 3 GROUP BY a.k", "a.k AS k, count(a) AS n, first(a.x) AS f, last(a.x) AS l",
       ""},
      {"TUMBLING 12 GROUP BY a.k", "a.k AS k, count(a) AS n, stddev(a.x) AS sd", " EMIT EVERY 5"},
      {"SESSION GAP 4", "count(a) AS n, sum(a.x) AS s", " EMIT EVERY 3"},
  };
  for (const WindowQuery& w : windows) {
    all.push_back(
        {"window", "FROM A a WINDOW " + w.window + " RETURN R(" + w.columns + ")" + w.emit, {}});
  }
  algebraCases(all);
  petriCases(all);
  return all;
}

class MatchCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("match_checkpoint_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A random stream of `n` events of types A-D with x in 0..3 and k in 0..2;
  // ts rise by 0-2, and with `delay` > 0 each event is moved up to `delay`
  // behind its place, as a source that re-orders would.
  std::string stream(std::mt19937_64& rng, int n, int delay) {
    std::vector<std::pair<int64_t, std::string>> events;
    int64_t ts = 0;
    for (int i = 0; i < n; ++i) {
      ts += static_cast<int64_t>(rng() % 3);
      const char type = static_cast<char>('A' + rng() % 4);
      const uint64_t x = rng() % 4;
      const uint64_t k = rng() % 3;
      // Uncertain events (probability 1, 0.75, 0.5 or 0.25, by x): the join
      // drops pairs below its threshold, the other engines carry it along.
      events.emplace_back(ts, "{\"type\":\"" + std::string(1, type) +
                                  "\",\"ts\":" + std::to_string(ts) +
                                  ",\"prob\":" + std::to_string(1 - 0.25 * static_cast<double>(x)) +
                                  ",\"attrs\":{\"x\":" + std::to_string(x) +
                                  ",\"k\":" + std::to_string(k) + "}}\n");
    }
    if (delay > 0) {
      for (size_t i = 1; i < events.size(); ++i) {
        size_t j = i;
        // Swap back while within the delay of the newest before it.
        while (j > 0 && rng() % 2 == 0 && events[i].first - events[j - 1].first < delay) --j;
        std::rotate(events.begin() + static_cast<std::ptrdiff_t>(j),
                    events.begin() + static_cast<std::ptrdiff_t>(i),
                    events.begin() + static_cast<std::ptrdiff_t>(i) + 1);
      }
    }
    std::string text;
    for (const auto& e : events) text += e.second;
    std::string file = path("events.jsonl");
    std::ofstream(file) << text;
    return file;
  }

  MatchCommandOptions options(const Case& c, const std::string& events) const {
    MatchCommandOptions o;
    o.engine = c.engine;
    o.query = c.query;
    o.options = c.options;
    o.events_file = events;
    o.full = true;
    o.plugin_paths.push_back(std::string(CEPBUS_TEST_BUILD_DIR) + "/plugins");
    return o;
  }

  // Runs the command; `out` is its output without the events' ids, which
  // are unique per event made, not a function of the stream.
  int run(const MatchCommandOptions& o, std::string& out) {
    std::ostringstream o_out;
    err_.str("");
    const int rc = runMatchCommand(o, o_out, err_);
    static const std::regex kId("\"id\":[0-9]+,?");
    out = std::regex_replace(o_out.str(), kId, "");
    return rc;
  }

  std::filesystem::path dir_;
  std::ostringstream err_;
};

int envOr(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : fallback;
}

// One engine's cases per test, so that each stays well inside the suite's
// time limit under the sanitizers and the engines run side by side.
constexpr std::array<const char*, 5> kSplitEngines = {"nfa", "algebra", "petri", "window", "join"};

TEST_F(MatchCheckpointTest, EveryCaseOfTheDifferentialHasItsEnginesTest) {
  for (const Case& c : cases()) {
    EXPECT_NE(std::find(kSplitEngines.begin(), kSplitEngines.end(), c.engine), kSplitEngines.end())
        << c.engine << ": " << c.query;
  }
}

// One engine, with the events in order (max_delay 0) or re-ordered within 3:
// apart, so that each test stays well within the sanitizers' time limit.
class MatchCheckpointSplitTest
    : public MatchCheckpointTest,
      public ::testing::WithParamInterface<std::tuple<const char*, int>> {};

TEST_P(MatchCheckpointSplitTest, StopAndResumeAtEverySplitPrintsExactlyTheOneRunOutput) {
  const int streams = envOr("CEPBUS_CHECKPOINT_CASES", 3);
  std::mt19937_64 rng(static_cast<uint64_t>(envOr("CEPBUS_CHECKPOINT_SEED", 20261207)));
  constexpr int kEvents = 40;
  size_t runs = 0;
  size_t with_matches = 0;
  std::vector<Case> engine_cases;
  const auto [engine, delay] = GetParam();
  for (const Case& c : cases()) {
    if (c.engine == engine) engine_cases.push_back(c);
  }
  ASSERT_FALSE(engine_cases.empty()) << "no case for engine " << engine;
  for (Case c : engine_cases) {
    if (delay > 0) c.options.push_back("max_delay=" + std::to_string(delay));
    for (int s = 0; s < streams; ++s) {
      const std::string events = stream(rng, kEvents, delay);
      std::string whole;
      ASSERT_EQ(run(options(c, events), whole), 0) << c.query << "\n" << err_.str();
      with_matches += whole.empty() ? 0 : 1;
      for (int n = 0; n <= kEvents + 1; ++n) {
        MatchCommandOptions first = options(c, events);
        first.checkpoint_file = path("state.snap");
        first.stop_after = n;
        std::string before;
        ASSERT_EQ(run(first, before), 0) << c.query << " N=" << n << "\n" << err_.str();
        MatchCommandOptions second = options(c, events);
        second.resume_file = first.checkpoint_file;
        std::string after;
        ASSERT_EQ(run(second, after), 0) << c.query << " N=" << n << "\n" << err_.str();
        runs += 2;
        if (before + after == whole) continue;
        ADD_FAILURE() << c.engine << " " << c.query << " options "
                      << ::testing::PrintToString(c.options) << " split after " << n
                      << " events\nwhole:\n"
                      << whole << "before:\n"
                      << before << "after:\n"
                      << after;
        break;  // the next stream
      }
    }
  }
  EXPECT_GT(with_matches, engine_cases.size()) << "the streams must give matches to compare";
  std::printf(
      "{\"test\":\"checkpoint_differential\",\"engine\":\"%s\",\"max_delay\":%d,"
      "\"runs\":%zu,\"streams_with_matches\":%zu}\n",
      engine, delay, runs, with_matches);
}

INSTANTIATE_TEST_SUITE_P(Engines, MatchCheckpointSplitTest,
                         ::testing::Combine(::testing::ValuesIn(kSplitEngines),
                                            ::testing::Values(0, 3)),
                         [](const ::testing::TestParamInfo<std::tuple<const char*, int>>& info) {
                           return std::string(std::get<0>(info.param)) + "_delay" +
                                  std::to_string(std::get<1>(info.param));
                         });

// The command reads 256 events at a time and time passes at the end of each
// read: splits at, before and after those ends, and at the last event.
TEST_F(MatchCheckpointTest, SplitsAroundTheReadBatchesOfALongerStream) {
  std::mt19937_64 rng(static_cast<uint64_t>(envOr("CEPBUS_CHECKPOINT_SEED", 20261207)) + 1);
  constexpr int kEvents = 700;
  const std::vector<Case> long_cases = {
      {"nfa", "PATTERN SEQ(A a, B b, NOT(D d)) WITHIN 9 PARTITION BY k", {}},
      {"nfa", "PATTERN SEQ(A a, B+ b[], C c) WITHIN 10", {"max_delay=3"}},
      {"join",
       "PATTERN AND(A a, B b) WHERE a.k = b.k",
       {"window=6", "workers=2", "batch=100", "max_delay=3"}},
      {"window",
       "FROM A a WINDOW SLIDING 12 EVERY 4 GROUP BY a.k RETURN R(count(a) AS n) EMIT EVERY 5",
       {"max_delay=3"}},
  };
  for (const Case& c : long_cases) {
    const bool delayed = !c.options.empty();
    const std::string events = stream(rng, kEvents, delayed ? 3 : 0);
    std::string whole;
    ASSERT_EQ(run(options(c, events), whole), 0) << err_.str();
    ASSERT_FALSE(whole.empty());
    for (int n : {1, 255, 256, 257, 300, 511, 512, 513, 699, 700}) {
      MatchCommandOptions first = options(c, events);
      first.checkpoint_file = path("state.snap");
      first.stop_after = n;
      std::string before, after;
      ASSERT_EQ(run(first, before), 0) << err_.str();
      MatchCommandOptions second = options(c, events);
      second.resume_file = first.checkpoint_file;
      ASSERT_EQ(run(second, after), 0) << err_.str();
      EXPECT_EQ(before + after, whole) << c.query << " split after " << n;
    }
  }
}

TEST_F(MatchCheckpointTest, ACheckpointCanBeResumedAndCheckpointedAgain) {
  std::mt19937_64 rng(7);
  const Case c{"nfa", "PATTERN SEQ(A a, B b, NOT(D d)) WITHIN 9 PARTITION BY k", {}};
  const std::string events = stream(rng, 60, 0);
  std::string whole, one, two, three;
  ASSERT_EQ(run(options(c, events), whole), 0);
  MatchCommandOptions a = options(c, events);
  a.checkpoint_file = path("a.snap");
  a.stop_after = 20;
  ASSERT_EQ(run(a, one), 0) << err_.str();
  MatchCommandOptions b = options(c, events);
  b.resume_file = a.checkpoint_file;
  b.checkpoint_file = path("b.snap");
  b.stop_after = 45;
  ASSERT_EQ(run(b, two), 0) << err_.str();
  MatchCommandOptions d = options(c, events);
  d.resume_file = b.checkpoint_file;
  ASSERT_EQ(run(d, three), 0) << err_.str();
  EXPECT_FALSE(whole.empty());
  EXPECT_EQ(one + two + three, whole);
}

// Several queries in one petri net (--patterns): the net's shared places
// are written once and every pattern's lines come out as in one run (lines
// of different patterns within one read batch may interleave differently).
TEST_F(MatchCheckpointTest, APetriNetOfSeveralPatternsStopsAndResumes) {
  std::mt19937_64 rng(13);
  const std::string patterns = path("patterns.txt");
  std::ofstream(patterns) << "abc: PATTERN SEQ(A a, B b, C c) WITHIN 10\n"
                             "abd: PATTERN SEQ(A a, B b, D d) WITHIN 8\n"
                             "dbc: PATTERN SEQ(D d, B b, C c) WHERE d.x = c.x WITHIN 9\n";
  // Each pattern's lines, in order.
  auto byPattern = [](const std::string& out) {
    std::map<std::string, std::string> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      lines[line.substr(0, line.find(',') + 1)] += line + "\n";
    }
    return lines;
  };
  const std::string events = stream(rng, 60, 0);
  MatchCommandOptions o = options({"petri", "", {}}, events);
  o.query.clear();
  o.patterns_file = patterns;
  std::string whole;
  ASSERT_EQ(run(o, whole), 0) << err_.str();
  ASSERT_EQ(byPattern(whole).size(), 3u) << whole;
  for (int n : {0, 7, 20, 33, 59, 60}) {
    MatchCommandOptions first = o;
    first.checkpoint_file = path("state.snap");
    first.stop_after = n;
    std::string before, after;
    ASSERT_EQ(run(first, before), 0) << err_.str();
    MatchCommandOptions second = o;
    second.resume_file = first.checkpoint_file;
    ASSERT_EQ(run(second, after), 0) << err_.str();
    EXPECT_EQ(byPattern(before + after), byPattern(whole)) << "split after " << n;
  }
}

class BadCheckpointTest : public MatchCheckpointTest {
 protected:
  void SetUp() override {
    MatchCheckpointTest::SetUp();
    std::mt19937_64 rng(11);
    events_ = stream(rng, 30, 0);
    MatchCommandOptions o = options(nfa_, events_);
    o.checkpoint_file = path("good.snap");
    o.stop_after = 15;
    std::string out;
    ASSERT_EQ(run(o, out), 0) << err_.str();
    std::ifstream in(o.checkpoint_file, std::ios::binary);
    good_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    ASSERT_GT(good_.size(), 20u);
  }

  // Resumes `c` from a file holding `bytes`; its exit status, stderr in err_.
  int resumeFrom(const std::string& bytes, const Case& c) {
    const std::string file = path("bad.snap");
    std::ofstream(file, std::ios::binary) << bytes;
    MatchCommandOptions o = options(c, events_);
    o.resume_file = file;
    std::string out;
    const int rc = run(o, out);
    EXPECT_TRUE(out.empty()) << "nothing runs on a refused checkpoint";
    EXPECT_NE(err_.str().find("bad.snap"), std::string::npos) << err_.str();
    return rc;
  }

  const Case nfa_{"nfa", "PATTERN SEQ(A a, B b, C c) WITHIN 12", {}};
  std::string events_;
  std::string good_;
};

TEST_F(BadCheckpointTest, AFlippedByteIsRefusedAsCorrupted) {
  for (size_t i : {size_t{12}, good_.size() / 2, good_.size() - 1}) {
    std::string bad = good_;
    bad[i] = static_cast<char>(bad[i] ^ 0x01);
    EXPECT_NE(resumeFrom(bad, nfa_), 0);
    EXPECT_NE(err_.str().find("corrupted or truncated"), std::string::npos) << err_.str();
  }
}

TEST_F(BadCheckpointTest, ATruncatedFileIsRefused) {
  for (size_t n : {size_t{0}, size_t{5}, size_t{13}, good_.size() - 1}) {
    EXPECT_NE(resumeFrom(good_.substr(0, n), nfa_), 0) << n;
  }
  EXPECT_NE(err_.str().find("truncated"), std::string::npos) << err_.str();
}

TEST_F(BadCheckpointTest, AnotherQueryOrOptionIsRefusedAsSuch) {
  Case other = nfa_;
  other.query = "PATTERN SEQ(A a, B b, D d) WITHIN 12";
  EXPECT_NE(resumeFrom(good_, other), 0);
  EXPECT_NE(err_.str().find("another query or options"), std::string::npos) << err_.str();
  EXPECT_NE(err_.str().find("an edit keeps the state only when"), std::string::npos) << err_.str();
  other = nfa_;
  other.options = {"max_delay=2"};
  EXPECT_NE(resumeFrom(good_, other), 0);
  EXPECT_NE(err_.str().find("another query or options"), std::string::npos) << err_.str();
}

TEST_F(BadCheckpointTest, AnotherEngineIsRefusedByName) {
  const Case window{"window", "FROM A a WINDOW TUMBLING 10 RETURN R(count(a) AS n)", {}};
  EXPECT_NE(resumeFrom(good_, window), 0);
  EXPECT_NE(err_.str().find("engine 'nfa', this run's engine is 'window'"), std::string::npos)
      << err_.str();
}

TEST_F(BadCheckpointTest, ANewerFormatIsRefusedAsNewer) {
  std::string newer = good_;
  newer[8] = static_cast<char>(plugin::kSnapshotFormatVersion + 1);
  const size_t body = newer.size() - 4;
  const uint32_t crc = plugin::crc32({reinterpret_cast<const unsigned char*>(newer.data()), body});
  for (size_t i = 0; i < 4; ++i) newer[body + i] = static_cast<char>(crc >> (8 * i));
  EXPECT_NE(resumeFrom(newer, nfa_), 0);
  EXPECT_NE(err_.str().find("written by a newer cepbus"), std::string::npos) << err_.str();
}

TEST_F(BadCheckpointTest, AMissingFileOrAShorterEventsFileIsRefused) {
  MatchCommandOptions o = options(nfa_, events_);
  o.resume_file = path("absent.snap");
  std::string out;
  EXPECT_NE(run(o, out), 0);
  EXPECT_NE(err_.str().find("cannot open checkpoint"), std::string::npos) << err_.str();
  const std::string shorter = path("short.jsonl");
  std::ofstream(shorter) << "{\"type\":\"A\",\"ts\":1}\n";
  o = options(nfa_, shorter);
  o.resume_file = path("good.snap");
  EXPECT_NE(run(o, out), 0);
  EXPECT_NE(err_.str().find("was written after 15 events"), std::string::npos) << err_.str();
}

TEST_F(MatchCheckpointTest, AnEngineThatDoesNotSnapshotIsRefusedByName) {
  std::mt19937_64 rng(3);
  const std::string events = stream(rng, 10, 0);
  MatchCommandOptions o = options({"cepfake", "PATTERN B b", {}}, events);
  o.plugin_paths.push_back(CEPBUS_CEPFAKE_PLUGIN_DIR);
  o.checkpoint_file = path("x.snap");
  o.stop_after = 5;
  std::string out;
  EXPECT_NE(run(o, out), 0);
  EXPECT_NE(err_.str().find("engine 'cepfake' cannot checkpoint"), std::string::npos) << err_.str();
  EXPECT_FALSE(std::filesystem::exists(o.checkpoint_file));
}

TEST_F(MatchCheckpointTest, EngineAutoRefusesACheckpointWhileItsTrialRuns) {
  std::mt19937_64 rng(3);
  const std::string events = stream(rng, 10, 0);
  MatchCommandOptions o = options({"auto", "PATTERN SEQ(A a, B b) WITHIN 5", {}}, events);
  o.checkpoint_file = path("x.snap");
  std::string out;
  EXPECT_NE(run(o, out), 0);
  EXPECT_NE(err_.str().find("engine auto's trial between"), std::string::npos) << err_.str();
  EXPECT_NE(err_.str().find("is still running after 10 events"), std::string::npos) << err_.str();
  EXPECT_FALSE(std::filesystem::exists(o.checkpoint_file));
}

// Past the trial (at most 256 + 4096 events), the checkpoint holds the kept
// engine's state, and the resumed run runs it alone.
TEST_F(MatchCheckpointTest, EngineAutoCheckpointsOnceItsTrialHasDecided) {
  std::mt19937_64 rng(4);
  const std::string events = stream(rng, 6000, 0);
  const Case c{"auto", "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x >= b[i-1].x WITHIN 10", {}};
  std::string whole;
  ASSERT_EQ(run(options(c, events), whole), 0) << err_.str();
  MatchCommandOptions first = options(c, events);
  first.checkpoint_file = path("auto.snap");
  first.stop_after = 5000;
  std::string before, after;
  // The trial's pick depends on measured CPU; every engine it may keep
  // snapshots.
  ASSERT_EQ(run(first, before), 0) << err_.str();
  MatchCommandOptions second = options(c, events);
  second.resume_file = first.checkpoint_file;
  ASSERT_EQ(run(second, after), 0) << err_.str();
  EXPECT_NE(err_.str().find("trial kept"), std::string::npos) << err_.str();
  // Each run's trial may keep another engine, whose matches of one time may
  // come in another order: the same matches, each once.
  auto sortedLines = [](const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    std::sort(lines.begin(), lines.end());
    return lines;
  };
  EXPECT_EQ(sortedLines(before + after), sortedLines(whole));
}

// --- an edited query resumed from the original's checkpoint -----------------

// An edit that leaves what the state holds as it is (a condition checked
// when a match is built, RETURN, a narrower WITHIN, HAVING): the resumed run
// prints exactly what the edited query would print from the same point had
// it run from the start.
TEST_F(MatchCheckpointTest, AnEditThatKeepsTheStateResumesAsTheEditedQueryWould) {
  struct Edit {
    Case before;
    std::string after;
  };
  const std::string window = "FROM A a WINDOW SLIDING 12 EVERY 4 GROUP BY a.k ";
  const std::vector<Edit> edits = {
      {{"nfa", "PATTERN SEQ(A a, B b, C c) WHERE a.x <= c.x WITHIN 12", {}},
       "PATTERN SEQ(A a, B b, C c) WHERE a.x > c.x AND b.x != c.x WITHIN 12"},
      {{"nfa", "PATTERN SEQ(A a, B b, C c) WITHIN 12", {"construction=batched"}},
       "PATTERN SEQ(A a, B b, C c) WITHIN 12 RETURN Found(a.x AS first, c.x AS last)"},
      {{"nfa", "PATTERN SEQ(A a, B+ b[], C c) WITHIN 12", {"construction=per_event"}},
       "PATTERN SEQ(A a, B+ b[], C c) WITHIN 5"},
      {{"nfa", "PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x = a.x WITHIN 10 PARTITION BY k", {}},
       "PATTERN SEQ(A a, NOT(C c), B b) WHERE c.x = a.x AND a.x < b.x WITHIN 10 PARTITION BY k"},
      {{"window", window + "RETURN R(a.k AS k, count(a) AS n, sum(a.x) AS s)", {"max_delay=3"}},
       window + "HAVING count(a) > 2 RETURN Busy(a.k AS key, sum(a.x) AS total, count(a) AS n)"},
  };
  std::mt19937_64 rng(static_cast<uint64_t>(envOr("CEPBUS_CHECKPOINT_SEED", 20261207)) + 2);
  constexpr int kEvents = 40;
  size_t compared = 0;
  for (const Edit& e : edits) {
    Case edited = e.before;
    edited.query = e.after;
    const bool delayed = !e.before.options.empty() && e.before.options[0] == "max_delay=3";
    for (int s = 0; s < 3; ++s) {
      const std::string events = stream(rng, kEvents, delayed ? 3 : 0);
      std::string whole;
      ASSERT_EQ(run(options(edited, events), whole), 0) << edited.query << "\n" << err_.str();
      for (int n = 0; n <= kEvents; ++n) {
        // What the edited query prints by event n, had it run from the start.
        MatchCommandOptions edited_first = options(edited, events);
        edited_first.checkpoint_file = path("edited.snap");
        edited_first.stop_after = n;
        std::string edited_before;
        ASSERT_EQ(run(edited_first, edited_before), 0) << err_.str();
        ASSERT_EQ(whole.compare(0, edited_before.size(), edited_before), 0);

        MatchCommandOptions first = options(e.before, events);
        first.checkpoint_file = path("state.snap");
        first.stop_after = n;
        std::string ignored, after;
        ASSERT_EQ(run(first, ignored), 0) << err_.str();
        MatchCommandOptions second = options(edited, events);
        second.resume_file = first.checkpoint_file;
        ASSERT_EQ(run(second, after), 0) << e.after << " N=" << n << "\n" << err_.str();
        ASSERT_NE(err_.str().find("its state carried over to the edited query"), std::string::npos)
            << err_.str();
        ++compared;
        if (after == whole.substr(edited_before.size())) continue;
        ADD_FAILURE() << e.before.query << "\nedited to " << e.after << "\nsplit after " << n
                      << " events\nthe edited query from there:\n"
                      << whole.substr(edited_before.size()) << "resumed:\n"
                      << after;
        break;
      }
    }
  }
  EXPECT_EQ(compared, edits.size() * 3 * (kEvents + 1));
}

// A wider WITHIN cannot bring back what the original's window had already
// let go: the resumed run prints only matches the edited query prints too,
// and at least every one of those whose events before the checkpoint lie
// within the original WITHIN of its last event.
TEST_F(MatchCheckpointTest, AWiderWithinFindsWhatTheKeptStateAllowsAndNothingElse) {
  const Case narrow{"nfa", "PATTERN SEQ(A a, B b, C c) WITHIN 6", {}};
  Case wide = narrow;
  wide.query = "PATTERN SEQ(A a, B b, C c) WITHIN 20";
  std::mt19937_64 rng(static_cast<uint64_t>(envOr("CEPBUS_CHECKPOINT_SEED", 20261207)) + 3);
  constexpr int kEvents = 60;
  size_t lost = 0;
  size_t found = 0;
  for (int s = 0; s < 3; ++s) {
    const std::string events = stream(rng, kEvents, 0);
    std::vector<int64_t> ts;  // of each event, in file order
    {
      std::ifstream in(events);
      for (std::string line; std::getline(in, line);) {
        ts.push_back(nlohmann::json::parse(line)["ts"].get<int64_t>());
      }
    }
    std::string whole;
    ASSERT_EQ(run(options(wide, events), whole), 0) << err_.str();
    for (int n = 1; n <= kEvents; n += 7) {
      MatchCommandOptions wide_first = options(wide, events);
      wide_first.checkpoint_file = path("wide.snap");
      wide_first.stop_after = n;
      std::string wide_before, ignored, after;
      ASSERT_EQ(run(wide_first, wide_before), 0) << err_.str();
      MatchCommandOptions first = options(narrow, events);
      first.checkpoint_file = path("state.snap");
      first.stop_after = n;
      ASSERT_EQ(run(first, ignored), 0) << err_.str();
      MatchCommandOptions second = options(wide, events);
      second.resume_file = first.checkpoint_file;
      ASSERT_EQ(run(second, after), 0) << err_.str();

      std::istringstream resumed(after);
      std::istringstream expected(whole.substr(wide_before.size()));
      std::vector<std::string> resumed_lines;
      for (std::string line; std::getline(resumed, line);) {
        EXPECT_NE(whole.find(line), std::string::npos)
            << "not a match of the edited query: " << line;
        resumed_lines.push_back(line);
      }
      const int64_t checkpoint_ts = ts[static_cast<size_t>(n) - 1];
      for (std::string line; std::getline(expected, line);) {
        int64_t earliest = INT64_MAX;
        const nlohmann::json match = nlohmann::json::parse(line);
        for (const auto& c : match.at("events")) {
          earliest = std::min(earliest, c["ts"].get<int64_t>());
        }
        const bool kept = earliest > checkpoint_ts - 6;
        const bool printed =
            std::find(resumed_lines.begin(), resumed_lines.end(), line) != resumed_lines.end();
        if (kept) {
          EXPECT_TRUE(printed) << "lost after the checkpoint at " << n << ": " << line;
        }
        lost += printed ? 0 : 1;
        found += printed ? 1 : 0;
      }
    }
  }
  EXPECT_GT(found, 0u);
  EXPECT_GT(lost, 0u) << "the streams must have matches the narrower window let go";
}

TEST_F(MatchCheckpointTest, AnEditThatChangesWhatTheStateHoldsIsRefusedNamingTheEngine) {
  std::mt19937_64 rng(9);
  const std::string events = stream(rng, 30, 0);
  struct Edit {
    Case before;
    std::string after;
    std::string why;
  };
  const std::vector<Edit> edits = {
      // A condition on one variable decides which events a stack keeps.
      {{"nfa", "PATTERN SEQ(A a, B b) WITHIN 8", {}},
       "PATTERN SEQ(A a, B b) WHERE a.x > 1 WITHIN 8",
       "the edit changes what 'nfa' keeps"},
      // Under skip_till_next_match, every condition does.
      {{"nfa", "PATTERN SEQ(A a, B b) WITHIN 8 STRATEGY skip_till_next_match", {}},
       "PATTERN SEQ(A a, B b) WHERE a.x < b.x WITHIN 8 STRATEGY skip_till_next_match",
       "the edit changes what 'nfa' keeps"},
      // A tie on one attribute partitions the stacks by it.
      {{"nfa", "PATTERN SEQ(A a, B b) WITHIN 8", {}},
       "PATTERN SEQ(A a, B b) WHERE a.k = b.k WITHIN 8",
       "the edit changes what 'nfa' keeps"},
      // Another aggregate needs another running state.
      {{"window", "FROM A a WINDOW TUMBLING 10 RETURN R(count(a) AS n)", {}},
       "FROM A a WINDOW TUMBLING 10 RETURN R(count(a) AS n, max(a.x) AS hi)",
       "the edit changes what 'window' keeps"},
      {{"window", "FROM A a WINDOW TUMBLING 10 RETURN R(count(a) AS n)", {}},
       "FROM A a WINDOW TUMBLING 12 RETURN R(count(a) AS n)",
       "an edit keeps the state only when"},
      {{"nfa", "PATTERN SEQ(A a, B b) WITHIN 8", {}},
       "PATTERN SEQ(A a, B b, C c) WITHIN 8",
       "an edit keeps the state only when"},
  };
  for (const Edit& e : edits) {
    MatchCommandOptions first = options(e.before, events);
    first.checkpoint_file = path("state.snap");
    first.stop_after = 15;
    std::string out;
    ASSERT_EQ(run(first, out), 0) << err_.str();
    Case edited = e.before;
    edited.query = e.after;
    MatchCommandOptions second = options(edited, events);
    second.resume_file = first.checkpoint_file;
    EXPECT_NE(run(second, out), 0) << e.after;
    EXPECT_TRUE(out.empty()) << e.after;
    EXPECT_NE(err_.str().find(e.why), std::string::npos) << e.after << "\n" << err_.str();
  }
}

// The real binary, twice, as a user runs it.
TEST_F(MatchCheckpointTest, TheCepbusBinaryStopsAndResumes) {
  std::mt19937_64 rng(5);
  const std::string events = stream(rng, 50, 2);
  const std::string common = std::string(CEPBUS_BINARY) + " match --engine nfa --plugin-path " +
                             CEPBUS_TEST_BUILD_DIR + "/plugins --max-delay 2 --events " + events +
                             " --query 'PATTERN SEQ(A a, B b, NOT(C c)) WITHIN 8 PARTITION BY k'";
  auto shell = [](const std::string& command, std::string& out) {
    FILE* p = ::popen(command.c_str(), "r");
    out.clear();
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    return ::pclose(p);
  };
  std::string whole, before, after;
  ASSERT_EQ(shell(common, whole), 0);
  const std::string snap = path("run.snap");
  ASSERT_EQ(shell(common + " --checkpoint " + snap + " --stop-after 23", before), 0);
  ASSERT_EQ(shell(common + " --resume " + snap, after), 0);
  EXPECT_FALSE(whole.empty());
  EXPECT_EQ(before + after, whole);
  EXPECT_FALSE(std::filesystem::exists(snap + ".tmp"));
}

}  // namespace
}  // namespace cepbus::app
