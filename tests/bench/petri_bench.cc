// P3's experiment: SASE's equal-price pattern over three stocks, replicated
// 10 to 50 times, run by one merged Petri net (prefix joining shares every
// place and transition of the replicas), by one Petri net per pattern, and
// by one nfa detector per pattern (loaded through the plugin ABI), on the
// same events; every pattern's matches must agree across the three.
//
//   petri_bench [--quick] [--repeat N] [--plugin-path DIR]
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
#include <string>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "bus/core/plugin/plugin_loader.h"
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
  size_t transitions = 0;
  size_t unmerged_transitions = 0;
};

Run runPetri(const cepbus::pattern::Query& q, const std::vector<EventPtr>& events, size_t n,
             bool merged) {
  std::vector<ComposingSink> sinks(n);
  std::vector<std::unique_ptr<cepbus::plugins::petri::PetriNet>> nets;
  for (size_t i = 0; i < n; ++i) {
    if (i == 0 || !merged) nets.push_back(std::make_unique<cepbus::plugins::petri::PetriNet>());
    if (!nets.back()->addPattern("p" + std::to_string(i), q, sinks[i])) std::abort();
  }
  Run r;
  for (const auto& net : nets) {
    r.transitions += net->size().transitions;
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

Run runNfa(const Plugin& plugin, const cepbus::pattern::Query& q,
           const std::vector<EventPtr>& events, size_t n) {
  std::vector<ComposingSink> sinks(n);
  std::vector<std::unique_ptr<Detector>> detectors;
  for (size_t i = 0; i < n; ++i) {
    auto d = plugin.createDetector("nfa", q, DetectorOptions(), sinks[i]);
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

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int repeat = 3;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--plugin-path") == 0 && i + 1 < argc) {
      paths.push_back(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: petri_bench [--quick] [--repeat N] [--plugin-path DIR]\n");
      return 2;
    }
  }
  for (std::string& p : PluginLoader::defaultSearchPaths()) paths.push_back(std::move(p));
  PluginLoader loader(paths);
  auto nfa = loader.load("nfa");
  if (!nfa) {
    std::fprintf(stderr, "%s\n", nfa.status().message().c_str());
    return 1;
  }
  auto query = cepbus::pattern::parseQuery(kQuery);
  if (!query) {
    std::fprintf(stderr, "%s\n", query.status().message().c_str());
    return 1;
  }
  const size_t per_stock = quick ? 300 : 3000;
  const std::vector<EventPtr> events = stocks(per_stock);
  if (quick) repeat = 1;

  for (size_t n = 10; n <= 50; n += 10) {
    const char* kEngines[] = {"petri_merged", "petri_per_pattern", "nfa"};
    std::vector<Run> best(3);
    for (int rep = 0; rep < repeat; ++rep) {
      for (int e = 0; e < 3; ++e) {
        Run r = e == 2 ? runNfa(**nfa, *query, events, n) : runPetri(*query, events, n, e == 0);
        if (rep == 0 || r.seconds < best[e].seconds) best[e] = std::move(r);
      }
    }
    for (int e = 0; e < 3; ++e) {
      if (best[e].per_pattern != best[2].per_pattern) {
        std::fprintf(stderr, "%s and nfa disagree at %zu patterns\n", kEngines[e], n);
        return 1;
      }
    }
    for (int e = 0; e < 3; ++e) {
      const Run& r = best[e];
      uint64_t matches = 0;
      for (const auto& [m, c] : r.per_pattern) matches += m;
      const std::string net =
          e == 2 ? std::string()
                 : ",\"net_transitions\":" + std::to_string(r.transitions) +
                       ",\"unmerged_transitions\":" + std::to_string(r.unmerged_transitions);
      std::printf(
          "{\"bench\":\"petri_equal_prices\",\"params\":{\"engine\":\"%s\",\"patterns\":%zu,"
          "\"events\":%zu,\"within\":10},\"seconds\":%.6f,\"events_per_s\":%.0f,"
          "\"matches\":%llu%s}\n",
          kEngines[e], n, events.size(), r.seconds, static_cast<double>(events.size()) / r.seconds,
          static_cast<unsigned long long>(matches), net.c_str());
    }
    std::fflush(stdout);
  }
  return 0;
}
