// The detector against a reference evaluator written straight from P1's set
// definitions (unrestricted semantics) on small random streams and random
// expressions; the context property of the recent semantics w.r.t. it
// (Theorems 1, 2); equivalent expressions (Theorem 4); and the nfa engine
// where the two overlap.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "tests/plugins/algebra/algebra_test_support.h"

namespace cepbus::plugins::algebra::testing {
namespace {

using pattern::PatternKind;
using pattern::PatternNode;
using Binds = std::vector<std::pair<uint32_t, EventId>>;
using IV = std::vector<std::pair<Timestamp, Timestamp>>;

// ---------------------------------------------------------------------------
// Reference: every operator as a function on sets of instances (P1, def. 10).
// An instance is its constituents, each bound to a pattern element.

class Reference {
 public:
  explicit Reference(const std::vector<EventPtr>& events) : events_(events) {}

  std::vector<Out> evaluate(const pattern::Query& q) {
    element_ = 0;
    hidden_ = 1000;
    Set s = eval(*q.pattern, false);
    if (q.within) s = filter(s, [&](const Out& m) { return m.end - m.start <= *q.within; });
    std::sort(s.begin(), s.end());
    return s;
  }

 private:
  using Set = std::vector<Out>;

  static Out unite(const Out& m, const Out& n) {
    Out u;
    u.start = std::min(m.start, n.start);
    u.end = std::max(m.end, n.end);
    std::set_union(m.binds.begin(), m.binds.end(), n.binds.begin(), n.binds.end(),
                   std::back_inserter(u.binds));
    return u;
  }

  static Set dedup(Set s) {
    std::map<Binds, Out> by;
    for (Out& o : s) by.emplace(o.binds, std::move(o));
    Set out;
    for (auto& [b, o] : by) out.push_back(std::move(o));
    return out;
  }

  template <typename F>
  static Set filter(const Set& s, F keep) {
    Set out;
    for (const Out& m : s) {
      if (keep(m)) out.push_back(m);
    }
    return out;
  }

  template <typename F>
  static Set pairs(const Set& ms, const Set& ns, F cond) {
    Set out;
    for (const Out& m : ms) {
      for (const Out& n : ns) {
        if (cond(m, n)) out.push_back(unite(m, n));
      }
    }
    return dedup(std::move(out));
  }

  static Set iterate(const Set& ms) {
    Set all = dedup(ms);
    for (bool grew = true; grew;) {
      grew = false;
      std::map<Binds, Out> by;
      for (const Out& o : all) by.emplace(o.binds, o);
      for (const Out& r : Set(all)) {
        for (const Out& m : ms) {
          Out u = unite(r, m);
          if (by.emplace(u.binds, u).second) {
            all.push_back(std::move(u));
            grew = true;
          }
        }
      }
    }
    return all;
  }

  Set atom(const std::string& type, bool negated) {
    const uint32_t element = negated ? hidden_++ : element_++;
    Set s;
    for (const EventPtr& e : events_) {
      if (e->type() == Symbol::intern(type)) {
        Out o;
        o.start = o.end = e->ts();
        o.binds.emplace_back(element, e->id());
        s.push_back(std::move(o));
      }
    }
    return s;
  }

  Set combine(PatternKind kind, const Set& m, const Set& n) {
    switch (kind) {
      case PatternKind::kAnd:
        return pairs(m, n, [](const Out&, const Out&) { return true; });
      case PatternKind::kOr: {
        Set u = m;
        u.insert(u.end(), n.begin(), n.end());
        return dedup(std::move(u));
      }
      case PatternKind::kSeq:
        return pairs(m, n, [](const Out& a, const Out& b) { return a.end < b.start; });
      case PatternKind::kConcat:
        return pairs(m, n, [](const Out& a, const Out& b) {
          return a.end == b.start || (a.start < b.start && a.end > b.start) ||
                 (a.start < b.start && a.end == b.end) || (a.start == b.start && a.end < b.end) ||
                 (a.start < b.start && a.end > b.end);
        });
      case PatternKind::kConcurrent:
        return pairs(
            m, n, [](const Out& a, const Out& b) { return a.start == b.start && a.end == b.end; });
      case PatternKind::kNegation:
        return filter(m, [&](const Out& a) {
          return std::none_of(n.begin(), n.end(),
                              [&](const Out& b) { return a.start <= b.start && b.end <= a.end; });
        });
      default:
        ADD_FAILURE() << "reference: unexpected operator";
        return {};
    }
  }

