// The join engine against a brute-force reference join: any number of
// workers, either expiry mode, either spill strategy (with spills and
// restores really happening) give the same set of pairs; plus the
// boundaries of the threshold, the time matrix and the window, composites,
// the query shapes and options it refuses, and bad readings; and the same
// pairs in the same order whether the events come one per call or in batches
// of any size (Detector::onEvents); and snapshots: a join stopped anywhere
// and restored into a new detector reports the rest of the uninterrupted
// run's pairs, in its order, and a corrupted snapshot is refused, never
// crashes.

#include "plugins/join/join_detector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <span>

#include "bus/core/pattern/parser.h"
#include "bus/host/loader/plugin_loader.h"
#include "bus/host/time/reorder.h"
#include "tests/plugins/join/join_test_support.h"
#include "tests/testing/snapshot_bytes.h"

namespace cepbus::plugins::join {
namespace {

namespace fs = std::filesystem;
using cepbus::testing::refusedCorruptions;
using cepbus::testing::restoreBytes;
using cepbus::testing::snapshotBytes;
using ::testing::HasSubstr;
using testing::joinedPairs;
using testing::MatchRecorder;
using testing::PairKey;
using testing::sortedPairs;
using testing::Workload;

class JoinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("cepbus-join-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

  Result<JoinPlanPtr> plan(const std::string& query, std::vector<std::string> options) {
    auto q = pattern::parseQuery(query);
    if (!q) return q.status();
    auto o = plugin::DetectorOptions::parse(options);
    if (!o) return o.status();
    return compileJoin(*q, *o);
  }

  // Runs the self-join of readings on plate over `w` and returns the
  // detector's stats; the pairs go to `sink`. The events go `chunk` at a
  // time to onEvents(), or (0) one at a time to onEvent().
  JoinDetector::Stats run(const Workload& w, std::vector<std::string> options, MatchRecorder& sink,
                          size_t chunk = 0) {
    options.push_back("time_matrix=" + write("matrix.csv", w.matrixCsv()));
    options.push_back("site=site");
    auto p = plan("PATTERN AND(Reading a, Reading b) WHERE a.plate = b.plate", options);
    EXPECT_TRUE(p) << p.status().message();
    if (!p) return {};
    auto d = JoinDetector::create(*p, sink);
    EXPECT_TRUE(d) << d.status().message();
    if (!d) return {};
    const std::span<const EventPtr> events(w.events);
    for (size_t i = 0; i < events.size();) {
      const size_t n = chunk == 0 ? 1 : std::min(chunk, events.size() - i);
      Status s = chunk == 0 ? (*d)->onEvent(events[i]) : (*d)->onEvents(events.subspan(i, n));
      EXPECT_TRUE(s) << s.message();
      i += n;
    }
    Status s = (*d)->flush();
    EXPECT_TRUE(s) << s.message();
    return (*d)->stats();
  }

  // A detector of the self-join over `w` with `options` reporting to `sink`.
  std::unique_ptr<JoinDetector> make(const Workload& w, std::vector<std::string> options,
                                     plugin::MatchSink& sink) {
    options.push_back("time_matrix=" + write("matrix.csv", w.matrixCsv()));
    options.push_back("site=site");
    auto p = plan("PATTERN AND(Reading a, Reading b) WHERE a.plate = b.plate", options);
    EXPECT_TRUE(p) << p.status().message();
    if (!p) return nullptr;
    auto d = JoinDetector::create(*p, sink);
    EXPECT_TRUE(d) << d.status().message();
    return d ? std::move(d).value() : nullptr;
  }

  fs::path dir_;
  static inline int counter_ = 0;
};

uint64_t sum(const JoinDetector::Stats& s, uint64_t PartitionStats::*field) {
  uint64_t n = 0;
  for (const PartitionStats& p : s.partitions) n += p.*field;
  return n;
}

TEST_F(JoinTest, WorkersAndExpiryModesMatchTheReference) {
  std::mt19937_64 rng(7);
  const Workload w = testing::randomWorkload(rng, 2000, 5, 40, 40);
  for (double threshold : {0.0, 0.5}) {
    const auto expected = testing::referenceJoin(w, threshold, 40);
    ASSERT_GT(expected.size(), 100u);
    for (int workers = 1; workers <= 4; ++workers) {
      for (const char* expiry : {"on_insert", "batch"}) {
        std::vector<std::string> o = {"threshold=" + std::to_string(threshold),
                                      "workers=" + std::to_string(workers),
                                      std::string("expiry=") + expiry, "index_slots=64"};
        if (std::string(expiry) == "batch") o.push_back("deletion_interval=17");
        MatchRecorder sink;
        const auto stats = run(w, o, sink);
        EXPECT_EQ(sortedPairs(sink), expected)
            << "threshold " << threshold << ", " << workers << " workers, expiry " << expiry;
        EXPECT_EQ(stats.pairs, expected.size());
      }
    }
  }
}

TEST_F(JoinTest, OutputOrderDoesNotDependOnTheNumberOfWorkers) {
  std::mt19937_64 rng(11);
  const Workload w = testing::randomWorkload(rng, 3000, 4, 50, 30);
  MatchRecorder one, three;
  run(w, {"workers=1"}, one);
  run(w, {"workers=3"}, three);
  ASSERT_FALSE(joinedPairs(one).empty());
  EXPECT_EQ(joinedPairs(one), joinedPairs(three));
}

TEST_F(JoinTest, SmallHandOffBatchesGiveTheSamePairsInTheSameOrder) {
  std::mt19937_64 rng(17);
  const Workload w = testing::randomWorkload(rng, 1500, 4, 40, 30);
  MatchRecorder big, small;
  run(w, {"workers=2"}, big);
  run(w, {"workers=2", "batch=1"}, small);
  ASSERT_FALSE(joinedPairs(big).empty());
  EXPECT_EQ(joinedPairs(small), joinedPairs(big));
  EXPECT_EQ(sortedPairs(small), testing::referenceJoin(w, 0, 30));
}

TEST_F(JoinTest, ProbesStopEarlyInDescendingProbabilityLists) {
  std::mt19937_64 rng(3);
  const Workload w = testing::randomWorkload(rng, 2000, 4, 5, 30);
  MatchRecorder sink;
  const auto stats = run(w, {"threshold=0.6"}, sink);
  EXPECT_EQ(sortedPairs(sink), testing::referenceJoin(w, 0.6, 30));
  EXPECT_GT(sum(stats, &PartitionStats::probes_stopped_early), 100u);
  EXPECT_GT(stats.below_threshold, 0u);
}

TEST_F(JoinTest, SpillStrategiesLoseNothing) {
  std::mt19937_64 rng(5);
  const Workload w = testing::randomWorkload(rng, 3000, 5, 60, 60);
  const auto expected = testing::referenceJoin(w, 0.4, 60);
  ASSERT_GT(expected.size(), 100u);
  // One event per call, and batches of every size (Detector::onEvents).
  for (size_t chunk : {0, 1, 7, 1024}) {
    for (const char* strategy : {"window_half", "less_than_probability"}) {
      for (int workers : {1, 3}) {
        for (const char* expiry : {"on_insert", "batch"}) {
          MatchRecorder sink;
          const auto stats =
              run(w,
                  {"threshold=0.4", "workers=" + std::to_string(workers),
                   std::string("expiry=") + expiry, std::string("spill=") + strategy,
                   "memory_budget=8000", "spill_dir=" + dir_.string(), "index_slots=32"},
                  sink, chunk);
          const std::string what = std::string(strategy) + ", " + std::to_string(workers) +
                                   " workers, expiry " + expiry + ", chunk " +
                                   std::to_string(chunk);
          EXPECT_EQ(sortedPairs(sink), expected) << what;
          EXPECT_GT(sum(stats, &PartitionStats::spills), 0u) << what;
          EXPECT_GT(sum(stats, &PartitionStats::restores), 0u) << what;
          EXPECT_GT(sum(stats, &PartitionStats::restored_pairs), 0u) << what;
          for (const PartitionStats& p : stats.partitions) EXPECT_EQ(p.spilled, 0u) << what;
        }
      }
    }
  }
  // The detectors removed their spill directories.
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename(), "matrix.csv");
  }
}

