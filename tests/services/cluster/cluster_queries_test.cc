#include "services/cluster/cluster_queries.h"

#include <gtest/gtest.h>

#include <string>

namespace cepbus::services::cluster {
namespace {

class ClusterQueriesTest : public ::testing::Test {
 protected:
  ClusterQueriesTest() : loader_({std::string(CEPBUS_TEST_BUILD_DIR) + "/plugins"}) {
    spec_.name = "c";
    spec_.key = {"symbol"};
  }

  // A query named `name` at line `line` of "cluster.xml", its text on the
  // next line.
  descriptor::QuerySpec& add(std::string name, std::string text, int line,
                             std::string engine = "nfa") {
    descriptor::QuerySpec query;
    query.name = std::move(name);
    query.engine = std::move(engine);
    query.output = query.name + "-out";
    query.text = std::move(text);
    query.where = {"cluster.xml", line};
    query.text_where = {"cluster.xml", line + 1};
    spec_.queries.push_back(std::move(query));
    return spec_.queries.back();
  }

  services::cluster::ClusterSpec spec_;
  plugin::PluginLoader loader_;
};

constexpr char kRise[] =
    "PATTERN SEQ(Stock a, Stock b) WHERE a.symbol = b.symbol AND b.price > a.price WITHIN 10";

TEST_F(ClusterQueriesTest, CompilesEveryQueryWithItsEngineAndOutput) {
  add("rise", kRise, 3);
  add("slow", "PATTERN SEQ(Stock a, Stock b) WHERE a.symbol = b.symbol WITHIN 250", 6);
  auto queries = compileClusterQueries(spec_, loader_);
  ASSERT_TRUE(queries.isOk()) << queries.status().message();
  ASSERT_EQ(queries->size(), 2u);
  EXPECT_EQ((*queries)[0].name, "rise");
  EXPECT_EQ((*queries)[0].engine, "nfa");
  EXPECT_EQ((*queries)[0].output, "rise-out");
  ASSERT_NE((*queries)[0].recipe, nullptr);
  EXPECT_EQ((*queries)[0].recipe->engine(), "nfa");
  EXPECT_EQ(longestWindow(*queries), 250);
}

// A window query runs on the window engine; its length bounds how long a
// partition needs an event, as a pattern's WITHIN does.
TEST_F(ClusterQueriesTest, AWindowQueryRunsWithItsLengthAsTheWindow) {
  add("rise", kRise, 3);
  add("volume",
      "FROM Stock s WINDOW SLIDING 600 EVERY 100 GROUP BY s.symbol "
      "RETURN Volume(s.symbol AS symbol, count(s) AS n)",
      6, "auto");
  auto queries = compileClusterQueries(spec_, loader_);
  ASSERT_TRUE(queries.isOk()) << queries.status().message();
  ASSERT_EQ(queries->size(), 2u);
  EXPECT_EQ((*queries)[1].recipe->engine(), "window");
  EXPECT_EQ(longestWindow(*queries), 600);
}

TEST_F(ClusterQueriesTest, DurationsTakeTheQuerysTimeUnit) {
  add("rise", "PATTERN SEQ(Stock a, Stock b) WHERE a.symbol = b.symbol WITHIN 2 s", 3).ts_unit =
      pattern::TimeUnit::kMilliseconds;
  auto queries = compileClusterQueries(spec_, loader_);
  ASSERT_TRUE(queries.isOk()) << queries.status().message();
  EXPECT_EQ(longestWindow(*queries), 2000);

  spec_.queries.clear();
  add("rise", "PATTERN SEQ(Stock a, Stock b) WHERE a.symbol = b.symbol WITHIN 2 s", 3);
  queries = compileClusterQueries(spec_, loader_);
  ASSERT_FALSE(queries.isOk());
  EXPECT_TRUE(queries.status().message().starts_with(
      "cluster.xml:4: cluster query \"rise\": line 1, column 66: WITHIN 2 s: the input's ts has "
      "no declared time unit"))
      << queries.status().message();
}

TEST_F(ClusterQueriesTest, EngineAutoPicksAnEngineForEachQuery) {
  add("rise", kRise, 3, "auto");
  auto queries = compileClusterQueries(spec_, loader_);
  ASSERT_TRUE(queries.isOk()) << queries.status().message();
  ASSERT_EQ(queries->size(), 1u);
  const CompiledQuery& rise = (*queries)[0];
  EXPECT_NE(rise.engine, "auto");
  ASSERT_NE(rise.recipe, nullptr);
  EXPECT_EQ(rise.recipe->engine(), rise.engine);
  EXPECT_TRUE(rise.recipe->make().isOk());
}

TEST_F(ClusterQueriesTest, ListsEveryQueryThatCannotRunByItsLine) {
  add("broken", "PATTERN SEQ(Stock a", 3);
  add("unkeyed", "PATTERN SEQ(Stock a, Stock b) WITHIN 10", 6);
  add("slacked", kRise, 9).options.push_back({"slack", "5", {}});
  add("nowhere", kRise, 12, "no-such-engine");
  add("fine", kRise, 15);
  auto queries = compileClusterQueries(spec_, loader_);
  ASSERT_FALSE(queries.isOk());
  const std::string message = queries.status().message();
  EXPECT_NE(message.find("cluster.xml:4"), std::string::npos) << message;  // the text's line
  EXPECT_NE(message.find("cluster query \"broken\""), std::string::npos) << message;
  EXPECT_NE(message.find("cluster.xml:6"), std::string::npos) << message;
  EXPECT_NE(message.find("cluster key \"symbol\""), std::string::npos) << message;
  EXPECT_NE(message.find("cluster.xml:9"), std::string::npos) << message;
  EXPECT_NE(message.find("a query has no max_delay option or slack option"), std::string::npos)
      << message;
  EXPECT_NE(message.find("cluster.xml:12"), std::string::npos) << message;
  EXPECT_NE(message.find("unknown engine \"no-such-engine\""), std::string::npos) << message;
  EXPECT_EQ(message.find("cluster.xml:15"), std::string::npos) << message;
}

TEST_F(ClusterQueriesTest, AQueryItsEngineRefusesIsAStartUpError) {
  add("odd", kRise, 3).options.push_back({"no-such-option", "1", {}});
  auto queries = compileClusterQueries(spec_, loader_);
  ASSERT_FALSE(queries.isOk());
  const std::string message = queries.status().message();
  EXPECT_NE(message.find("cluster.xml:3"), std::string::npos) << message;
  EXPECT_NE(message.find("engine \"nfa\" cannot run the query"), std::string::npos) << message;
  EXPECT_NE(message.find("no-such-option"), std::string::npos) << message;
}

}  // namespace
}  // namespace cepbus::services::cluster
