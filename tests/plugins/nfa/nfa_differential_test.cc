// Thousands of random streams and patterns: per_event and batched
// construction must report exactly the matches of the brute-force reference
// matcher (reference_matcher.h), for every strategy, with predicates, Kleene
// elements, negation, windows and partitions. On uncertain streams, with a
// PROBABILITY bound, the engine must report the reference's matches whose
// product of probabilities reaches the bound, each composite carrying it.

#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "bus/core/event_json.h"
#include "tests/plugins/nfa/nfa_test_support.h"
#include "tests/plugins/nfa/random_queries.h"
#include "tests/plugins/nfa/reference_matcher.h"

namespace cepbus::plugins::nfa::testing {
namespace {

std::string describe(const std::vector<EventPtr>& events) {
  std::ostringstream out;
  for (const EventPtr& e : events) out << encodeEvent(*e) << '\n';
  return out.str();
}

struct Stats {
  int cases = 0;
  int with_matches = 0;
  int failures = 0;
  uint64_t matches = 0;
  uint64_t per_strategy[3] = {};
};

// One random query over one random stream: per_event, batched and batched
// with a short batch period must each report exactly the reference's matches.
// `edge_negations`: NOT may also start or end the pattern; then each run is
// made twice, deciding trailing negations on later events alone and with a
// watermark after each event.
void checkOneCase(Generator& gen, bool long_streams, Stats& stats, bool edge_negations = false) {
  bool kleene = false;
  const std::string text = gen.query(kleene, long_streams, edge_negations);
  auto q = pattern::parseQuery(text);
  ASSERT_TRUE(q.isOk()) << text << ": " << q.status().message();
  const auto events = long_streams ? gen.events(gen.uniform(60, 120))
                                   : gen.events(gen.uniform(4, kleene ? 12 : 20));
  ReferenceMatcher ref(*q);
  auto expected = ref.run(events);
  std::sort(expected.begin(), expected.end());
  ++stats.cases;
  stats.with_matches += expected.empty() ? 0 : 1;
  stats.per_strategy[static_cast<int>(q->strategy)] += expected.size();
  stats.matches += expected.size();
  const std::string period = std::to_string(gen.uniform(1, 4));
  for (const std::vector<std::string>& options :
       {std::vector<std::string>{"construction=per_event"},
        std::vector<std::string>{"construction=batched"},
        std::vector<std::string>{"construction=batched", "batch_period=" + period}}) {
    for (const bool watermarks : {false, true}) {
      if (watermarks && !edge_negations) break;
      MatchRecorder sink;
      Status s = runQuery(text, events, options, sink, watermarks);
      ASSERT_TRUE(s.isOk()) << text << ": " << s.message();
      if (sink.sortedIds() != expected) {
        ++stats.failures;
        ADD_FAILURE() << "query: " << text << "\noptions: " << options.back()
                      << (watermarks ? ", watermarks" : "") << "\nexpected " << expected.size()
                      << " matches, got " << sink.size() << "\nevents:\n"
                      << describe(events);
      }
    }
  }
}

// One random query with a random PROBABILITY bound over one uncertain
// stream: the reference's matches filtered by their probability.
void checkUncertainCase(Generator& gen, Stats& stats) {
  bool kleene = false;
  const double bounds[] = {0, 0.2, 0.3, 0.5, 0.75};
  const double bound = bounds[gen.uniform(0, 4)];
  const std::string text = gen.query(kleene) + " PROBABILITY >= " + std::to_string(bound);
  auto q = pattern::parseQuery(text);
  ASSERT_TRUE(q.isOk()) << text << ": " << q.status().message();
  const auto events = gen.events(gen.uniform(4, kleene ? 12 : 20), true);
  std::map<EventId, double> prob;
  for (const EventPtr& e : events) prob[e->id()] = e->probability();
  ReferenceMatcher ref(*q);
  std::vector<std::vector<EventId>> expected;
  for (auto& m : ref.run(events)) {
    double p = 1;
    for (EventId id : m) p *= prob[id];
    if (p >= bound) expected.push_back(std::move(m));
  }
  std::sort(expected.begin(), expected.end());
  ++stats.cases;
  stats.with_matches += expected.empty() ? 0 : 1;
  stats.matches += expected.size();
  for (const char* construction : {"construction=per_event", "construction=batched"}) {
    MatchRecorder sink(true);
    Status s = runQuery(text, events, {construction}, sink);
    ASSERT_TRUE(s.isOk()) << text << ": " << s.message();
    for (const RecordedMatch& m : sink.matches()) {
      double p = 1;
      for (EventId id : m.ids) p *= prob[id];
      EXPECT_EQ(m.composite->probability(), p) << text;
    }
    if (sink.sortedIds() != expected) {
      ++stats.failures;
      ADD_FAILURE() << "query: " << text << "\noptions: " << construction << "\nexpected "
                    << expected.size() << " matches, got " << sink.size() << "\nevents:\n"
                    << describe(events);
    }
  }
}

TEST(NfaDifferentialTest, UncertainStreamsAgreeWithFilteredReference) {
  ASSERT_NE(nfaPlugin(), nullptr);
  Generator gen(4242);
  Stats stats;
  for (int i = 0; i < 3000 && stats.failures < 3; ++i) checkUncertainCase(gen, stats);
  EXPECT_GT(stats.with_matches, stats.cases / 5);
  EXPECT_GT(stats.matches, 500u);
}

TEST(NfaDifferentialTest, RandomPatternsAgreeWithReferenceInBothConstructions) {
  ASSERT_NE(nfaPlugin(), nullptr);
  Generator gen(20240611);
  Stats stats;
  for (int i = 0; i < 5000 && stats.failures < 3; ++i) checkOneCase(gen, false, stats);
  // The generator must actually exercise matching, not only empty results.
  EXPECT_GT(stats.with_matches, stats.cases / 4);
  EXPECT_GT(stats.matches, 1000u);
  for (uint64_t n : stats.per_strategy) EXPECT_GT(n, 200u);
  RecordProperty("matches", std::to_string(stats.matches));
}

// NOT before the first or after the last positive element (leading and
// trailing negation), beside NOT in the middle, on every strategy.
TEST(NfaDifferentialTest, EdgeNegationsAgreeWithReference) {
  ASSERT_NE(nfaPlugin(), nullptr);
  Generator gen(20261206);
  Stats stats;
  for (int i = 0; i < 3000 && stats.failures < 3; ++i) checkOneCase(gen, false, stats, true);
  for (int i = 0; i < 200 && stats.failures < 3; ++i) checkOneCase(gen, true, stats, true);
  EXPECT_GT(stats.with_matches, stats.cases / 4);
  for (uint64_t n : stats.per_strategy) EXPECT_GT(n, 200u);
  RecordProperty("matches", std::to_string(stats.matches));
}

// Longer streams: stacks grow and expire, batches cross many boundaries,
// partitions are recycled.
TEST(NfaDifferentialTest, LongerStreamsAgreeWithReference) {
  ASSERT_NE(nfaPlugin(), nullptr);
  Generator gen(7);
  Stats stats;
  for (int i = 0; i < 400 && stats.failures < 3; ++i) checkOneCase(gen, true, stats);
  EXPECT_GT(stats.with_matches, stats.cases / 3);
  for (uint64_t n : stats.per_strategy) EXPECT_GT(n, 1000u);
  RecordProperty("matches", std::to_string(stats.matches));
}

}  // namespace
}  // namespace cepbus::plugins::nfa::testing