TEST_F(JoinTest, AFailingSpillFileIsReportedOnceAndLosesNothing) {
  std::mt19937_64 rng(9);
  const Workload w = testing::randomWorkload(rng, 3000, 5, 60, 60);
  const std::string matrix = write("matrix.csv", w.matrixCsv());
  auto p = plan("PATTERN AND(Reading a, Reading b) WHERE a.plate = b.plate",
                {"time_matrix=" + matrix, "site=site", "threshold=0.4", "workers=2",
                 "spill=window_half", "memory_budget=8000", "spill_dir=" + dir_.string()});
  ASSERT_TRUE(p) << p.status().message();
  MatchRecorder sink;
  auto d = JoinDetector::create(*p, sink);
  ASSERT_TRUE(d);
  // Files may not grow past 2 KB from here on: the spill files fill up
  // (EFBIG, as a full disk gives ENOSPC) after a few spills.
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  rlimit small = old;
  small.rlim_cur = 2000;
  const auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::vector<Status> errors;
  for (const EventPtr& e : w.events) {
    if (Status s = (*d)->onEvent(e); !s) errors.push_back(s);
  }
  if (Status s = (*d)->flush(); !s) errors.push_back(s);
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(sortedPairs(sink), testing::referenceJoin(w, 0.4, 60));
  ASSERT_FALSE(errors.empty());
  EXPECT_LE(errors.size(), 2u);  // at most once per worker
  for (const Status& s : errors) {
    EXPECT_EQ(s.code(), Status::Code::kIoError);
    EXPECT_THAT(s.message(), HasSubstr("the join goes on in memory"));
  }
  const auto stats = (*d)->stats();
  EXPECT_GT(sum(stats, &PartitionStats::spills), 0u);
  for (const PartitionStats& ps : stats.partitions) EXPECT_EQ(ps.spilled, 0u);
}

