// The physical reference for the window engine's figures (window_bench.py):
// the simplest native hash aggregation over the same events `cepbus match`
// reads, decoded by the same reader (EventLineReader), for a tumbling,
// sliding or session window with count, sum, avg, min and max of one
// numeric attribute per group of one string attribute.
//
//   tumbling, sliding: one std::unordered_map from group to running
//     aggregate per open window [kS, kS + L); an event updates every window
//     that holds it (L/S of them: no panes, no sharing), and a window's
//     groups come out once an event passes its end;
//   session: one std::unordered_map from group to its open session; a
//     group's session comes out when its next event is more than G after its
//     last one, the rest at the end of the input.
//
// The events are read and kept first; only the aggregation loop (updates and
// results, each result a plain struct appended to a vector) is timed, best
// of --runs. Prints one JSON object: the results, their checksum as `cepbus
// match --count` computes it over the results' ts (so the two are compared
// by window ends), and the loop's CPU and wall time. --print FILE writes every
// result as a JSON line (window start and last time unit, group, the five
// aggregates) for window_bench.py to compare with `cepbus match --format
// full`.
//
//   window_native_bench --events FILE --window tumbling|sliding|session
//                       --length L [--every S] [--type Temp] [--group sensor]
//                       [--value value] [--runs 3] [--print FILE]

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "bus/app/event_replay.h"
#include "bus/core/event.h"
#include "bus/core/event_json.h"

namespace cepbus::bench {
namespace {

struct Options {
  std::string events;
  std::string window;
  int64_t length = 0;
  int64_t every = 0;
  std::string type = "Temp";
  std::string group = "sensor";
  std::string value = "value";
  int runs = 3;
  std::string print;
};

// One event as the loop reads it: what the query needs, taken off the
// decoded event once, as a hand-written aggregation would.
struct Row {
  int64_t ts;
  std::string_view group;  // into the kept event
  double value;
  bool has_value;
};

struct Aggregate {
  int64_t count = 0;
  int64_t numbers = 0;
  double sum = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();

  void add(const Row& row) {
    ++count;
    if (!row.has_value) return;
    ++numbers;
    sum += row.value;
    min = std::min(min, row.value);
    max = std::max(max, row.value);
  }
};

struct Output {
  int64_t start;
  int64_t end;  // the window's last time unit (a session: its last event's ts)
  std::string_view group;
  Aggregate agg;
};

using GroupMap = std::unordered_map<std::string_view, Aggregate>;

int64_t floorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Tumbling (S = L) and sliding windows: a map per open window, every window
// holding an event updated.
void windows(const std::vector<Row>& rows, int64_t length, int64_t every,
             std::vector<Output>& out) {
  struct Open {
    int64_t k;
    GroupMap groups;
  };
  std::deque<Open> open;  // by k
  auto close = [&](Open& w) {
    const int64_t start = w.k * every;
    for (const auto& [group, agg] : w.groups)
      out.push_back({start, start + length - 1, group, agg});
  };
  for (const Row& row : rows) {
    while (!open.empty() && open.front().k * every + length <= row.ts) {
      close(open.front());
      open.pop_front();
    }
    const int64_t first = floorDiv(row.ts - length, every) + 1;  // kS + L > ts
    const int64_t last = floorDiv(row.ts, every);                // kS <= ts
    for (int64_t k = open.empty() ? first : std::max(first, open.back().k + 1); k <= last; ++k)
      open.push_back({k, {}});
    for (Open& w : open) w.groups[row.group].add(row);  // every open window holds ts
  }
  for (Open& w : open) close(w);
}

void sessions(const std::vector<Row>& rows, int64_t gap, std::vector<Output>& out) {
  struct Session {
    int64_t first;
    int64_t last;
    Aggregate agg;
  };
  std::unordered_map<std::string_view, Session> open;
  for (const Row& row : rows) {
    auto [it, fresh] = open.try_emplace(row.group, Session{row.ts, row.ts, {}});
    Session& s = it->second;
    if (!fresh && row.ts - s.last > gap) {
      out.push_back({s.first, s.last, row.group, s.agg});
      s = Session{row.ts, row.ts, {}};
    }
    s.last = row.ts;
    s.agg.add(row);
  }
  for (const auto& [group, s] : open) out.push_back({s.first, s.last, group, s.agg});
}

double cpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

void printResults(const std::string& path, const std::vector<Output>& results) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::perror(path.c_str());
    std::exit(1);
  }
  for (const Output& r : results) {
    const Aggregate& a = r.agg;
    std::fprintf(f, R"({"start":%lld,"ts":%lld,"group":"%.*s","count":%lld,"sum":%.17g)",
                 static_cast<long long>(r.start), static_cast<long long>(r.end),
                 static_cast<int>(r.group.size()), r.group.data(), static_cast<long long>(a.count),
                 a.sum);
    if (a.numbers > 0) {
      std::fprintf(f, R"(,"avg":%.17g,"min":%.17g,"max":%.17g)",
                   a.sum / static_cast<double>(a.numbers), a.min, a.max);
    }
    std::fputs("}\n", f);
  }
  std::fclose(f);
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "window_native_bench: %s\nusage: window_native_bench --events FILE --window "
               "tumbling|sliding|session --length L [--every S] [--type T] [--group ATTR] "
               "[--value ATTR] [--runs N] [--print FILE]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i + 1 >= argc) usage("every option takes a value");
    const char* v = argv[++i];
    if (arg == "--events") {
      o.events = v;
    } else if (arg == "--window") {
      o.window = v;
    } else if (arg == "--length") {
      o.length = std::atoll(v);
    } else if (arg == "--every") {
      o.every = std::atoll(v);
    } else if (arg == "--type") {
      o.type = v;
    } else if (arg == "--group") {
      o.group = v;
    } else if (arg == "--value") {
      o.value = v;
    } else if (arg == "--runs") {
      o.runs = std::atoi(v);
    } else if (arg == "--print") {
      o.print = v;
    } else {
      usage("unknown option");
    }
  }
  if (o.events.empty() || o.length <= 0 || o.runs <= 0) usage("--events and --length are needed");
  if (o.window == "tumbling") o.every = o.length;
  if (o.window == "sliding" && (o.every <= 0 || o.every > o.length)) usage("bad --every");
  if (o.window != "tumbling" && o.window != "sliding" && o.window != "session")
    usage("bad --window");
  return o;
}

