// P3's experiment: SASE's equal-price pattern over three stocks, replicated
// 10 to 50 times, run by one merged Petri net (prefix joining shares every
// place and transition of the replicas), by the petri plugin's createMany()
// (the same merged net behind the plugin ABI, as `cepbus match --patterns`
// runs it), by one Petri net per pattern, and by one nfa detector per
// pattern (loaded through the plugin ABI), on the same events; every
// pattern's matches must agree across all of them.
//
// Second experiment (`distinct`): 1,000 distinct patterns over 50 event
// types built from pools of prefixes, middles and tails (so they share
// prefixes, middles and tails), added to one net before the events, against
// one net per pattern and one nfa detector per pattern: net size merged vs
// unmerged and events/s, outputs checked identical pattern by pattern.
//
//   petri_bench [--quick] [--repeat N] [--plugin-path DIR] [--only equal|distinct]
//
// Workload: three stocks x 3,000 events, one per time step in round-robin
// symbol order; the three events of each round share a price, so every event
// participates and each pattern has 3,000 matches. The query adds WITHIN 10
// (every match spans 2 steps) so that neither engine keeps the whole stream.
// Each match's composite event is built (as P3 outputs composite events) and
// its timestamps go into an order-independent checksum. One JSON object per
// (engine, pattern count): wall-clock time of the best of --repeat runs
// (default 3) and events per second over it.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "bus/host/loader/plugin_loader.h"
#include "plugins/petri/petri_net.h"

namespace {

using cepbus::EventBuilder;
using cepbus::EventPtr;
using cepbus::Value;
using namespace cepbus::plugin;

constexpr const char* kQuery =
    "PATTERN SEQ(Stock a, Stock b, Stock c) "
    "WHERE a.price = b.price AND b.price = c.price AND a.symbol != b.symbol "
    "AND b.symbol != c.symbol AND a.symbol != c.symbol "
    "WITHIN 10 RETURN EqualPrices(a.symbol, b.symbol, c.symbol, a.price)";

class ComposingSink final : public MatchSink {
 public:
  void onMatch(const Match& match) override {
    ++matches;
    uint64_t h = 0;
    for (size_t i = 0; i < match.size(); ++i) h = h * 31 + static_cast<uint64_t>(match.ts(i));
    checksum += h * 0x9e3779b97f4a7c15ULL;
    composed += match.composite() != nullptr;
  }
  uint64_t matches = 0;
  uint64_t checksum = 0;
  uint64_t composed = 0;
};

// Labels createMany()'s matches into one ComposingSink per pattern.
class ManySink final : public MultiMatchSink {
 public:
  explicit ManySink(std::vector<ComposingSink>& sinks) : sinks_(sinks) {}
  void onMatch(size_t pattern, const Match& match) override { sinks_[pattern].onMatch(match); }