TEST_F(JoinTest, SpillingReportsTheLikelyPairsFirst) {
  // One plate at two sites, probabilities 0.9, 0.9, 0.6, 0.6, ...: both
  // strategies (Probability 0.8) send the 0.6 readings to disk, so the pairs
  // found in memory are more probable than those a restore finds later.
  Workload w;
  w.sites = 2;
  w.time = {{0, 1000}, {1000, 0}};
  for (int i = 0; i < 400; ++i) {
    w.events.push_back(EventBuilder("Reading")
                           .at(i)
                           .set("plate", Value("X"))
                           .set("site", Value(static_cast<int64_t>(i % 2)))
                           .probability(i % 4 < 2 ? 0.9 : 0.6)
                           .build());
  }
  for (const char* strategy : {"window_half", "less_than_probability"}) {
    MatchRecorder sink;
    const auto stats = run(w,
                           {std::string("spill=") + strategy, "memory_budget=80000",
                            "spill_probability=0.8", "spill_m=5", "spill_dir=" + dir_.string()},
                           sink);
    EXPECT_EQ(sortedPairs(sink), testing::referenceJoin(w, 0, 1000)) << strategy;
    const size_t restored = sum(stats, &PartitionStats::restored_pairs);
    ASSERT_GT(restored, 0u) << strategy;
    const std::vector<PairKey> pairs = joinedPairs(sink);
    ASSERT_LT(restored, pairs.size()) << strategy;
    // Nothing is stale within the window and nothing fits back: the only
    // restore is flush's, whose pairs come last.
    double early = 0, late = 0;
    const size_t n_early = pairs.size() - restored;
    for (size_t i = 0; i < pairs.size(); ++i) {
      (i < n_early ? early : late) += std::get<2>(pairs[i]);
    }
    EXPECT_GT(early / n_early, late / restored + 0.05) << strategy;
  }
}