int run(const Options& o) {
  std::ifstream in(o.events);
  if (!in) usage("cannot open --events");
  EventLineReader reader(in);
  std::vector<EventPtr> kept;
  for (Result<EventPtr> e = reader.next(); e; e = reader.next()) kept.push_back(std::move(*e));
  const Symbol type = Symbol::intern(o.type);
  const Symbol group = Symbol::intern(o.group);
  const Symbol value = Symbol::intern(o.value);
  std::vector<Row> rows;
  rows.reserve(kept.size());
  for (const EventPtr& e : kept) {
    if (e->type() != type) continue;
    const Value* g = e->find(group);
    const Value* v = e->find(value);
    if (g == nullptr || g->kind() != Value::Kind::kString) usage("an event without a string group");
    const bool number = v != nullptr && v->isNumber();
    rows.push_back({e->ts(), g->asString(), number ? v->toDouble() : 0, number});
  }
  std::vector<Output> results;
  double best_cpu = std::numeric_limits<double>::infinity();
  double best_wall = best_cpu;
  for (int r = 0; r < o.runs; ++r) {
    std::vector<Output>().swap(results);
    const double cpu0 = cpuSeconds();
    const auto wall0 = std::chrono::steady_clock::now();
    if (o.window == "session") {
      sessions(rows, o.length, results);
    } else {
      windows(rows, o.length, o.every, results);
    }
    const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - wall0;
    best_cpu = std::min(best_cpu, cpuSeconds() - cpu0);
    best_wall = std::min(best_wall, wall.count());
  }
  uint64_t checksum = 0;
  for (const Output& r : results)
    checksum += app::splitmix64(app::kChecksumSeed ^ static_cast<uint64_t>(r.end));
  if (!o.print.empty()) printResults(o.print, results);
  std::printf(R"({"bench":"window_native","window":"%s","length":%lld,"every":%lld,"events":%zu,)"
              R"("results":%zu,"checksum":"%s","cpu_s":%.4f,"wall_s":%.4f})"
              "\n",
              o.window.c_str(), static_cast<long long>(o.length), static_cast<long long>(o.every),
              rows.size(), results.size(), app::hex64(checksum).c_str(), best_cpu, best_wall);
  return 0;
}

}  // namespace
}  // namespace cepbus::bench

int main(int argc, char** argv) { return cepbus::bench::run(cepbus::bench::parse(argc, argv)); }
