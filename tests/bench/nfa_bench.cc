// P2's experiments: the SASE per-event construction against batched
// construction with aggregated links, measured in the same run on the same
// events (docs/benchmarks.md).
//
//   nfa_bench [--quick] [--repeat N] [--stream NAME]... [--window W]...
//             [--query-length 3|4] [--plugin-path DIR]
//
// Workloads (10,000 events, one per time step, skip_till_any_match):
// - uniform: types A-D uniformly at random (mt19937 seeded 42, value % 4),
//   queries SEQ(A,B,D) and SEQ(A,B,D,C), window W = 500, 600, ..., 1000
//   time steps, i.e. `WITHIN W-1`;
// - ineffective: P2's clustering-ineffective stream a b d b d a b d b d ...
// - effective: P2's clustering-effective stream a b b b d d d d d d a ...
//   (both with SEQ(A,B,D) over the same windows).
// Every match is materialized: the sink reads every event of every match
// (its ts and id) into a checksum, which must agree between the methods.
// One JSON object per measurement, then one per (workload, query, window)
// with the batched/per_event throughput ratio. Throughput is events per
// second over the whole run (feeding every event plus the final flush), by
// the wall clock (events_per_s, as P2 measures) and by the thread's CPU time
// (cpu_events_per_s: the same on an idle machine, steadier on a shared one);
// `ratio` and `cpu_ratio` compare them. The best of --repeat runs (default 3,
// fewer once a method has run for 20 s) is reported.

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "bus/host/loader/plugin_loader.h"

namespace {

using cepbus::EventBuilder;
using cepbus::EventPtr;
using namespace cepbus::plugin;

class MaterializingSink final : public MatchSink {
 public:
  void onMatch(const Match& match) override {
    ++matches;
    uint64_t h = 0;
    for (size_t i = 0; i < match.size(); ++i) {
      const cepbus::Event& e = *match.event(i);
      h = h * 31 + static_cast<uint64_t>(e.ts()) + (e.id() & 0xff);
    }
    events += match.size();
    checksum += h * 0x9e3779b97f4a7c15ULL;  // order-independent across matches
  }
  uint64_t matches = 0;
  uint64_t events = 0;
  uint64_t checksum = 0;
};

std::vector<EventPtr> fromTypes(const std::string& types) {
  std::vector<EventPtr> out;
  out.reserve(types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    out.push_back(EventBuilder(std::string(1, types[i])).at(static_cast<int64_t>(i + 1)).build());
  }
  return out;
}

std::string uniformTypes(size_t n) {
  std::mt19937 rng(42);
  std::string s;
  for (size_t i = 0; i < n; ++i) s += static_cast<char>('A' + rng() % 4);
  return s;
}

std::string repeatMotif(const std::string& motif, size_t n) {
  std::string s;
  while (s.size() < n) s += motif;
  s.resize(n);
  return s;
}

double threadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Run {
  double seconds = 0;
  double cpu_seconds = 0;
  uint64_t matches = 0;
  uint64_t match_events = 0;
  uint64_t checksum = 0;
};

Run runOnce(const Plugin& plugin, const cepbus::pattern::Query& query,
            const std::string& construction, const std::vector<EventPtr>& events) {
  MaterializingSink sink;
  auto options = DetectorOptions::parse(std::vector<std::string>{"construction=" + construction});
  auto detector = plugin.createDetector("nfa", query, *options, sink);
  if (!detector) {
    std::fprintf(stderr, "nfa_bench: %s\n", detector.status().message().c_str());
    std::exit(1);
  }
  const double cpu_start = threadCpuSeconds();
  const auto start = std::chrono::steady_clock::now();
  for (const EventPtr& e : events) {
    if (!(*detector)->onEvent(e)) std::exit(1);
  }
  if (!(*detector)->flush()) std::exit(1);
  const auto stop = std::chrono::steady_clock::now();
  return Run{std::chrono::duration<double>(stop - start).count(), threadCpuSeconds() - cpu_start,
             sink.matches, sink.events, sink.checksum};
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int repeat = 3;
  std::vector<std::string> paths;
  std::vector<std::string> only_streams;
  std::vector<int> only_windows;
  int only_length = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--stream") == 0 && i + 1 < argc) {
      only_streams.push_back(argv[++i]);
    } else if (std::strcmp(argv[i], "--window") == 0 && i + 1 < argc) {
      only_windows.push_back(std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--query-length") == 0 && i + 1 < argc) {
      only_length = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--plugin-path") == 0 && i + 1 < argc) {
      paths.push_back(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: nfa_bench [--quick] [--repeat N] [--stream NAME]... [--window W]...\n"
                   "                 [--query-length 3|4] [--plugin-path DIR]\n");
      return 2;
    }
  }
  for (auto& p : PluginLoader::defaultSearchPaths()) paths.push_back(p);
  PluginLoader loader(paths);
  auto plugin = loader.load("nfa");
  if (!plugin) {
    std::fprintf(stderr, "nfa_bench: %s\n", plugin.status().message().c_str());
    return 1;
  }