TEST_F(JoinTest, OneWorkerReportsAtOnceAndReleasesStaleEvents) {
  // One worker runs on the caller's thread: with batch=1 a pair is reported
  // by the onEvent() completing it, and an event leaves the window (the
  // detector drops its reference) once a later reading makes it stale.
  const std::string matrix = write("matrix.csv", "0,10\n10,0\n");
  auto p = plan("PATTERN AND(Reading a, Reading b) WHERE a.plate = b.plate",
                {"time_matrix=" + matrix, "site=site", "batch=1"});
  ASSERT_TRUE(p) << p.status().message();
  MatchRecorder sink;
  auto d = JoinDetector::create(*p, sink);
  ASSERT_TRUE(d);
  auto reading = [](Timestamp ts, const char* plate, int64_t site) {
    return EventBuilder("Reading")
        .at(ts)
        .set("plate", Value(plate))
        .set("site", Value(site))
        .probability(0.9)
        .build();
  };
  const EventPtr first = reading(0, "X", 0);
  ASSERT_TRUE((*d)->onEvent(first));
  EXPECT_GT(first.use_count(), 1);  // windowed
  const EventPtr second = reading(5, "X", 1);
  ASSERT_TRUE((*d)->onEvent(second));
  ASSERT_EQ(joinedPairs(sink).size(), 1u);  // before any flush
  EXPECT_EQ(std::get<0>(joinedPairs(sink)[0]), first->id());
  EXPECT_EQ(std::get<1>(joinedPairs(sink)[0]), second->id());
  ASSERT_TRUE((*d)->onEvent(reading(9, "Y", 0)));
  EXPECT_GT(first.use_count(), 1);  // 9 - 0 < window 10: still windowed
  ASSERT_TRUE((*d)->onEvent(reading(10, "Y", 1)));
  EXPECT_EQ(first.use_count(), 1);  // stale: released, though plate X never came back
  EXPECT_GT(second.use_count(), 1);
  ASSERT_TRUE((*d)->flush());
  EXPECT_EQ(joinedPairs(sink).size(), 2u);  // the two Y readings, 1 apart
}

TEST_F(JoinTest, ThresholdIsInclusiveAndTravelTimeStrict) {
  Workload w;
  w.sites = 3;
  w.time = {{0, 10, 20}, {10, 0, 5}, {20, 5, 0}};
  auto r = [](Timestamp ts, int64_t site, double p, const char* plate = "A") {
    return EventBuilder("Reading")
        .at(ts)
        .set("plate", Value(plate))
        .set("site", Value(site))
        .probability(p)
        .build();
  };
  w.events = {r(0, 0, 0.5),  r(9, 1, 0.5),       r(10, 1, 0.5),     r(19, 2, 0.5),
              r(20, 2, 0.5), r(21, 0, 0.5, "B"), r(21, 0, 0.5, "B")};
  // 0.5 * 0.5 = 0.25 exactly: a product equal to the threshold passes.
  MatchRecorder at;
  run(w, {"threshold=0.25"}, at);
  std::vector<std::pair<Timestamp, Timestamp>> got;
  for (const auto& [l, rr, p] : joinedPairs(at)) {
    Timestamp lt = 0, rt = 0;
    for (const EventPtr& e : w.events) {
      if (e->id() == l) lt = e->ts();
      if (e->id() == rr) rt = e->ts();
    }
    got.emplace_back(lt, rt);
    EXPECT_EQ(p, 0.25);
  }
  // 0@site0-9@site1: 9 < 10 joins; 0-10: 10 is not < 10; 0-19@site2: 19 < 20;
  // 0-20: no; 9@1-10@1: same site, bound 0; 10@1-19@2: 9 >= 5 no; 19-20 same
  // site; B at one site twice: no.
  EXPECT_EQ(got, (std::vector<std::pair<Timestamp, Timestamp>>{{0, 9}, {0, 19}}));
  MatchRecorder above;
  run(w, {"threshold=0.2500001"}, above);
  EXPECT_TRUE(joinedPairs(above).empty());
  // The window caps the bound: window=15 keeps 0-9 and drops 0-19.
  MatchRecorder windowed;
  run(w, {"window=15"}, windowed);
  EXPECT_EQ(joinedPairs(windowed).size(), 1u);
}

