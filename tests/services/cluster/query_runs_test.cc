#include "services/cluster/query_runs.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace cepbus::services::cluster {
namespace {

// Records what the runs report: the matches ("rise [1,2]"), as a set (an
// engine may report them as it goes or when flushed), and event time as it
// is released.
class RecordingListener final : public QueryRuns::Listener {
 public:
  void onMatch(const CompiledQuery& query, const plugin::Match& match) override {
    std::string ts;
    for (size_t i = 0; i < match.size(); ++i) {
      ts += (i == 0 ? "" : ",") + std::to_string(match.ts(i));
    }
    matches.insert(query.name + " [" + ts + "]");
  }
  void onReleased(Timestamp ts) override { released.push_back(ts); }
  void onDetectorError(const CompiledQuery& query, const Status& error) override {
    errors.push_back(query.name + ": " + error.message());
  }

  std::set<std::string> matches;
  std::vector<Timestamp> released;
  std::vector<std::string> errors;
};

class QueryRunsTest : public ::testing::Test {
 protected:
  QueryRunsTest() : loader_({std::string(CEPBUS_TEST_BUILD_DIR) + "/plugins"}) {
    spec_.key = {"symbol"};
    for (const char* name : {"rise", "fall"}) {
      descriptor::QuerySpec query;
      query.name = name;
      query.engine = "nfa";
      query.text = std::string("PATTERN SEQ(Stock a, Stock b) WHERE a.symbol = b.symbol AND ") +
                   (name == std::string("rise") ? "b.price > a.price" : "b.price < a.price") +
                   " WITHIN 10";
      spec_.queries.push_back(query);
    }
    auto compiled = compileClusterQueries(spec_, loader_);
    EXPECT_TRUE(compiled.isOk()) << compiled.status().message();
    if (compiled) queries_ = std::move(*compiled);
  }

  std::unique_ptr<QueryRuns> runs(Timestamp max_delay) {
    auto made = QueryRuns::create(queries_, PartitionTime{.max_delay = max_delay}, listener_);
    EXPECT_TRUE(made.isOk()) << made.status().message();
    return made ? std::move(*made) : nullptr;
  }
  static EventPtr stock(Timestamp ts, double price) {
    return EventBuilder("Stock")
        .at(ts)
        .set("symbol", Value("IBM"))
        .set("price", Value(price))
        .build();
  }

  services::cluster::ClusterSpec spec_;
  plugin::PluginLoader loader_;
  std::vector<CompiledQuery> queries_;
  RecordingListener listener_;
  const QueryRuns::Time t0_{};
};

using Matches = std::set<std::string>;
using Times = std::vector<Timestamp>;

TEST_F(QueryRunsTest, EveryQueryHearsTheEventsInTimeOrderOnceTheSlackLetsThemGo) {
  auto r = runs(2);
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(r->push(stock(3, 12), t0_).isOk());
  ASSERT_TRUE(r->push(stock(1, 10), t0_).isOk());  // 2 behind: within the max-delay
  r->release();
  EXPECT_EQ(listener_.released, Times{1});
  EXPECT_TRUE(listener_.matches.empty());
  ASSERT_TRUE(r->push(stock(5, 11), t0_).isOk());
  r->release();
  // Out before release() returns: what ts 3 made.
  EXPECT_EQ(listener_.released, (Times{1, 3}));
  EXPECT_EQ(listener_.matches, Matches{"rise [1,3]"});
  r->drain();
  EXPECT_EQ(listener_.released, (Times{1, 3, 5}));
  EXPECT_EQ(listener_.matches, (Matches{"rise [1,3]", "rise [1,5]", "fall [3,5]"}));
  EXPECT_TRUE(listener_.errors.empty());
}

TEST_F(QueryRunsTest, AnEventBeyondTheSlackIsRefusedAndReachesNoQuery) {
  auto r = runs(2);
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(r->push(stock(10, 10), t0_).isOk());
  EXPECT_FALSE(r->push(stock(7, 20), t0_).isOk());
  r->drain();
  EXPECT_EQ(listener_.released, Times{10});
  EXPECT_TRUE(listener_.matches.empty());
}

TEST_F(QueryRunsTest, ARestartForgetsTheLastStreamsOrderAndPartialMatches) {
  auto r = runs(0);
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(r->push(stock(5, 10), t0_).isOk());
  r->drain();
  r->restart();
  // Behind the last stream's time, yet in order for the new one.
  ASSERT_TRUE(r->push(stock(1, 1), t0_).isOk());
  // A fall from the last stream's 10 would be [5,6]: that stream is over.
  ASSERT_TRUE(r->push(stock(6, 5), t0_).isOk());
  r->release();
  EXPECT_EQ(listener_.released, (Times{5, 1, 6}));
  EXPECT_EQ(listener_.matches, Matches{"rise [1,6]"});
  EXPECT_TRUE(listener_.errors.empty());
}

}  // namespace
}  // namespace cepbus::services::cluster
