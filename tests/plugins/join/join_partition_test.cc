// One join partition driven directly, its spill files on a full disk
// (/dev/full): the failure is reported once, spilling stops, everything
// already on disk comes back, and no pair is lost.

#include "plugins/join/join_partition.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "bus/core/pattern/parser.h"
#include "tests/plugins/join/join_test_support.h"

namespace cepbus::plugins::join {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::PairKey;

class JoinPartitionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("cepbus-join-part-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::mt19937_64 rng(21);
    w_ = testing::randomWorkload(rng, 3000, 4, 40, 1000);
    std::ofstream(dir_ / "m.csv") << w_.matrixCsv();
    auto q = pattern::parseQuery("PATTERN AND(Reading a, Reading b) WHERE a.plate = b.plate");
    auto o = plugin::DetectorOptions::parse(std::vector<std::string>{
        "time_matrix=" + (dir_ / "m.csv").string(), "site=site", "threshold=0.5",
        "spill=window_half", "memory_budget=30000", "index_slots=16"});
    auto p = compileJoin(*q, *o);
    EXPECT_TRUE(p) << p.status().message();
    plan_ = *p;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<SpillStore> store(const std::string& path, bool remove) {
    auto s = SpillStore::open(path, remove);
    EXPECT_TRUE(s) << s.status().message();
    return std::move(*s);
  }

  // Feeds every reading at or above the threshold, restores at the end, and
  // returns the sorted pairs; `errors` gets every reported error.
  std::vector<PairKey> run(JoinPartition& part, std::vector<Status>& errors) {
    std::vector<JoinedPair> out;
    uint64_t seq = 0;
    for (const EventPtr& e : w_.events) {
      if (e->probability() < plan_->threshold) continue;
      auto t = makeTuple(*plan_, e, 0, ++seq);
      EXPECT_TRUE(t);
      part.process(std::move(*t), out);
      if (Status s = part.takeError(); !s) errors.push_back(s);
    }
    part.restoreAll(out);
    if (Status s = part.takeError(); !s) errors.push_back(s);
    std::vector<PairKey> pairs;
    for (const JoinedPair& p : out) pairs.emplace_back(p.left->id(), p.right->id(), p.prob);
    std::sort(pairs.begin(), pairs.end());
    return pairs;
  }

  fs::path dir_;
  testing::Workload w_;
  JoinPlanPtr plan_;
};

TEST_F(JoinPartitionTest, SpillsAndRestoresOnARealFile) {
  JoinPartition part(plan_, plan_->memory_budget, store((dir_ / "e").string(), true),
                     store((dir_ / "p").string(), true));
  std::vector<Status> errors;
  EXPECT_EQ(run(part, errors), testing::referenceJoin(w_, 0.5, 1000));
  EXPECT_TRUE(errors.empty());
  EXPECT_GT(part.stats().spills, 1u);
  EXPECT_GT(part.stats().restored_pairs, 0u);
}

TEST_F(JoinPartitionTest, AFullDiskAtTheFirstSpillKeepsTheJoinInMemory) {
  JoinPartition part(plan_, plan_->memory_budget, store("/dev/full", false),
                     store("/dev/full", false));
  std::vector<Status> errors;
  EXPECT_EQ(run(part, errors), testing::referenceJoin(w_, 0.5, 1000));
  ASSERT_EQ(errors.size(), 1u);  // reported once
  EXPECT_EQ(errors[0].code(), Status::Code::kIoError);
  EXPECT_THAT(errors[0].message(), HasSubstr("No space left on device"));
  EXPECT_THAT(errors[0].message(), HasSubstr("the join goes on in memory"));
  EXPECT_TRUE(part.stats().spill_disabled);
  EXPECT_EQ(part.stats().spills, 0u);
  EXPECT_GT(part.stats().memory_bytes, plan_->memory_budget);
}

TEST_F(JoinPartitionTest, AFullDiskAfterSpillingBringsTheSpilledTuplesBack) {
  // The entries were written; the log of arrivals is what hits the full disk.
  JoinPartition part(plan_, plan_->memory_budget, store((dir_ / "e").string(), true),
                     store("/dev/full", false));
  std::vector<Status> errors;
  EXPECT_EQ(run(part, errors), testing::referenceJoin(w_, 0.5, 1000));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message(), HasSubstr("No space left on device"));
  EXPECT_GE(part.stats().spills, 1u);
  EXPECT_EQ(part.stats().restores, 1u);
  EXPECT_GT(part.stats().restored_pairs, 0u);
  EXPECT_TRUE(part.stats().spill_disabled);
  EXPECT_EQ(part.stats().spilled, 0u);
}

TEST_F(JoinPartitionTest, AnEventTheCodecCannotWriteStopsSpillingWithoutLoss) {
  // Invalid UTF-8 in an attribute: the JSON codec refuses to write it.
  for (EventPtr& e : w_.events) {
    if (e->ts() % 7 != 0) continue;
    EventBuilder b(e->type());
    b.at(e->ts()).probability(e->probability()).id(e->id());
    for (const Attribute& a : e->attributes()) b.set(a.name, a.value);
    b.set("note", Value(std::string("\xff\xfe")));
    e = b.build();
  }
  JoinPartition part(plan_, plan_->memory_budget, store((dir_ / "e").string(), true),
                     store((dir_ / "p").string(), true));
  std::vector<Status> errors;
  EXPECT_EQ(run(part, errors), testing::referenceJoin(w_, 0.5, 1000));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0].message(), HasSubstr("cannot spill an event"));
  EXPECT_TRUE(part.stats().spill_disabled);
}

}  // namespace
}  // namespace cepbus::plugins::join