TEST_F(JoinTest, CompositeCarriesReturnDtAndProbability) {
  const std::string m = write("m.csv", "site,N,S\nN,0,30\nS,30,0\n");
  auto p = plan(
      "PATTERN AND(Reading a, Reading b) WHERE a.plate = b.plate "
      "RETURN ClonedPlate(a.plate, a.site, b.site, a.ts, b.ts)",
      {"time_matrix=" + m, "site=site", "threshold=0.7"});
  ASSERT_TRUE(p) << p.status().message();
  MatchRecorder sink(/*compose=*/true);
  auto d = JoinDetector::create(*p, sink);
  ASSERT_TRUE(d);
  auto r = [](Timestamp ts, const char* site, const char* plate, double prob) {
    return EventBuilder("Reading")
        .at(ts)
        .set("plate", Value(plate))
        .set("site", Value(site))
        .probability(prob)
        .build();
  };
  // P4's example: 12345 at A (0.9) and at C (0.8) six minutes apart.
  for (const EventPtr& e : {r(1, "N", "12345", 0.9), r(1, "N", "72345", 0.1),
                            r(7, "S", "12345", 0.8), r(7, "S", "72345", 0.2)}) {
    ASSERT_TRUE((*d)->onEvent(e));
  }
  ASSERT_TRUE((*d)->flush());
  ASSERT_EQ(sink.composites().size(), 1u);
  const Event& c = *sink.composites()[0];
  EXPECT_EQ(c.type().name(), "ClonedPlate");
  EXPECT_EQ(c.find(Symbol::intern("a_plate"))->asString(), "12345");
  EXPECT_EQ(c.find(Symbol::intern("a_site"))->asString(), "N");
  EXPECT_EQ(c.find(Symbol::intern("b_site"))->asString(), "S");
  EXPECT_EQ(c.find(Symbol::intern("b_ts"))->asInt(), 7);
  EXPECT_EQ(c.find(Symbol::intern("dt"))->asInt(), 6);
  EXPECT_DOUBLE_EQ(c.find(Symbol::intern("prob"))->asDouble(), 0.72);
  EXPECT_DOUBLE_EQ(c.probability(), 0.72);
  EXPECT_EQ(c.constituents().size(), 2u);
}

TEST_F(JoinTest, DistinctTypesJoinAcrossStreamsOnly) {
  auto p = plan("PATTERN AND(Entry a, Exit b, Toll c) WHERE a.car = b.plate AND b.plate = c.id",
                {"window=10"});
  ASSERT_TRUE(p) << p.status().message();
  MatchRecorder sink(/*compose=*/true);
  auto d = JoinDetector::create(*p, sink);
  ASSERT_TRUE(d);
  auto e = [](const char* type, const char* attr, Timestamp ts) {
    return EventBuilder(type).at(ts).set(attr, Value("K")).build();
  };
  for (const EventPtr& ev : {e("Entry", "car", 0), e("Entry", "car", 1), e("Exit", "plate", 2),
                             e("Other", "car", 3), e("Toll", "id", 12), e("Toll", "id", 13)}) {
    ASSERT_TRUE((*d)->onEvent(ev));
  }
  ASSERT_TRUE((*d)->flush());
  // Entry-Entry and Toll-Toll never join; Other is no stream; Exit@2 and
  // Toll@12 are 10 apart, not below the window. Left: Entry@0 and Entry@1
  // with Exit@2, in list order (equal probabilities: arrival order).
  ASSERT_EQ(sink.composites().size(), 2u);
  EXPECT_EQ(sink.composites()[0]->type().name(), "Match");
  EXPECT_EQ(sink.composites()[0]->find(Symbol::intern("key"))->asString(), "K");
  EXPECT_EQ(sink.composites()[1]->find(Symbol::intern("dt"))->asInt(), 1);
}

TEST_F(JoinTest, RefusesQueriesItCannotRun) {
  const std::string m = write("m.csv", "0,5\n5,0\n");
  auto err = [&](const std::string& q, std::vector<std::string> o = {"window=5"}) {
    auto p = plan(q, o);
    EXPECT_FALSE(p) << q;
    return p ? std::string() : p.status().message();
  };
  EXPECT_THAT(err("PATTERN SEQ(R a, R b) WHERE a.k = b.k"), HasSubstr("AND("));
  EXPECT_THAT(err("PATTERN AND(R a, R b, R c) WHERE a.k = b.k AND b.k = c.k"),
              HasSubstr("self-join"));
  EXPECT_THAT(err("PATTERN AND(R a, R b)"), HasSubstr("WHERE"));
  EXPECT_THAT(err("PATTERN AND(R a, R b) WHERE a.k = b.k AND a.x > 3"),
              HasSubstr("key equalities"));
  EXPECT_THAT(err("PATTERN AND(R a, R b) WHERE a.k = b.j"), HasSubstr("same key attribute"));
  EXPECT_THAT(err("PATTERN AND(A a, B b, C c) WHERE a.k = b.k"), HasSubstr("not connected"));
  EXPECT_THAT(err("PATTERN AND(R a, R b) WHERE a.k = b.k", {}), HasSubstr("window"));
  EXPECT_THAT(err("PATTERN AND(R a, R b) WHERE a.k = b.k", {"window=5", "colour=red"}),
              HasSubstr("colour"));
  EXPECT_THAT(err("PATTERN AND(R a, R b) WHERE a.k = b.k", {"window=5", "spill=window_half"}),
              HasSubstr("memory_budget"));
  EXPECT_THAT(err("PATTERN AND(R a, R b) WHERE a.k = b.k", {"window=5", "threshold=1.5"}),
              HasSubstr("threshold"));
  EXPECT_THAT(err("PATTERN AND(R a, R b) WHERE a.k = b.k", {"window=5", "workers=0"}),
              HasSubstr("workers"));
  EXPECT_THAT(err("PATTERN AND(R a, R b) WHERE a.k = b.k", {"time_matrix=" + m}),
              HasSubstr("site"));
  const std::string bad = write("bad.csv", "0,5\n6,0\n");
  EXPECT_THAT(err("PATTERN AND(R a, R b) WHERE a.k = b.k", {"time_matrix=" + bad, "site=s"}),
              HasSubstr("bad.csv:2:1: not symmetric"));
}

