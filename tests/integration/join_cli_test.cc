// End-to-end tests of `cepbus join`: the real binary loading the join plugin,
// real readings, time matrices and spill files.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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

class JoinCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("cepbus-join-cli-" + std::to_string(rd()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  int run(std::vector<std::string> args, std::string* out, std::string* err = nullptr) {
    args.insert(args.begin(), {CEPBUS_BINARY, "join"});
    ChildProcess p(std::move(args), dir_);
    EXPECT_TRUE(p.started());
    const int code = p.wait(std::chrono::seconds(120));
    if (out) *out = p.out();
    if (err) *err = p.err();
    return code;
  }

  // Readings of 30 plates at 4 checkpoints, 1-2 alternatives per passage.
  std::string readings(int n) {
    std::mt19937 rng(42);
    std::string s;
    for (int i = 0; i < n; ++i) {
      const int plate = 1000 + static_cast<int>(rng() % 30);
      const int site = static_cast<int>(rng() % 4);
      const double p = 0.5 + 0.01 * static_cast<double>(rng() % 50);
      s += R"({"type":"Reading","ts":)" + std::to_string(i / 2) + R"(,"attrs":{"plate":)" +
           std::to_string(plate) + R"(,"site":)" + std::to_string(site) + R"(},"prob":)" +
           std::to_string(p) + "}\n";
    }
    return s;
  }

  fs::path dir_;
};

TEST_F(JoinCliTest, PrintsEveryJoinedPairAsAJsonLine) {
  // P4's example: 12345 read at N (0.9) and at S (0.8) six minutes apart,
  // where the fastest trip takes 30.
  write("m.csv", "site,N,S\nN,0,30\nS,30,0\n");
  write("r.jsonl", R"({"type":"Reading","ts":1,"attrs":{"plate":"12345","site":"N"},"prob":0.9})"
                   "\n"
                   R"({"type":"Reading","ts":1,"attrs":{"plate":"72345","site":"N"},"prob":0.1})"
                   "\n"
                   R"({"type":"Reading","ts":7,"attrs":{"plate":"12345","site":"S"},"prob":0.8})"
                   "\n"
                   R"({"type":"Reading","ts":7,"attrs":{"plate":"72345","site":"S"},"prob":0.2})"
                   "\n"
                   R"({"type":"Reading","ts":40,"attrs":{"plate":"12345","site":"N"},"prob":0.9})"
                   "\n");
  std::string out, err;
  ASSERT_EQ(run({"--events", "r.jsonl", "--key", "plate", "--site", "site", "--time-matrix",
                 "m.csv", "--threshold", "0.7"},
                &out, &err),
            0)
      << err;
  EXPECT_EQ(
      out,
      R"({"key":"12345","left":{"attrs":{"plate":"12345","site":"N"},"prob":0.9,"ts":1,"type":"Reading"},)"
      R"("right":{"attrs":{"plate":"12345","site":"S"},"prob":0.8,"ts":7,"type":"Reading"},)"
      R"("dt":6,"prob":0.7200000000000001})"
      "\n");
}

// A reading behind the newest one is late: not joined, counted on stderr,
// and the run succeeds with the pairs of the others.
TEST_F(JoinCliTest, ALateReadingIsCountedAndLeftOut) {
  write("m.csv", "site,N,S\nN,0,30\nS,30,0\n");
  const std::string n1 = R"({"type":"Reading","ts":1,"attrs":{"plate":"12345","site":"N"}})";
  const std::string s7 = R"({"type":"Reading","ts":7,"attrs":{"plate":"12345","site":"S"}})";
  const std::string late = R"({"type":"Reading","ts":3,"attrs":{"plate":"12345","site":"S"}})";
  const std::vector<std::string> args = {"--events",    "r.jsonl", "--key",         "plate",
                                         "--site",      "site",    "--time-matrix", "m.csv",
                                         "--threshold", "0.5"};
  write("r.jsonl", n1 + "\n" + s7 + "\n");
  std::string expected, err;
  ASSERT_EQ(run(args, &expected, &err), 0) << err;
  ASSERT_FALSE(expected.empty());
  write("r.jsonl", n1 + "\n" + s7 + "\n" + late + "\n");
  std::string out;
  ASSERT_EQ(run(args, &out, &err), 0) << err;
  EXPECT_EQ(out, expected);
  EXPECT_THAT(err, HasSubstr("cepbus join: r.jsonl: 1 late event (more than the maximum delay"));
}

TEST_F(JoinCliTest, CountsAgreeAcrossWorkersExpiryAndSpill) {
  write("m.csv", "0,20,30,40\n20,0,25,35\n30,25,0,15\n40,35,15,0\n");
  write("r.jsonl", readings(6000));
  const std::vector<std::string> base = {"--events",    "r.jsonl", "--key",         "plate",
                                         "--site",      "site",    "--time-matrix", "m.csv",
                                         "--threshold", "0.3",     "--count"};
  std::string reference, err;
  ASSERT_EQ(run(base, &reference, &err), 0) << err;
  EXPECT_THAT(reference, HasSubstr("\"pairs\":"));
  EXPECT_THAT(reference, ::testing::Not(HasSubstr("\"pairs\":0,")));
  const std::vector<std::vector<std::string>> variants = {
      {"--workers", "3"},
      {"--workers", "2", "--expiry", "batch", "--deletion-interval", "7"},
      {"--workers", "2", "--spill", "window_half", "--memory-budget", "20000", "--spill-dir",
       dir_.string()},
      {"--spill", "less_than_probability", "--memory-budget", "20000", "--spill-dir",
       dir_.string()},
  };
  for (const auto& v : variants) {
    std::vector<std::string> args = base;
    args.insert(args.end(), v.begin(), v.end());
    std::string out;
    ASSERT_EQ(run(args, &out, &err), 0) << err;
    EXPECT_EQ(out, reference) << v[0] << " " << v[1];
  }
  // Full output: the same pairs in the same order with 1 and 3 workers.
  std::vector<std::string> full(base.begin(), base.end() - 1);
  std::string one, three;
  ASSERT_EQ(run(full, &one), 0);
  full.insert(full.end(), {"--workers", "3"});
  ASSERT_EQ(run(full, &three), 0);
  EXPECT_EQ(one, three);
  EXPECT_FALSE(one.empty());
}

TEST_F(JoinCliTest, RefusesABadTimeMatrixNamingTheCell) {
  write("m.csv", "0,20\n21,0\n");
  write("r.jsonl", readings(10));
  std::string out, err;
  EXPECT_EQ(run({"--events", "r.jsonl", "--key", "plate", "--site", "site", "--time-matrix",
                 "m.csv", "--threshold", "0.7"},
                &out, &err),
            1);
  EXPECT_THAT(err, HasSubstr("m.csv:2:1: not symmetric"));
}

TEST_F(JoinCliTest, RefusesAReadingWithoutItsKeyNamingTheLine) {
  write("m.csv", "0,20\n20,0\n");
  write("r.jsonl", R"({"type":"Reading","ts":1,"attrs":{"plate":"A","site":0}})"
                   "\n"
                   R"({"type":"Reading","ts":2,"attrs":{"site":1}})"
                   "\n");
  std::string out, err;
  EXPECT_EQ(run({"--events", "r.jsonl", "--key", "plate", "--site", "site", "--time-matrix",
                 "m.csv", "--threshold", "0.7"},
                &out, &err),
            1);
  // The replay feeds the detector in batches; the range names the batch, the
  // message the event (type and ts).
  EXPECT_THAT(err, HasSubstr("r.jsonl: lines 1-2"));
  EXPECT_THAT(err, HasSubstr("Reading event at ts 2"));
  EXPECT_THAT(err, HasSubstr("no key attribute 'plate'"));
}

// A line that is no event is skipped as by `cepbus match`; --strict stops.
TEST_F(JoinCliTest, SkipsALineThatIsNoEventUnlessStrict) {
  write("m.csv", "site,N,S\nN,0,30\nS,30,0\n");
  write("r.jsonl", R"({"type":"Reading","ts":1,"attrs":{"plate":"1","site":"N"},"prob":0.9})"
                   "\n"
                   R"({"type":"Reading","ts":"soon"})"
                   "\n"
                   R"({"type":"Reading","ts":7,"attrs":{"plate":"1","site":"S"},"prob":0.9})"
                   "\n");
  const std::vector<std::string> args = {"--events",    "r.jsonl", "--key",         "plate",
                                         "--site",      "site",    "--time-matrix", "m.csv",
                                         "--threshold", "0.7",     "--count"};
  std::string out, err;
  ASSERT_EQ(run(args, &out, &err), 0) << err;
  EXPECT_THAT(out, HasSubstr("\"pairs\":1"));
  EXPECT_THAT(err, HasSubstr("cepbus join: r.jsonl: line 2: "));
  EXPECT_THAT(err, HasSubstr("(skipped)"));
  EXPECT_THAT(err, HasSubstr("cepbus join: r.jsonl: 1 bad line skipped"));
  std::vector<std::string> strict = args;
  strict.push_back("--strict");
  EXPECT_EQ(run(strict, &out, &err), 1);
  EXPECT_THAT(err, HasSubstr("r.jsonl: line 2: "));
  EXPECT_THAT(err, ::testing::Not(HasSubstr("skipped")));
}

TEST_F(JoinCliTest, RefusesABadCommandLine) {
  std::string out, err;
  EXPECT_EQ(run({"--events", "r.jsonl", "--key", "plate"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("--threshold is required"));
  EXPECT_EQ(run({"--events", "r.jsonl", "--key", "plate", "--threshold", "0.5", "--window", "9",
                 "--frobnicate", "1"},
                &out, &err),
            2);
  EXPECT_THAT(err, HasSubstr("unknown argument '--frobnicate'"));
}

}  // namespace
}  // namespace cepbus
