#pragma once

// Random SEQ queries and streams in the surface every pattern engine reads
// (docs/pattern-language.md): one to four elements, negations between
// positive elements (and, on request, at either end of the pattern), Kleene plus with iteration
// predicates and aggregates, conjunctive predicates (now and then tying every variable on one
// attribute), windows, PARTITION BY key (attribute, JSON key or absent) and
// all three strategies. The brute-force ReferenceMatcher
// (reference_matcher.h) evaluates them; the nfa differential test and the
// cross-engine test (tests/plugins/engines_differential_test.cc) compare
// engines with it.

#include <random>
#include <string>
#include <vector>

#include "bus/core/event.h"

namespace cepbus::plugins::nfa::testing {

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
  // streams of a hundred events. `edge_negations`: now and then a NOT before
  // the first or after the last positive element, and then always a window.
  std::string query(bool& kleene_out, bool long_streams = false, bool edge_negations = false) {
    vars_.clear();
    used_.clear();
    const int m = uniform(1, 4);
    std::vector<std::string> items;
    bool kleene = false;
    bool edge = false;
    auto negation = [&](int right) {
      const std::string name = "n" + std::to_string(right);
      items.push_back("NOT(" + patternType() + " " + name + ")");
      vars_.push_back({name, false, true, right});
    };
    if (edge_negations && chance(0.45)) {
      negation(0);
      edge = true;
    }
    for (int k = 0; k < m; ++k) {
      if (k > 0 && chance(0.25)) negation(k);
      const bool kl = chance(0.25);
      kleene |= kl;
      const std::string name = (kl ? "k" : "v") + std::to_string(k);
      items.push_back(patternType() + (kl ? "+ " + name + "[]" : " " + name));
      vars_.push_back({name, kl, false, k});
    }
    if (edge_negations && (!edge || chance(0.3)) && chance(0.6)) {
      negation(m);
      edge = true;
    }
    kleene_out = kleene;
    std::string text = "PATTERN SEQ(";
    for (size_t i = 0; i < items.size(); ++i) text += (i ? ", " : "") + items[i];
    text += ")";
    std::vector<std::string> conj;
    const int nconj = uniform(0, 4) / 2;
    for (int i = 0; i < nconj; ++i) conj.push_back(conjunct());
    // Now and then every variable tied to one on an attribute: the shape an
    // engine may split the stream by (the nfa partitions its stacks by it).
    if (vars_.size() > 1 && chance(0.2)) tieEveryVariable(conj);
    for (size_t i = 0; i < conj.size(); ++i) text += (i ? " AND " : " WHERE ") + conj[i];
    const int w = uniform(0, 4);
    if (long_streams) {
      text += " WITHIN " + std::to_string(uniform(2, kleene ? 5 : 9));
    } else if (w > 0 || kleene || edge) {
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

  // `v.attr = anchor.attr` for every variable v but the anchor (a Kleene
  // variable through `v[i]`), the anchor being the first plain variable.
  void tieEveryVariable(std::vector<std::string>& conj) {
    const GenVar* anchor = nullptr;
    for (const GenVar& v : vars_) {
      if (!v.kleene && !v.negated) {
        anchor = &v;
        break;
      }
    }
    if (anchor == nullptr) return;
    const char* attrs[] = {"price", "sym", "key"};
    const std::string attr = attrs[uniform(0, 2)];
    for (const GenVar& v : vars_) {
      if (&v == anchor) continue;
      conj.push_back(v.name + (v.kleene ? "[i]." : ".") + attr + " = " + anchor->name + "." + attr);
    }
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

}  // namespace cepbus::plugins::nfa::testing