TEST_F(JoinTest, RefusesReadingsWithoutKeyOrKnownSite) {
  const std::string m = write("m.csv", "site,N,S\nN,0,30\nS,30,0\n");
  auto p = plan("PATTERN AND(Reading a, Reading b) WHERE a.plate = b.plate",
                {"time_matrix=" + m, "site=site"});
  ASSERT_TRUE(p);
  MatchRecorder sink;
  auto d = JoinDetector::create(*p, sink);
  ASSERT_TRUE(d);
  Status s = (*d)->onEvent(EventBuilder("Reading").at(1).set("site", Value("N")).build());
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no key attribute 'plate'"));
  s = (*d)->onEvent(EventBuilder("Reading").at(2).set("plate", Value("X")).build());
  EXPECT_THAT(s.message(), HasSubstr("no site attribute 'site'"));
  s = (*d)->onEvent(
      EventBuilder("Reading").at(3).set("plate", Value("X")).set("site", Value("W")).build());
  EXPECT_THAT(s.message(), HasSubstr("site \"W\" is not in the time matrix"));
  s = (*d)->onEvent(
      EventBuilder("Reading").at(4).set("plate", Value(1.5)).set("site", Value("N")).build());
  EXPECT_THAT(s.message(), HasSubstr("expected a string or an integer"));
  EXPECT_TRUE((*d)->onEvent(EventBuilder("Other").at(5).build()));  // not a stream: ignored
  s = (*d)->onEvent(
      EventBuilder("Reading").at(1).set("plate", Value("X")).set("site", Value("N")).build());
  EXPECT_THAT(s.message(), HasSubstr("ts order"));
  // Refused readings leave the join running.
  ASSERT_TRUE((*d)->onEvent(
      EventBuilder("Reading").at(6).set("plate", Value("X")).set("site", Value("N")).build()));
  ASSERT_TRUE((*d)->onEvent(
      EventBuilder("Reading").at(7).set("plate", Value("X")).set("site", Value("S")).build()));
  ASSERT_TRUE((*d)->flush());
  EXPECT_EQ(joinedPairs(sink).size(), 1u);
}

// Detector::onEvents: the batch sizes the tests feed.
constexpr size_t kChunkSizes[] = {1, 7, 1024};

TEST_F(JoinTest, AnyBatchSizeGivesThePairsOfOneEventPerCall) {
  std::mt19937_64 rng(23);
  const Workload w = testing::randomWorkload(rng, 2500, 5, 40, 40);
  const auto expected = testing::referenceJoin(w, 0.5, 40);
  ASSERT_GT(expected.size(), 100u);
  for (int workers = 1; workers <= 4; ++workers) {
    for (const char* expiry : {"on_insert", "batch"}) {
      std::vector<std::string> o = {"threshold=0.5", "workers=" + std::to_string(workers),
                                    std::string("expiry=") + expiry, "index_slots=64", "batch=100"};
      if (std::string(expiry) == "batch") o.push_back("deletion_interval=17");
      const std::string what = std::to_string(workers) + " workers, expiry " + expiry;
      MatchRecorder single;
      run(w, o, single);
      EXPECT_EQ(sortedPairs(single), expected) << what;
      for (size_t chunk : kChunkSizes) {
        MatchRecorder batched;
        run(w, o, batched, chunk);
        EXPECT_EQ(joinedPairs(batched), joinedPairs(single)) << what << ", batches of " << chunk;
      }
    }
  }
}

