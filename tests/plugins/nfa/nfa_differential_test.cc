// Thousands of random streams and patterns: per_event and batched
// construction must report exactly the matches of the brute-force reference
// matcher (reference_matcher.h), for every strategy, with predicates, Kleene
// elements, negation, windows and partitions. On uncertain streams, with a
// PROBABILITY bound, the engine must report the reference's matches whose
// product of probabilities reaches the bound, each composite carrying it.

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <sstream>

#include "bus/core/event_json.h"
#include "tests/plugins/nfa/nfa_test_support.h"
#include "tests/plugins/nfa/reference_matcher.h"

namespace cepbus::plugins::nfa::testing {
namespace {

struct GenVar {
  std::string name;
  bool kleene;
  bool negated;
  int element;  // positive element index, or the right neighbour of a negation
};

class Generator {
 public:
  explicit Generator(uint32_t seed) : rng_(seed) {}

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  std::string type() { return std::string(1, static_cast<char>('A' + uniform(0, 3))); }
  // Mostly the pattern's own types, so that streams produce matches.
  std::string eventType() {
    if (used_.empty() || chance(0.15)) return type();
    return used_[uniform(0, static_cast<int>(used_.size()) - 1)];
  }
  std::string patternType() {
    std::string t = type();
    used_.push_back(t);
    return t;
  }

  // `long_streams`: always a window, so that the reference stays fast on
  // streams of a hundred events.
  std::string query(bool& kleene_out, bool long_streams = false) {
    vars_.clear();
    used_.clear();
    const int m = uniform(1, 4);
    std::vector<std::string> items;
    bool kleene = false;
    for (int k = 0; k < m; ++k) {
      if (k > 0 && chance(0.25)) {
        const std::string name = "n" + std::to_string(k);
        items.push_back("NOT(" + patternType() + " " + name + ")");
        vars_.push_back({name, false, true, k});
      }
      const bool kl = chance(0.25);
      kleene |= kl;
      const std::string name = (kl ? "k" : "v") + std::to_string(k);
      items.push_back(patternType() + (kl ? "+ " + name + "[]" : " " + name));
      vars_.push_back({name, kl, false, k});
    }
    kleene_out = kleene;
    std::string text = "PATTERN SEQ(";
    for (size_t i = 0; i < items.size(); ++i) text += (i ? ", " : "") + items[i];
    text += ")";
    std::vector<std::string> conj;
    const int nconj = uniform(0, 4) / 2;
    for (int i = 0; i < nconj; ++i) conj.push_back(conjunct());
    for (size_t i = 0; i < conj.size(); ++i) text += (i ? " AND " : " WHERE ") + conj[i];
    const int w = uniform(0, 4);
    if (long_streams) {
      text += " WITHIN " + std::to_string(uniform(2, kleene ? 5 : 9));
    } else if (w > 0 || kleene) {
      text += " WITHIN " + std::to_string(w == 0 ? 5 : 2 + 2 * w);
    }
    if (chance(0.3)) text += " PARTITION BY key";
    const int s = uniform(0, 2);
    text += s == 0 ? " STRATEGY skip_till_any_match"
                   : (s == 1 ? " STRATEGY skip-till-next-match" : " STRATEGY strict_contiguity");
    return text;
  }

  // `uncertain`: probabilities 1/4, 1/2, 3/4 or 1, whose products are exact
  // in binary, so that no bound falls between two roundings of a product.
  std::vector<EventPtr> events(int n, bool uncertain = false) {
    std::vector<EventPtr> out;
    Timestamp ts = uniform(0, 3);
    for (int i = 0; i < n; ++i) {
      ts += uniform(0, 4) == 0 ? 0 : uniform(1, 2);
      EventBuilder b(eventType());
      b.at(ts)
          .set("price", Value(static_cast<int64_t>(uniform(0, 4))))
          .set("sym", Value(chance(0.5) ? "x" : "y"));
      // The partition key as an attribute, as the event's key field, or absent.
      const int key = uniform(0, 5);
      if (key < 4) {
        b.set("key", Value(static_cast<int64_t>(key % 2)));
      } else if (key == 4) {
        b.key(Value(static_cast<int64_t>(uniform(0, 1))));
      }
      if (uncertain) b.probability(0.25 * uniform(1, 4));
      out.push_back(b.build());
    }
    return out;
  }

 private:
  // A reference to an attribute of variable v usable outside iteration.
  std::string plainRef(const GenVar& v, const std::string& attr) {
    if (!v.kleene) return v.name + "." + attr;
    return v.name + (chance(0.5) ? "[1]." : "[last].") + attr;
  }

  std::string conjunct() {
    const GenVar& a = vars_[uniform(0, static_cast<int>(vars_.size()) - 1)];
    const GenVar& b = vars_[uniform(0, static_cast<int>(vars_.size()) - 1)];
    const std::string r = std::to_string(uniform(0, 4));
    const int kind = uniform(0, 6);
    const char* cmp[] = {"=", "<", "<=", ">", ">=", "!="};
    const std::string op = cmp[uniform(0, 5)];
    if (a.kleene && !a.negated) {
      switch (kind) {
        case 0:
          return a.name + "[i].price " + op + " " + a.name + "[i-1].price";
        case 1:
          return a.name + "[i].price " + op + " " + r;
        case 2:
          return "count(" + a.name + "[]) <= " + std::to_string(uniform(1, 3));
        case 3:
          return "sum(" + a.name + "[].price) " + op + " " + std::to_string(uniform(0, 8));
        case 4:
          if (&a != &b && !b.negated)
            return a.name + "[i].price " + op + " " + plainRef(b, "price");
          return "avg(" + a.name + "[].price) " + op + " " + r;
        case 5:
          return a.name + "[i].sym = 'x'";
        default:
          break;
      }
    }
    switch (kind) {
      case 0:
      case 1:
        return plainRef(a, "price") + " " + op + " " + r;
      case 2:
        return plainRef(a, "sym") + " = '" + (chance(0.5) ? "x" : "y") + "'";
      default:
        if (a.negated && b.negated && &a != &b) return plainRef(a, "price") + " > " + r;
        return plainRef(a, "price") + " " + op + " " + plainRef(b, "price");
    }
  }

  std::mt19937 rng_;
  std::vector<GenVar> vars_;
  std::vector<std::string> used_;
};

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
void checkOneCase(Generator& gen, bool long_streams, Stats& stats) {
  bool kleene = false;
  const std::string text = gen.query(kleene, long_streams);
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
    CollectingSink sink;
    Status s = runQuery(text, events, options, sink);
    ASSERT_TRUE(s.isOk()) << text << ": " << s.message();
    if (sink.sortedIds() != expected) {
      ++stats.failures;
      ADD_FAILURE() << "query: " << text << "\noptions: " << options.back() << "\nexpected "
                    << expected.size() << " matches, got " << sink.matches.size() << "\nevents:\n"
                    << describe(events);
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
    CollectingSink sink(true);
    Status s = runQuery(text, events, {construction}, sink);
    ASSERT_TRUE(s.isOk()) << text << ": " << s.message();
    for (const CollectedMatch& m : sink.matches) {
      double p = 1;
      for (EventId id : m.ids) p *= prob[id];
      EXPECT_EQ(m.composite->probability(), p) << text;
    }
    if (sink.sortedIds() != expected) {
      ++stats.failures;
      ADD_FAILURE() << "query: " << text << "\noptions: " << construction << "\nexpected "
                    << expected.size() << " matches, got " << sink.matches.size() << "\nevents:\n"
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