 private:
  std::vector<ComposingSink>& sinks_;
};

std::vector<EventPtr> stocks(size_t per_stock) {
  static const char* kSymbols[] = {"IBM", "SUN", "ORCL"};
  std::vector<EventPtr> out;
  for (size_t i = 0; i < 3 * per_stock; ++i) {
    out.push_back(EventBuilder("Stock")
                      .at(static_cast<int64_t>(i + 1))
                      .set("symbol", Value(std::string(kSymbols[i % 3])))
                      .set("price", Value(static_cast<int64_t>(100 + i / 3)))
                      .build());
  }
  return out;
}

struct Run {
  double seconds = 0;
  std::vector<std::pair<uint64_t, uint64_t>> per_pattern;  // matches, checksum
  size_t places = 0;
  size_t transitions = 0;
  size_t unmerged_places = 0;
  size_t unmerged_transitions = 0;
};

Run runPetri(const std::vector<cepbus::pattern::Query>& qs, const std::vector<EventPtr>& events,
             bool merged) {
  const size_t n = qs.size();
  std::vector<ComposingSink> sinks(n);
  std::vector<std::unique_ptr<cepbus::plugins::petri::PetriNet>> nets;
  for (size_t i = 0; i < n; ++i) {
    if (i == 0 || !merged) nets.push_back(std::make_unique<cepbus::plugins::petri::PetriNet>());
    if (!nets.back()->addPattern("p" + std::to_string(i), qs[i], sinks[i])) std::abort();
  }
  Run r;
  for (const auto& net : nets) {
    r.places += net->size().places;
    r.transitions += net->size().transitions;
    r.unmerged_places += net->unmergedSize().places;
    r.unmerged_transitions += net->unmergedSize().transitions;
  }
  const auto start = std::chrono::steady_clock::now();
  for (const EventPtr& e : events) {
    for (const auto& net : nets) {
      if (!net->onEvent(e)) std::abort();
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const ComposingSink& s : sinks) r.per_pattern.emplace_back(s.matches, s.checksum);
  return r;
}

Run runPlugin(const Plugin& plugin, const cepbus::pattern::Query& q,
              const std::vector<EventPtr>& events, size_t n) {
  std::vector<ComposingSink> sinks(n);
  ManySink many(sinks);
  std::vector<NamedQuery> queries;
  for (size_t i = 0; i < n; ++i) queries.push_back(NamedQuery{"p" + std::to_string(i), q});
  auto d = plugin.createManyDetectors("petri", queries, DetectorOptions(), many);
  if (!d) {
    std::fprintf(stderr, "petri: %s\n", d.status().message().c_str());
    std::exit(1);
  }
  Run r;
  const auto start = std::chrono::steady_clock::now();
  for (const EventPtr& e : events) {
    if (!(*d)->onEvent(e)) std::abort();
  }
  if (!(*d)->flush()) std::abort();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const ComposingSink& s : sinks) r.per_pattern.emplace_back(s.matches, s.checksum);
  return r;
}

Run runNfa(const Plugin& plugin, const std::vector<cepbus::pattern::Query>& qs,
           const std::vector<EventPtr>& events) {
  const size_t n = qs.size();
  std::vector<ComposingSink> sinks(n);
  std::vector<std::unique_ptr<Detector>> detectors;
  for (size_t i = 0; i < n; ++i) {
    auto d = plugin.createDetector("nfa", qs[i], DetectorOptions(), sinks[i]);
    if (!d) {
      std::fprintf(stderr, "nfa: %s\n", d.status().message().c_str());
      std::exit(1);
    }
    detectors.push_back(std::move(d).value());
  }
  Run r;
  const auto start = std::chrono::steady_clock::now();
  for (const EventPtr& e : events) {
    for (const auto& d : detectors) {
      if (!d->onEvent(e)) std::abort();
    }
  }
  for (const auto& d : detectors) {
    if (!d->flush()) std::abort();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const ComposingSink& s : sinks) r.per_pattern.emplace_back(s.matches, s.checksum);
  return r;
}

// The `distinct` workload: patterns concatenated from pools of two-element
// chunks over 50 types T0..T49, so that many share a prefix, a middle or a
// tail; each chunk may carry a guard between its two elements.
std::vector<std::string> distinctPatterns(size_t count, std::mt19937_64& rng) {
  struct Chunk {
    int t0, t1;
    bool guarded;
  };
  auto chunk = [&rng] {
    return Chunk{static_cast<int>(rng() % 50), static_cast<int>(rng() % 50), rng() % 2 == 0};
  };
  std::vector<Chunk> prefixes, middles, tails;
  for (int i = 0; i < 12; ++i) prefixes.push_back(chunk());
  for (int i = 0; i < 12; ++i) middles.push_back(chunk());
  for (int i = 0; i < 12; ++i) tails.push_back(chunk());
  std::vector<std::string> out;
  std::vector<std::string> seen;
  while (out.size() < count) {
    std::vector<Chunk> parts;
    parts.push_back(prefixes[rng() % prefixes.size()]);
    const int shape =
        static_cast<int>(rng() % 3);  // prefix+middle+tail, prefix+tail, prefix+middle
    if (shape != 1) parts.push_back(middles[rng() % middles.size()]);
    if (shape != 2) parts.push_back(tails[rng() % tails.size()]);
    // A distinct single-element head for some, so that only the middle or
    // tail is shared with the others (middle and back joins).
    std::string elements;
    std::string where;
    int v = 0;
    if (rng() % 2 == 0) elements += "T" + std::to_string(rng() % 50) + " v" + std::to_string(v++);
    for (const auto& c : parts) {
      for (int t : {c.t0, c.t1}) {
        elements += (elements.empty() ? "" : ", ") + std::string("T") + std::to_string(t) + " v" +
                    std::to_string(v++);
      }
      if (c.guarded) {
        where += (where.empty() ? " WHERE " : " AND ") + std::string("v") + std::to_string(v - 2) +
                 ".x = v" + std::to_string(v - 1) + ".x";
      }
    }
    std::string q = "PATTERN SEQ(" + elements + ")" + where + " WITHIN 120";
    if (std::find(seen.begin(), seen.end(), q) != seen.end()) continue;
    seen.push_back(q);
    out.push_back(std::move(q));
  }
  return out;
}

std::vector<EventPtr> randomEvents(size_t n, std::mt19937_64& rng) {
  std::vector<EventPtr> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(EventBuilder("T" + std::to_string(rng() % 50))
                      .at(static_cast<int64_t>(i + 1))
                      .set("x", Value(static_cast<int64_t>(rng() % 4)))
                      .build());
  }
  return out;
}