TEST_F(JoinTest, ARefusedReadingInsideABatchLeavesTheRestGoingThrough) {
  std::mt19937_64 rng(31);
  const Workload w = testing::randomWorkload(rng, 600, 3, 15, 20);
  Workload broken = w;
  // Without its plate, in the middle of the batch: refused, the others joined.
  const size_t bad = 300;
  broken.events.insert(
      broken.events.begin() + bad,
      EventBuilder("Reading").at(w.events[bad]->ts()).set("site", Value(int64_t{0})).build());
  for (int workers : {1, 2}) {
    auto p = plan("PATTERN AND(Reading a, Reading b) WHERE a.plate = b.plate",
                  {"time_matrix=" + write("matrix.csv", w.matrixCsv()), "site=site",
                   "threshold=0.5", "workers=" + std::to_string(workers)});
    ASSERT_TRUE(p);
    MatchRecorder sink;
    auto d = JoinDetector::create(*p, sink);
    ASSERT_TRUE(d);
    Status s = (*d)->onEvents(broken.events);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("no key attribute 'plate'"));
    ASSERT_TRUE((*d)->flush());
    EXPECT_EQ(sortedPairs(sink), testing::referenceJoin(w, 0.5, 20)) << workers << " workers";
  }
}

TEST_F(JoinTest, ASnapshotAnywhereResumesTheUninterruptedRunsPairsInOrder) {
  std::mt19937_64 rng(11);
  const Workload w = testing::randomWorkload(rng, 600, 4, 8, 30);
  const std::vector<std::vector<std::string>> configurations = {
      {"threshold=0.5", "batch=1"},
      {"threshold=0.3", "expiry=batch", "deletion_interval=7", "index_slots=16"},
      {"threshold=0.4", "workers=3", "batch=16", "index_slots=16"},
      {"threshold=0.5", "spill=less_than_probability", "memory_budget=1000000",
       "spill_dir=" + dir_.string(), "index_slots=16"},
      // Budgets that make one worker spill and restore again and again: the
      // spilled tuples and the probes logged meanwhile are in the snapshot.
      {"threshold=0.3", "spill=window_half", "memory_budget=3000", "spill_dir=" + dir_.string(),
       "index_slots=16", "batch=1"},
      {"threshold=0.3", "spill=less_than_probability", "memory_budget=2500", "spill_m=2",
       "spill_dir=" + dir_.string(), "index_slots=16"},
  };
  size_t spilled_at_split = 0;
  for (const auto& options : configurations) {
    MatchRecorder whole_sink;
    auto whole = make(w, options, whole_sink);
    ASSERT_TRUE(whole);
    for (const EventPtr& e : w.events) ASSERT_TRUE(whole->onEvent(e));
    ASSERT_TRUE(whole->flush());
    const std::vector<PairKey> expected = joinedPairs(whole_sink);
    ASSERT_GT(expected.size(), 50u);
    const bool one_worker = std::none_of(options.begin(), options.end(), [](const std::string& o) {
      return o.starts_with("workers=");
    });
    for (size_t split : {size_t{0}, size_t{1}, size_t{37}, size_t{120}, size_t{250}, size_t{333},
                         size_t{599}, size_t{600}}) {
      MatchRecorder before, after;
      auto first = make(w, options, before);
      ASSERT_TRUE(first);
      const std::span<const EventPtr> events(w.events);
      ASSERT_TRUE(first->onEvents(events.first(split)));
      // One worker runs on this thread: its partition may be read between calls.
      if (one_worker && first->stats().partitions[0].spilled > 0) ++spilled_at_split;
      auto bytes = snapshotBytes(*first, "join");
      ASSERT_TRUE(bytes) << bytes.status().message();
      first.reset();  // nothing more is reported by it
      auto second = make(w, options, after);
      ASSERT_TRUE(second);
      Status restored = restoreBytes(*second, *bytes);
      ASSERT_TRUE(restored) << restored.message();
      ASSERT_TRUE(second->onEvents(events.subspan(split)));
      ASSERT_TRUE(second->flush());
      std::vector<PairKey> got = joinedPairs(before);
      for (const PairKey& k : joinedPairs(after)) got.push_back(k);
      EXPECT_EQ(got, expected) << ::testing::PrintToString(options) << " split at " << split;
      EXPECT_EQ(second->stats().pairs, whole->stats().pairs);
      if (split == 250) {
        std::printf("{\"test\":\"join_snapshot\",\"options\":\"%s\",\"bytes\":%zu}\n",
                    options.front().c_str(), bytes->size());
      }
    }
  }
  EXPECT_GE(spilled_at_split, 4u) << "the small budgets must spill at some splits";
}

