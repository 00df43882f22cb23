// What the strategies cost on each pattern engine: the nfa engine runs them
// natively, the algebra and petri engines through plugin::StrategyFactory
// (their skip_till_any_match matches filtered). Every engine runs every
// query under each strategy in the same run; each line reports one engine,
// query and strategy, with its speed relative to the same engine's
// skip_till_any_match run.
//
//   strategy_bench [--events N] [--repeat R] [--plugin-path DIR]
//
// Stream: types A..D uniformly at random (mt19937 seeded 42), one event per
// time step, an integer attribute x uniform in 0..9; N events (default
// 100,000), built before timing. The best of R runs (default 3) by the wall
// clock is reported; the sink reads every bound event.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "bus/host/loader/plugin_loader.h"

namespace {

using namespace cepbus;
using plugin::PluginLoader;

class ReadingSink final : public plugin::MatchSink {
 public:
  void onMatch(const plugin::Match& match) override {
    ++matches;
    for (size_t i = 0; i < match.size(); ++i) checksum += static_cast<uint64_t>(match.ts(i));
  }
  uint64_t matches = 0;
  uint64_t checksum = 0;
};

std::vector<EventPtr> stream(size_t n) {
  std::mt19937 rng(42);
  std::vector<EventPtr> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(EventBuilder(std::string(1, static_cast<char>('A' + rng() % 4)))
                      .at(static_cast<Timestamp>(i + 1))
                      .set("x", Value(static_cast<int64_t>(rng() % 10)))
                      .build());
  }
  return out;
}

struct Run {
  double seconds = 1e300;
  uint64_t matches = 0;
};

Run runOnce(const plugin::Plugin& p, const char* engine, const pattern::Query& q,
            const std::vector<EventPtr>& events) {
  ReadingSink sink;
  auto d = p.createDetector(engine, q, plugin::DetectorOptions(), sink);
  if (!d) {
    std::fprintf(stderr, "strategy_bench: %s: %s\n", engine, d.status().message().c_str());
    std::exit(1);
  }
  const auto start = std::chrono::steady_clock::now();
  if (!(*d)->onEvents(events) || !(*d)->flush()) std::exit(1);
  const auto stop = std::chrono::steady_clock::now();
  return Run{std::chrono::duration<double>(stop - start).count(), sink.matches};
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 100000;
  int repeat = 3;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--events") == 0 && i + 1 < argc) {
      n = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--plugin-path") == 0 && i + 1 < argc) {
      paths.push_back(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: strategy_bench [--events N] [--repeat R] [--plugin-path DIR]\n");
      return 2;
    }
  }
  for (auto& p : PluginLoader::defaultSearchPaths()) paths.push_back(p);
  PluginLoader loader(paths);
  const std::vector<EventPtr> events = stream(n);
  const char* kEngines[] = {"nfa", "algebra", "petri"};
  const char* kQueries[] = {
      "PATTERN SEQ(A a, B b, C c) WHERE a.x < b.x WITHIN 20",
      "PATTERN SEQ(A a, B+ b[], C c) WHERE b[i].x > b[i-1].x WITHIN 10",
  };
  const pattern::Strategy kStrategies[] = {pattern::Strategy::kSkipTillAnyMatch,
                                           pattern::Strategy::kSkipTillNextMatch,
                                           pattern::Strategy::kStrictContiguity};
  for (const char* engine : kEngines) {
    auto p = loader.load(engine);
    if (!p) {
      std::fprintf(stderr, "strategy_bench: %s\n", p.status().message().c_str());
      return 1;
    }
    for (const char* text : kQueries) {
      double any_match_seconds = 0;
      for (pattern::Strategy s : kStrategies) {
        // The algebra engine's default context keeps one match per end time.
        std::string query = std::string(text) + " STRATEGY " + pattern::strategyName(s) +
                            (std::strcmp(engine, "algebra") == 0 ? " CONTEXT unrestricted" : "");
        auto q = pattern::parseQuery(query);
        if (!q) return 1;
        // A refusal is reported, not timed.
        ReadingSink probe;
        if (auto d = (*p)->createDetector(engine, *q, plugin::DetectorOptions(), probe); !d) {
          std::fprintf(stderr, "strategy_bench: %s refuses: %s\n", engine,
                       d.status().message().c_str());
          std::printf(
              "{\"bench\":\"strategy\",\"params\":{\"engine\":\"%s\",\"query\":\"%s\","
              "\"strategy\":\"%s\",\"events\":%zu},\"refused\":true}\n",
              engine, text, pattern::strategyName(s), n);
          continue;
        }
        Run best;
        for (int r = 0; r < repeat; ++r) {
          const Run run = runOnce(**p, engine, *q, events);
          if (run.seconds < best.seconds) best = run;
        }
        if (s == pattern::Strategy::kSkipTillAnyMatch) any_match_seconds = best.seconds;
        std::printf(
            "{\"bench\":\"strategy\",\"params\":{\"engine\":\"%s\",\"query\":\"%s\","
            "\"strategy\":\"%s\",\"events\":%zu},\"events_per_s\":%.0f,\"matches\":%llu,"
            "\"time_vs_any_match\":%.3f}\n",
            engine, text, pattern::strategyName(s), n, static_cast<double>(n) / best.seconds,
            static_cast<unsigned long long>(best.matches), best.seconds / any_match_seconds);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