void printRun(const char* bench, const char* engine, size_t patterns, size_t events, const Run& r,
              bool net) {
  uint64_t matches = 0;
  for (const auto& [m, c] : r.per_pattern) matches += m;
  const std::string sizes =
      !net ? std::string()
           : ",\"net_places\":" + std::to_string(r.places) +
                 ",\"net_transitions\":" + std::to_string(r.transitions) +
                 ",\"unmerged_places\":" + std::to_string(r.unmerged_places) +
                 ",\"unmerged_transitions\":" + std::to_string(r.unmerged_transitions);
  std::printf(
      "{\"bench\":\"%s\",\"params\":{\"engine\":\"%s\",\"patterns\":%zu,\"events\":%zu},"
      "\"seconds\":%.6f,\"events_per_s\":%.0f,\"matches\":%llu%s}\n",
      bench, engine, patterns, events, r.seconds, static_cast<double>(events) / r.seconds,
      static_cast<unsigned long long>(matches), sizes.c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int repeat = 3;
  std::string only;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--plugin-path") == 0 && i + 1 < argc) {
      paths.push_back(argv[++i]);
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: petri_bench [--quick] [--repeat N] [--plugin-path DIR] "
                   "[--only equal|distinct]\n");
      return 2;
    }
  }
  for (std::string& p : PluginLoader::defaultSearchPaths()) paths.push_back(std::move(p));
  PluginLoader loader(paths);
  auto nfa = loader.load("nfa");
  auto petri = loader.load("petri");
  if (!nfa || !petri) {
    std::fprintf(stderr, "%s\n", (!nfa ? nfa : petri).status().message().c_str());
    return 1;
  }
  if (quick) repeat = 1;

  if (only.empty() || only == "equal") {
    auto query = cepbus::pattern::parseQuery(kQuery);
    if (!query) {
      std::fprintf(stderr, "%s\n", query.status().message().c_str());
      return 1;
    }
    const size_t per_stock = quick ? 300 : 3000;
    const std::vector<EventPtr> events = stocks(per_stock);
    for (size_t n = 10; n <= 50; n += 10) {
      const std::vector<cepbus::pattern::Query> qs(n, *query);
      const char* kEngines[] = {"petri_merged", "petri_plugin_create_many", "petri_per_pattern",
                                "nfa"};
      std::vector<Run> best(4);
      for (int rep = 0; rep < repeat; ++rep) {
        for (int e = 0; e < 4; ++e) {
          Run r = e == 0   ? runPetri(qs, events, true)
                  : e == 1 ? runPlugin(**petri, *query, events, n)
                  : e == 2 ? runPetri(qs, events, false)
                           : runNfa(**nfa, qs, events);
          if (rep == 0 || r.seconds < best[e].seconds) best[e] = std::move(r);
        }
      }
      for (int e = 0; e < 4; ++e) {
        if (best[e].per_pattern != best[3].per_pattern) {
          std::fprintf(stderr, "%s and nfa disagree at %zu patterns\n", kEngines[e], n);
          return 1;
        }
      }
      for (int e = 0; e < 4; ++e) {
        printRun("petri_equal_prices", kEngines[e], n, events.size(), best[e], e == 0 || e == 2);
      }
    }
  }

  if (only.empty() || only == "distinct") {
    std::mt19937_64 rng(1000);
    const size_t count = quick ? 200 : 1000;
    std::vector<cepbus::pattern::Query> qs;
    for (const std::string& text : distinctPatterns(count, rng)) {
      auto q = cepbus::pattern::parseQuery(text);
      if (!q) {
        std::fprintf(stderr, "%s: %s\n", text.c_str(), q.status().message().c_str());
        return 1;
      }
      qs.push_back(std::move(q).value());
    }
    const std::vector<EventPtr> events = randomEvents(quick ? 5000 : 50000, rng);
    const char* kEngines[] = {"petri_merged", "petri_per_pattern", "nfa"};
    std::vector<Run> best(3);
    for (int rep = 0; rep < repeat; ++rep) {
      for (int e = 0; e < 3; ++e) {
        Run r = e == 2 ? runNfa(**nfa, qs, events) : runPetri(qs, events, e == 0);
        if (rep == 0 || r.seconds < best[e].seconds) best[e] = std::move(r);
      }
    }
    for (int e = 0; e < 3; ++e) {
      if (best[e].per_pattern != best[2].per_pattern) {
        std::fprintf(stderr, "distinct: %s and nfa disagree\n", kEngines[e]);
        return 1;
      }
    }
    for (int e = 0; e < 3; ++e) {
      printRun("petri_distinct_patterns", kEngines[e], qs.size(), events.size(), best[e], e < 2);
    }
  }
  return 0;
}