  Set eval(const PatternNode& p, bool negated) {
    switch (p.kind) {
      case PatternKind::kEvent:
        return atom(p.type, negated);
      case PatternKind::kKleene:
        return iterate(atom(p.type, negated));
      case PatternKind::kSeq:
      case PatternKind::kAnd:
      case PatternKind::kOr:
      case PatternKind::kConcat:
      case PatternKind::kConcurrent: {
        Set acc = eval(*p.children[0], negated);
        for (size_t i = 1; i < p.children.size(); ++i) {
          acc = combine(p.kind, acc, eval(*p.children[i], negated));
        }
        return acc;
      }
      case PatternKind::kNegation: {
        Set m = eval(*p.children[0], negated);
        return combine(p.kind, m, eval(*p.children[1], true));
      }
      case PatternKind::kIteration:
        return iterate(eval(*p.children[0], negated));
      case PatternKind::kTimeRestriction:
        return filter(eval(*p.children[0], negated),
                      [&](const Out& m) { return m.end - m.start <= p.window; });
      default:
        ADD_FAILURE() << "reference: unsupported " << pattern::operatorName(p.kind);
        return {};
    }
  }

  const std::vector<EventPtr>& events_;
  uint32_t element_ = 0;
  uint32_t hidden_ = 1000;  // elements of negated operands never reach an output
};

std::vector<Out> reference(const std::string& query, const std::vector<EventPtr>& events) {
  auto q = pattern::parseQuery(query);
  EXPECT_TRUE(q.isOk()) << query << ": " << q.status().message();
  return q ? Reference(events).evaluate(*q) : std::vector<Out>{};
}

// ---------------------------------------------------------------------------
// Random streams and expressions.

// P1's atomic streams: no two events of one type share a timestamp.
// `uncertain`: probabilities 1/4 .. 1, whose products are exact in binary.
std::vector<EventPtr> randomStream(std::mt19937& rng, int n, int types, bool uncertain = false) {
  std::vector<EventPtr> out;
  Timestamp ts = 1;
  std::vector<int> at;  // types at the current ts
  for (int i = 0; i < n; ++i) {
    int type = static_cast<int>(rng() % static_cast<unsigned>(types));
    const unsigned step = rng() % 3;
    if (step > 0 || std::find(at.begin(), at.end(), type) != at.end()) {
      ts += step == 0 ? 1 : step;
      at.clear();
    }
    at.push_back(type);
    out.push_back(EventBuilder(std::string(1, static_cast<char>('A' + type)))
                      .at(ts)
                      .id(static_cast<EventId>(i + 1))
                      .set("x", Value(static_cast<int64_t>(rng() % 10)))
                      .probability(uncertain ? 0.25 * static_cast<double>(1 + rng() % 4) : 1.0)
                      .build());
  }
  return out;
}

class ExprGen {
 public:
  ExprGen(std::mt19937& rng, std::vector<std::string> binary, bool iteration)
      : rng_(rng), binary_(std::move(binary)), iteration_(iteration) {}

  std::string gen(int depth) {
    const unsigned pick = rng_() % 10;
    if (depth == 0 || pick < 2) return std::string(1, static_cast<char>('A' + rng_() % 3));
    if (pick == 2 && iteration_ && depth <= 2) {
      iteration_ = false;  // one iteration per expression keeps the reference small
      return "(" + gen(depth - 1) + ")*";
    }
    if (pick == 3) return "WITHIN(" + gen(depth - 1) + ", " + std::to_string(1 + rng_() % 5) + ")";
    const std::string& op = binary_[rng_() % binary_.size()];
    return "(" + gen(depth - 1) + " " + op + " " + gen(depth - 1) + ")";
  }