TEST_F(JoinTest, ACorruptedSnapshotBodyIsRefusedOrHarmlessNeverACrash) {
  std::mt19937_64 rng(3);
  const Workload w = testing::randomWorkload(rng, 120, 3, 6, 30);
  const std::vector<std::string> options = {"threshold=0.3", "workers=2", "batch=8",
                                            "index_slots=8"};
  MatchRecorder sink;
  auto d = make(w, options, sink);
  ASSERT_TRUE(d);
  const std::span<const EventPtr> events(w.events);
  ASSERT_TRUE(d->onEvents(events.first(70)));
  auto bytes = snapshotBytes(*d, "join");
  ASSERT_TRUE(bytes) << bytes.status().message();
  // Every byte after the magic and format version, changed, with the
  // checksum made right again: what the body says is checked, not trusted.
  const size_t refused = refusedCorruptions(*bytes, 0x01, [&](const std::string& bad) {
    MatchRecorder out;
    auto fresh = make(w, options, out);
    if (!fresh || !restoreBytes(*fresh, bad)) return false;
    // Accepted: it still runs (other values, not other shapes).
    (void)fresh->onEvents(events.subspan(70));
    (void)fresh->flush();
    return true;
  });
  EXPECT_GT(refused, 0u);
}

TEST_F(JoinTest, LoadsThroughThePluginAbi) {
  plugin::PluginLoader loader({std::string(CEPBUS_TEST_BUILD_DIR) + "/plugins"});
  auto plugin = loader.load("join");
  ASSERT_TRUE(plugin) << plugin.status().message();
  EXPECT_EQ((*plugin)->engines(), std::vector<std::string>{"join"});
  std::mt19937_64 rng(13);
  const Workload w = testing::randomWorkload(rng, 500, 3, 20, 20);
  const std::string m = write("matrix.csv", w.matrixCsv());
  auto q = pattern::parseQuery("PATTERN AND(Reading a, Reading b) WHERE a.plate = b.plate");
  ASSERT_TRUE(q);
  auto o = plugin::DetectorOptions::parse(
      std::vector<std::string>{"time_matrix=" + m, "site=site", "workers=2", "threshold=0.5"});
  ASSERT_TRUE(o);
  MatchRecorder sink;
  auto d = (*plugin)->createDetector("join", *q, *o, sink);
  ASSERT_TRUE(d) << d.status().message();
  for (const EventPtr& e : w.events) ASSERT_TRUE((*d)->onEvent(e));
  ASSERT_TRUE((*d)->flush());
  const auto expected = testing::referenceJoin(w, 0.5, 20);
  EXPECT_EQ(sortedPairs(sink), expected);
  // In batches, through the host's GuardedDetector and its time handling.
  const std::span<const EventPtr> events(w.events);
  for (Timestamp slack : {0, 5}) {
    for (const char* workers : {"workers=1", "workers=2"}) {
      auto batch_options = plugin::DetectorOptions::parse(
          std::vector<std::string>{"time_matrix=" + m, "site=site", workers, "threshold=0.5"});
      ASSERT_TRUE(batch_options);
      for (size_t chunk : kChunkSizes) {
        MatchRecorder batched;
        auto b = (*plugin)->createDetector("join", *q, *batch_options, batched);
        ASSERT_TRUE(b) << b.status().message();
        plugin::ReorderingDetector ordered(std::move(b).value(), slack);
        for (size_t i = 0; i < events.size(); i += chunk) {
          ASSERT_TRUE(ordered.onEvents(events.subspan(i, std::min(chunk, events.size() - i))));
        }
        ASSERT_TRUE(ordered.flush());
        EXPECT_EQ(sortedPairs(batched), expected)
            << "slack " << slack << ", " << workers << ", chunk " << chunk;
      }
    }
  }
  auto bad = (*plugin)->createDetector("join", *q, plugin::DetectorOptions(), sink);
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.status().message(), HasSubstr("window"));
}

}  // namespace
}  // namespace cepbus::plugins::join
