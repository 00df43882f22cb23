#pragma once

// Shared by the petri tests: random SEQ patterns kept as data (so that a
// brute-force reference evaluates them without the engine's expression
// compiler), their query text, random streams and a collecting sink.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/plugin/detector.h"
#include "tests/testing/match_recorder.h"

namespace cepbus::plugins::petri::testing {

using cepbus::testing::MatchRecorder;

// `vi.x OP vj.x` (rhs >= 0) or `vi.x OP constant` (rhs < 0).
struct Pred {
  int lhs = 0;
  int rhs = -1;
  int op = 0;  // 0 '=', 1 '!=', 2 '<', 3 '>'
  int64_t constant = 0;
};

struct RandomPattern {
  std::vector<char> types;  // 'A'..
  std::vector<bool> named;
  std::vector<Pred> preds;
  std::optional<int64_t> within;
  double min_probability = 0;  // PROBABILITY >= it, when above 0

  std::string text() const {
    static const char* kOps[] = {"=", "!=", "<", ">"};
    std::string q = "PATTERN SEQ(";
    for (size_t k = 0; k < types.size(); ++k) {
      if (k > 0) q += ", ";
      q += types[k];
      if (named[k]) q += " v" + std::to_string(k);
    }
    q += ")";
    for (size_t i = 0; i < preds.size(); ++i) {
      const Pred& p = preds[i];
      q += i == 0 ? " WHERE " : " AND ";
      q += "v" + std::to_string(p.lhs) + ".x " + kOps[p.op] + " ";
      q += p.rhs >= 0 ? "v" + std::to_string(p.rhs) + ".x" : std::to_string(p.constant);
    }
    if (within) q += " WITHIN " + std::to_string(*within);
    if (min_probability > 0) q += " PROBABILITY >= " + std::to_string(min_probability);
    return q;
  }
};

inline bool holds(const Pred& p, const std::vector<const Event*>& bound) {
  const int64_t l = bound[p.lhs]->find(Symbol::intern("x"))->asInt();
  const int64_t r = p.rhs >= 0 ? bound[p.rhs]->find(Symbol::intern("x"))->asInt() : p.constant;
  switch (p.op) {
    case 0:
      return l == r;
    case 1:
      return l != r;
    case 2:
      return l < r;
    default:
      return l > r;
  }
}

// Every combination of events in order with strictly increasing ts, the
// right types, the predicates, the (inclusive) window and the probability
// bound (the product of the events' probabilities): skip_till_any_match.
inline std::vector<std::vector<Timestamp>> bruteForce(const RandomPattern& p,
                                                      const std::vector<EventPtr>& events) {
  std::vector<std::vector<Timestamp>> out;
  std::vector<const Event*> bound(p.types.size());
  auto rec = [&](auto&& self, size_t k, size_t from) -> void {
    if (k == p.types.size()) {
      for (const Pred& pr : p.preds) {
        if (!holds(pr, bound)) return;
      }
      if (p.within && bound.back()->ts() - bound.front()->ts() > *p.within) return;
      double prob = 1;
      for (const Event* e : bound) prob *= e->probability();
      if (prob < p.min_probability) return;
      std::vector<Timestamp> ts;
      for (const Event* e : bound) ts.push_back(e->ts());
      out.push_back(std::move(ts));
      return;
    }
    for (size_t i = from; i < events.size(); ++i) {
      const Event& e = *events[i];
      if (e.type().name() != std::string_view(&p.types[k], 1)) continue;
      if (k > 0 && e.ts() <= bound[k - 1]->ts()) continue;
      bound[k] = &e;
      self(self, k + 1, i + 1);
    }
  };
  rec(rec, 0, 0);
  std::sort(out.begin(), out.end());
  return out;
}

// Events of types A..(A+ntypes-1) with an int attribute x in [0, 3], ts
// non-decreasing with repeats (so strictness matters). `uncertain`:
// probabilities 1/4 .. 1, whose products are exact in binary.
inline std::vector<EventPtr> randomStream(std::mt19937_64& rng, size_t n, int ntypes,
                                          bool uncertain = false) {
  std::vector<EventPtr> out;
  Timestamp ts = 0;
  for (size_t i = 0; i < n; ++i) {
    ts += static_cast<Timestamp>(rng() % 3);
    const std::string type(1, static_cast<char>('A' + rng() % ntypes));
    EventBuilder b(type);
    b.at(ts).set("x", Value(static_cast<int64_t>(rng() % 4)));
    if (uncertain) b.probability(0.25 * static_cast<double>(1 + rng() % 4));
    out.push_back(b.build());
  }
  return out;
}

inline Pred randomPred(std::mt19937_64& rng, const RandomPattern& p) {
  std::vector<int> vars;
  for (size_t k = 0; k < p.types.size(); ++k) {
    if (p.named[k]) vars.push_back(static_cast<int>(k));
  }
  Pred pr;
  pr.lhs = vars[rng() % vars.size()];
  pr.op = static_cast<int>(rng() % 4);
  if (vars.size() > 1 && rng() % 3 != 0) {
    do {
      pr.rhs = vars[rng() % vars.size()];
    } while (pr.rhs == pr.lhs);
  } else {
    pr.constant = static_cast<int64_t>(rng() % 4);
  }
  return pr;
}

// A pattern of 1..max_len elements; every element is named except, now and
// then, one that no predicate can name.
inline RandomPattern randomPattern(std::mt19937_64& rng, size_t max_len, int ntypes) {
  RandomPattern p;
  const size_t len = 1 + rng() % max_len;
  for (size_t k = 0; k < len; ++k) {
    p.types.push_back(static_cast<char>('A' + rng() % ntypes));
    p.named.push_back(k == 0 || rng() % 5 != 0);
  }
  const size_t npred = rng() % 3;
  for (size_t i = 0; i < npred; ++i) p.preds.push_back(randomPred(rng, p));
  if (rng() % 3 != 0) p.within = static_cast<int64_t>(1 + rng() % 12);
  return p;
}

}  // namespace cepbus::plugins::petri::testing