 private:
  std::mt19937& rng_;
  std::vector<std::string> binary_;
  bool iteration_;
};

// The top-level context of a set: per end, the latest start (Definition 12
// fixes the intervals uniquely, Theorem 2).
std::map<Timestamp, Timestamp> context(const std::vector<Out>& s) {
  std::map<Timestamp, Timestamp> best;
  for (const Out& o : s) {
    auto [it, fresh] = best.emplace(o.end, o.start);
    if (!fresh) it->second = std::max(it->second, o.start);
  }
  return best;
}

TEST(AlgebraReference, UnrestrictedEqualsTheDefinitions) {
  std::mt19937 rng(7);
  int nonempty = 0;
  for (int round = 0; round < 300; ++round) {
    ExprGen gen(rng, {";", "+", "|", "~", "||", "-"}, true);
    const std::string expr = "WITHIN(" + gen.gen(3) + ", 6)";
    const std::string query = "PATTERN " + expr + " CONTEXT unrestricted";
    const auto events = randomStream(rng, 9, 3);
    const auto want = reference(query, events);
    const auto got = runAlgebra(query, events);
    ASSERT_EQ(got, want) << query;
    nonempty += !want.empty();
  }
  EXPECT_GT(nonempty, 100);  // the random cases are not vacuous
}

// The outputs whose events' probabilities multiply to at least `bound`.
std::vector<Out> likely(const std::vector<Out>& outs, const std::vector<EventPtr>& events,
                        double bound) {
  std::vector<Out> kept;
  for (const Out& o : outs) {
    double p = 1;
    for (const auto& [element, id] : o.binds) p *= events[id - 1]->probability();
    if (p >= bound) kept.push_back(o);
  }
  return kept;
}

// PROBABILITY >= p on uncertain streams: unrestricted, the definitions'
// instances that are likely enough (pruned inside every operator); recent,
// the recent matches that are (the one-per-tick choice sees every instance),
// and each composite carries its match's probability.
TEST(AlgebraReference, ProbabilityBoundKeepsTheLikelyMatches) {
  std::mt19937 rng(11);
  size_t kept = 0, dropped = 0;
  for (int round = 0; round < 300; ++round) {
    ExprGen gen(rng, {";", "+", "|", "~", "||", "-"}, true);
    const std::string expr = "WITHIN(" + gen.gen(3) + ", 6)";
    const double bound = 0.25 * static_cast<double>(rng() % 4);
    const std::string clause = " PROBABILITY >= " + std::to_string(bound);
    const auto events = randomStream(rng, 9, 3, true);
    const std::string all = "PATTERN " + expr + " CONTEXT unrestricted";
    const auto want = likely(reference(all, events), events, bound);
    const auto got = runAlgebra(all + clause, events, true);
    ASSERT_EQ(got, want) << all << clause;
    for (const Out& o : got) {
      double p = 1;
      for (const auto& [element, id] : o.binds) p *= events[id - 1]->probability();
      EXPECT_EQ(o.composite->probability(), p) << all;
    }
    const std::string recent = "PATTERN " + expr;
    const auto recent_all = runAlgebra(recent, events);
    ASSERT_EQ(runAlgebra(recent + clause, events), likely(recent_all, events, bound)) << recent;
    kept += want.size();
    dropped += reference(all, events).size() - want.size();
  }
  EXPECT_GT(kept, 100u);  // both sides of the bound are exercised
  EXPECT_GT(dropped, 100u);
}

// Recent output vs the definitions: Definition 12's three conditions, and the
// same intervals as applying the context to the top level only (Theorems 1,
// 2), for the operators where pruning every level is sound.
TEST(AlgebraReference, RecentSatisfiesTheContextProperty) {
  std::mt19937 rng(11);
  int nonempty = 0;
  for (int round = 0; round < 300; ++round) {
    ExprGen gen(rng, {";", "+", "|", "-"}, true);
    const std::string expr = gen.gen(3);
    const auto events = randomStream(rng, 10, 3);
    const auto all = reference("PATTERN WITHIN(" + expr + ", 6) CONTEXT unrestricted", events);
    const std::string query = "PATTERN WITHIN(" + expr + ", 6) CONTEXT recent";
    const auto got = runAlgebra(query, events);
    std::map<Timestamp, Timestamp> ends;
    for (const Out& o : got) {
      EXPECT_TRUE(std::binary_search(all.begin(), all.end(), o)) << query << " " << o;  // (1)
      EXPECT_TRUE(ends.emplace(o.end, o.start).second) << query << " " << o;            // (3)
    }
    for (const Out& s : all) {  // (2)
      auto it = ends.find(s.end);
      EXPECT_TRUE(it != ends.end() && it->second >= s.start) << query << " " << s;
    }
    EXPECT_EQ(ends, context(all)) << query;  // pruning every level = pruning the top
    nonempty += !got.empty();
  }
  EXPECT_GT(nonempty, 100);
}

// With every operator the recent output is still a subset with one instance
// per end (conditions 1 and 3).
TEST(AlgebraReference, RecentIsASubsetWithUniqueEndsForEveryOperator) {
  std::mt19937 rng(13);
  for (int round = 0; round < 200; ++round) {
    ExprGen gen(rng, {";", "+", "|", "~", "||", "-"}, true);
    const std::string expr = gen.gen(3);
    const auto events = randomStream(rng, 10, 3);
    const auto all = reference("PATTERN WITHIN(" + expr + ", 6) CONTEXT unrestricted", events);
    const std::string query = "PATTERN WITHIN(" + expr + ", 6) CONTEXT recent";
    std::map<Timestamp, Timestamp> ends;
    for (const Out& o : runAlgebra(query, events)) {
      EXPECT_TRUE(std::binary_search(all.begin(), all.end(), o)) << query << " " << o;
      EXPECT_TRUE(ends.emplace(o.end, o.start).second) << query << " " << o;
    }
  }
}

// Theorem 1 does not hold for concatenation and concurrency: the latest-
// starting operand instance need not be the one that relates. Pruning every
// level (P1's algorithm, what the detector does) then misses an end that the
// top-level context has.
TEST(AlgebraReference, PerLevelPruningLosesConcatenationAndConcurrencyInstances) {
  // (a1,b10) contains (c3,d4); the recent left instance (a5,b10) does not.
  const auto s1 = letters("a1 c3 d4 a5 b10");
  const std::string q1 = "PATTERN (A ; B) ~ (C ; D) CONTEXT ";
  EXPECT_EQ(intervals(runAlgebra(q1 + "unrestricted", s1)), (IV{{1, 10}}));
  EXPECT_TRUE(runAlgebra(q1 + "recent", s1).empty());
  // (a1,b5) || (c1,d5), but the recent instances are (a3,b5) and (c2,d5).
  const auto s2 = letters("a1 c1 c2 a3 b5 d5");
  const std::string q2 = "PATTERN (A ; B) || (C ; D) CONTEXT ";
  EXPECT_EQ(intervals(runAlgebra(q2 + "unrestricted", s2)), (IV{{1, 5}}));
  EXPECT_TRUE(runAlgebra(q2 + "recent", s2).empty());
}

std::vector<std::pair<std::pair<Timestamp, Timestamp>, std::vector<EventId>>> byIds(
    const std::vector<Out>& outs) {
  std::vector<std::pair<std::pair<Timestamp, Timestamp>, std::vector<EventId>>> v;
  for (const Out& o : outs) {
    std::vector<EventId> ids;
    for (const auto& b : o.binds) ids.push_back(b.second);
    std::sort(ids.begin(), ids.end());
    v.emplace_back(std::make_pair(o.start, o.end), std::move(ids));
  }
  std::sort(v.begin(), v.end());
  return v;
}

TEST(AlgebraReference, EquivalentExpressionsGiveTheSameResult) {
  std::mt19937 rng(17);
  for (int round = 0; round < 100; ++round) {
    const auto events = randomStream(rng, 30, 3);
    for (const char* ctx : {" CONTEXT unrestricted", " CONTEXT recent"}) {
      auto run = [&](const std::string& p) { return runAlgebra("PATTERN " + p + ctx, events); };
      const bool u = std::string(ctx).find("unre") != std::string::npos;
      const auto a = run("(A ; B) ; C");
      const auto b = run("A ; (B ; C)");
      if (u) {
        EXPECT_EQ(a, b);
      } else {
        EXPECT_EQ(intervals(a), intervals(b));
      }
      EXPECT_EQ(intervals(run("A | B")), intervals(run("B | A")));
      EXPECT_EQ(intervals(run("(A ; B) + C")), intervals(run("C + (A ; B)")));
      if (u) {
        EXPECT_EQ(byIds(run("A | B")), byIds(run("B | A")));
        EXPECT_EQ(byIds(run("(A ; B) + C")), byIds(run("C + (A ; B)")));
      }
    }
  }
}

// Plain sequences under skip_till_any_match: the nfa engine reports every
// match, which is the unrestricted algebra.
TEST(AlgebraReference, AgreesWithTheNfaEngine) {
  const std::vector<std::string> queries = {
      "PATTERN SEQ(A a, B b, C c) WITHIN 8",
      "PATTERN SEQ(A a, B b, C c) WHERE a.x < c.x AND b.x > a.x WITHIN 10",
      "PATTERN SEQ(A a, B b) WITHIN 3",
  };
  std::mt19937 rng(19);
  size_t matches = 0;
  for (int round = 0; round < 20; ++round) {
    const auto events = randomStream(rng, 40, 4);
    for (const std::string& q : queries) {
      const std::string query = q + " CONTEXT unrestricted";
      auto nfa = run("nfa", query, events);
      ASSERT_TRUE(nfa.isOk()) << nfa.status().message();
      auto alg = runAlgebra(query, events);
      std::vector<Binds> a, n;
      for (const Out& o : alg) a.push_back(o.binds);
      for (const Out& o : *nfa) n.push_back(o.binds);
      std::sort(a.begin(), a.end());
      std::sort(n.begin(), n.end());
      EXPECT_EQ(a, n) << query;
      matches += a.size();
    }
  }
  EXPECT_GT(matches, 100u);
}

// P1's iteration (e)* unites instances of one end time too (a SASE Kleene
// element, which the engine runs under CONTEXT recent only, takes one event
// per timestamp).
TEST(AlgebraReference, P1IterationUnitesInstancesOfOneEndTime) {
  const auto events = letters("c1 c3 c3 c4");
  EXPECT_EQ(runAlgebra("PATTERN WITHIN((C)*, 4) CONTEXT unrestricted", events).size(), 15u);
}

}  // namespace
}  // namespace cepbus::plugins::algebra::testing