  constexpr size_t kEvents = 10000;
  struct Workload {
    const char* stream;
    std::vector<EventPtr> events;
    std::vector<const char*> queries;
  };
  std::vector<Workload> workloads = {
      {"uniform",
       fromTypes(uniformTypes(kEvents)),
       {"SEQ(A a, B b, D d)", "SEQ(A a, B b, D d, C c)"}},
      {"ineffective", fromTypes(repeatMotif("abdbd", kEvents)), {"SEQ(A a, B b, D d)"}},
      {"effective", fromTypes(repeatMotif("abbbdddddd", kEvents)), {"SEQ(A a, B b, D d)"}},
  };
  for (Workload& w : workloads) {
    for (auto& e : w.events) {
      // The motifs are written in lower case; types are upper case.
      const char t = static_cast<char>(std::toupper(e->type().name()[0]));
      e = EventBuilder(std::string(1, t)).at(e->ts()).build();
    }
  }
  std::vector<int> windows = {500, 600, 700, 800, 900, 1000};
  if (quick) windows = {500, 1000};
  if (!only_windows.empty()) windows = only_windows;

  for (const Workload& w : workloads) {
    if (!only_streams.empty() &&
        std::find(only_streams.begin(), only_streams.end(), w.stream) == only_streams.end()) {
      continue;
    }
    for (const char* q : w.queries) {
      const int length = static_cast<int>(std::count(q, q + std::strlen(q), ',')) + 1;
      if (only_length != 0 && length != only_length) continue;
      for (int window : windows) {
        const std::string text =
            std::string("PATTERN ") + q + " WITHIN " + std::to_string(window - 1);
        auto query = cepbus::pattern::parseQuery(text);
        if (!query) {
          std::fprintf(stderr, "nfa_bench: %s\n", query.status().message().c_str());
          return 1;
        }
        Run best[2];
        const char* methods[2] = {"per_event", "batched"};
        double spent = 0;
        for (int r = 0; r < repeat && (r == 0 || spent < 40); ++r) {
          for (int m = 0; m < 2; ++m) {
            const Run run = runOnce(**plugin, *query, methods[m], w.events);
            spent += run.seconds;
            if (r == 0 || run.cpu_seconds < best[m].cpu_seconds) best[m] = run;
          }
        }
        const bool agree = best[0].matches == best[1].matches &&
                           best[0].checksum == best[1].checksum &&
                           best[0].match_events == best[1].match_events;
        for (int m = 0; m < 2; ++m) {
          std::printf(
              "{\"bench\":\"nfa\",\"params\":{\"stream\":\"%s\",\"query\":\"%s\",\"window\":%d,"
              "\"within\":%d,\"construction\":\"%s\",\"strategy\":\"skip_till_any_match\"},"
              "\"events\":%zu,\"seconds\":%.6f,\"cpu_seconds\":%.6f,\"events_per_s\":%.1f,"
              "\"cpu_events_per_s\":%.1f,\"matches\":%llu,\"matches_per_s\":%.1f,"
              "\"cpu_matches_per_s\":%.1f,\"materialized_events\":%llu}\n",
              w.stream, q, window, window - 1, methods[m], w.events.size(), best[m].seconds,
              best[m].cpu_seconds, static_cast<double>(w.events.size()) / best[m].seconds,
              static_cast<double>(w.events.size()) / best[m].cpu_seconds,
              static_cast<unsigned long long>(best[m].matches),
              static_cast<double>(best[m].matches) / best[m].seconds,
              static_cast<double>(best[m].matches) / best[m].cpu_seconds,
              static_cast<unsigned long long>(best[m].match_events));
        }
        std::printf(
            "{\"bench\":\"nfa_ratio\",\"params\":{\"stream\":\"%s\",\"query\":\"%s\",\"window\":%d}"
            ","
            "\"ratio\":%.3f,\"cpu_ratio\":%.3f,\"matches\":%llu,\"same_matches\":%s}\n",
            w.stream, q, window, best[0].seconds / best[1].seconds,
            best[0].cpu_seconds / best[1].cpu_seconds,
            static_cast<unsigned long long>(best[0].matches), agree ? "true" : "false");
        std::fflush(stdout);
        if (!agree) return 1;
      }
    }
  }
  return 0;
}
