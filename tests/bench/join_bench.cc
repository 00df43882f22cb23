// P4's experiments on the join plugin: the cloned-plate join done by
//   - sqlite: an in-memory SQL database (SQLite `:memory:`) with P4's two
//     tables, `local` (the window) and `illegal` (the joined pairs), indexed,
//     prepared statements, expiry by DELETE every deletion interval;
//   - native: the simplest correct native join: one thread, a hash map by
//     plate, expiry on insert;
//   - plugin: the join plugin (loaded through the plugin ABI, behind the
//     host's wrappers) with 1 and 2 workers, expiry on insert, fed 1,024
//     readings per Detector::onEvents() call (--chunk);
// on the same readings, with every output checked identical (pair count and
// an order-independent checksum of the pairs' arrival numbers).
//
// Readings: a simulated day (ts in seconds) at N checkpoints with a random
// symmetric time matrix (10-60 min). Cars drive between checkpoints no faster
// than the matrix allows; 2% of the plates are cloned (two cars, one plate),
// which is what makes pairs. Each passage yields the true plate with p in
// [0.5, 1) and, half the time, a misread plate with 1 - p. Plates are drawn
// uniformly or from a Gaussian over the plate numbers (P4's uniform and
// Gaussian data).
//
//   join_bench               the comparison (thresholds 0.7/0.9, 60 and 150
//                            checkpoints, uniform and Gaussian), with ratios
//   join_bench --sweeps      readings/s vs workers, checkpoints, threshold and
//                            deletion interval (P4's figures 6-14)
//   join_bench --spill       P4's spill experiment: per input slice, the pairs
//                            reported and their mean probability for
//                            all-in-memory, window_half, less_than_probability
//   join_bench --cepbus PATH the figure a user sees: the whole `cepbus join
//                            --count` process on the readings written as
//                            JSON lines, less the same command on a type no
//                            reading has (what reading and decoding the file
//                            costs), beside the native join's loop on the
//                            same readings, on every case the sweeps use:
//                            uniform and Gaussian plates, 30..150
//                            checkpoints, thresholds 0.7/0.8/0.9 (expiry on
//                            insert), and at 60 checkpoints batch expiry
//                            every 30..150 min (--dist, --checkpoints and
//                            --threshold filter; best of --runs, at most 5)
//   --readings N             readings per run (default 300000)
//   --plates N               plates (default 20000; fewer plates, longer lists)
//   --runs N                 runs per measurement (default 9; SQLite N/4)
//   --chunk N                events per Detector::onEvents() call of the
//                            plugin runs (default 1024; 0: one onEvent() call
//                            per event)
//   --checkpoints, --dist, --threshold, --method
//                            run only these cases of the comparison (each may
//                            repeat; methods sqlite, native, plugin1, plugin2;
//                            any threshold in [0, 1])
//
// Each measurement is the best of 9 runs (SQLite: 2) of the work alone:
// creating the detector or the database is not timed; wall and CPU time are
// each the least over the runs. One JSON object per line.

#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bus/core/event.h"
#include "bus/core/event_json.h"
#include "bus/core/pattern/parser.h"
#include "bus/host/loader/plugin_loader.h"

namespace {

using namespace cepbus;
using Clock = std::chrono::steady_clock;

// Wall and CPU seconds of one timed section. CPU time is the whole process's
// (a plugin's workers included): on a machine other processes load, it is the
// steadier measure of the work done.
struct Stopwatch {
  Clock::time_point wall0 = Clock::now();
  double cpu0 = cpuNow();
  static double cpuNow() {
    timespec t{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
  }
  double wall() const { return std::chrono::duration<double>(Clock::now() - wall0).count(); }
  double cpu() const { return cpuNow() - cpu0; }
};

struct Timing {
  double seconds = 0;  // wall
  double cpu = 0;
  void stop(const Stopwatch& w) {
    seconds = w.wall();
    cpu = w.cpu();
  }
};

const Symbol kPlate = Symbol::intern("plate");
const Symbol kSite = Symbol::intern("site");
const Symbol kSeq = Symbol::intern("n");

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// What every method must produce: the pairs, as arrival numbers.
struct Output {
  uint64_t pairs = 0;
  uint64_t checksum = 0;
  void add(int64_t left, int64_t right) {
    ++pairs;
    checksum += mix(static_cast<uint64_t>(left) * 0x100000001b3ULL ^ static_cast<uint64_t>(right));
  }
  bool operator==(const Output& o) const { return pairs == o.pairs && checksum == o.checksum; }
};

struct Workload {
  int sites = 60;
  std::vector<int64_t> time;  // sites x sites, seconds
  int64_t max_time = 0;
  std::vector<EventPtr> events;
  std::string matrix_path;
  int64_t at(int x, int y) const { return time[static_cast<size_t>(x * sites + y)]; }
};

struct WorkloadSpec {
  int sites = 60;
  bool gaussian = false;
  size_t readings = 300000;
  int plates = 20000;
  int64_t min_time = 600, max_time = 3600;
  double alt_rate = 0.5;
  double p_lo = 0.5, p_hi = 1.0;
  double cloned = 0.02;
  bool legal = true;  // cars never beat the matrix (false: P4's random spill data)
  uint64_t seed = 1;
};

Workload generate(const WorkloadSpec& spec) {
  std::mt19937_64 rng(spec.seed);
  Workload w;
  w.sites = spec.sites;
  w.time.assign(static_cast<size_t>(spec.sites * spec.sites), 0);
  std::uniform_int_distribution<int64_t> travel(spec.min_time, spec.max_time);
  for (int x = 0; x < spec.sites; ++x) {
    for (int y = x + 1; y < spec.sites; ++y) {
      const int64_t t = travel(rng);
      w.time[static_cast<size_t>(x * spec.sites + y)] =
          w.time[static_cast<size_t>(y * spec.sites + x)] = t;
      w.max_time = std::max(w.max_time, t);
    }
  }
  // Cars: plate i is driven by car i, and a cloned plate also by a twin.
  struct Car {
    int plate;
    int site = -1;
    int64_t ts = INT64_MIN / 2;
  };
  std::vector<Car> cars;
  for (int i = 0; i < spec.plates; ++i) cars.push_back(Car{i});
  const int clones = static_cast<int>(spec.plates * spec.cloned);
  for (int i = 0; i < clones; ++i) cars.push_back(Car{static_cast<int>(rng() % spec.plates)});
  std::normal_distribution<double> gauss(spec.plates / 2.0, spec.plates / 8.0);
  std::uniform_real_distribution<double> prob(spec.p_lo, spec.p_hi);
  const double day = 86400;
  int64_t now = 0;
  int64_t n = 0;
  char plate_buf[16];
  auto emit = [&](int plate, int site, double p) {
    std::snprintf(plate_buf, sizeof plate_buf, "P%06d", plate);
    w.events.push_back(EventBuilder("Reading")
                           .at(now)
                           .set(kPlate, Value(std::string(plate_buf)))
                           .set(kSite, Value(static_cast<int64_t>(site)))
                           .set(kSeq, Value(++n))
                           .probability(p)
                           .build());
  };
  while (w.events.size() < spec.readings) {
    now = static_cast<int64_t>(day * static_cast<double>(w.events.size()) /
                               static_cast<double>(spec.readings));
    size_t c = 0;
    if (spec.gaussian) {
      double g = 0;
      do g = gauss(rng);
      while (g < 0 || g >= spec.plates);
      c = static_cast<size_t>(g);
    } else {
      c = rng() % static_cast<size_t>(spec.plates);
    }
    if (rng() % 50 == 0 && clones > 0)
      c = static_cast<size_t>(spec.plates) + rng() % clones;  // a twin
    Car& car = cars[c];
    // A car goes only where it can be by now: a legal trip from its last site.
    int site = static_cast<int>(rng() % spec.sites);
    for (int tries = 0; car.site >= 0 && tries < 8 && now - car.ts < w.at(car.site, site);
         ++tries) {
      site = static_cast<int>(rng() % spec.sites);
    }
    if (spec.legal && car.site >= 0 && now - car.ts < w.at(car.site, site)) site = car.site;
    car.site = site;
    car.ts = now;
    const double p = prob(rng);
    emit(car.plate, site, p);
    if (std::uniform_real_distribution<double>(0, 1)(rng) < spec.alt_rate &&
        w.events.size() < spec.readings) {
      emit(static_cast<int>(rng() % spec.plates), site, 1 - p);
    }
  }
  // The matrix file for the plugin.
  w.matrix_path =
      (std::filesystem::temp_directory_path() /
       ("join_bench_" + std::to_string(::getpid()) + "_" + std::to_string(spec.sites) + ".csv"))
          .string();
  std::ofstream out(w.matrix_path);
  for (int x = 0; x < spec.sites; ++x) {
    for (int y = 0; y < spec.sites; ++y) out << (y ? "," : "") << w.at(x, y);
    out << "\n";
  }
  return w;
}

// ---------------------------------------------------------------------------
// sqlite: P4's in-memory database design.

void check(int rc, sqlite3* db, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    std::fprintf(stderr, "sqlite %s: %s\n", what, sqlite3_errmsg(db));
    std::exit(1);
  }
}

Output runSqlite(const Workload& w, double threshold, int64_t deletion_interval, Timing& timing) {
  sqlite3* db = nullptr;
  check(sqlite3_open(":memory:", &db), db, "open");
  const char* schema =
      "CREATE TABLE local(plate TEXT, site INTEGER, ts INTEGER, prob REAL, n INTEGER);"
      "CREATE INDEX local_plate ON local(plate, prob);"
      "CREATE INDEX local_ts ON local(ts);"
      "CREATE TABLE illegal(plate TEXT, site1 INTEGER, site2 INTEGER, ts1 INTEGER, ts2 INTEGER,"
      " prob REAL, n1 INTEGER, n2 INTEGER);"
      "CREATE INDEX illegal_plate ON illegal(plate);";
  check(sqlite3_exec(db, schema, nullptr, nullptr, nullptr), db, "schema");
  sqlite3_stmt *probe = nullptr, *insert = nullptr, *flag = nullptr, *expire = nullptr;
  check(sqlite3_prepare_v2(db,
                           "SELECT site, ts, prob, n FROM local WHERE plate = ?1 AND prob >= ?2 "
                           "AND ts > ?3",
                           -1, &probe, nullptr),
        db, "probe");
  check(
      sqlite3_prepare_v2(db, "INSERT INTO local VALUES(?1, ?2, ?3, ?4, ?5)", -1, &insert, nullptr),
      db, "insert");
  check(sqlite3_prepare_v2(db, "INSERT INTO illegal VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", -1,
                           &flag, nullptr),
        db, "flag");
  check(sqlite3_prepare_v2(db, "DELETE FROM local WHERE ts <= ?1", -1, &expire, nullptr), db,
        "expire");
  const int64_t window = w.max_time;
  int64_t next_deletion = INT64_MIN;
  size_t in_txn = 0;
  const Stopwatch watch;
  check(sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr), db, "begin");
  for (const EventPtr& e : w.events) {
    const double p = e->probability();
    if (p < threshold) continue;
    const std::string& plate = e->find(kPlate)->asString();
    const int64_t site = e->find(kSite)->asInt();
    const int64_t ts = e->ts();
    const int64_t n = e->find(kSeq)->asInt();
    if (ts >= next_deletion) {
      sqlite3_bind_int64(expire, 1, ts - window);
      check(sqlite3_step(expire), db, "expire step");
      sqlite3_reset(expire);
      next_deletion = ts + deletion_interval;
    }
    sqlite3_bind_text(probe, 1, plate.data(), static_cast<int>(plate.size()), SQLITE_STATIC);
    // A little below threshold / p: rounding must not hide a pair whose
    // product, checked exactly below, reaches the threshold.
    sqlite3_bind_double(probe, 2, threshold / p * (1 - 1e-12));
    sqlite3_bind_int64(probe, 3, ts - window);
    while (sqlite3_step(probe) == SQLITE_ROW) {
      const int64_t s1 = sqlite3_column_int64(probe, 0);
      const int64_t t1 = sqlite3_column_int64(probe, 1);
      const double p1 = sqlite3_column_double(probe, 2);
      const int64_t n1 = sqlite3_column_int64(probe, 3);
      const double pp = p1 * p;
      if (ts - t1 < std::min(w.at(static_cast<int>(s1), static_cast<int>(site)), window) &&
          pp >= threshold) {
        sqlite3_bind_text(flag, 1, plate.data(), static_cast<int>(plate.size()), SQLITE_STATIC);
        sqlite3_bind_int64(flag, 2, s1);
        sqlite3_bind_int64(flag, 3, site);
        sqlite3_bind_int64(flag, 4, t1);
        sqlite3_bind_int64(flag, 5, ts);
        sqlite3_bind_double(flag, 6, pp);
        sqlite3_bind_int64(flag, 7, n1);
        sqlite3_bind_int64(flag, 8, n);
        check(sqlite3_step(flag), db, "flag step");
        sqlite3_reset(flag);
      }
    }
    sqlite3_reset(probe);
    sqlite3_bind_text(insert, 1, plate.data(), static_cast<int>(plate.size()), SQLITE_STATIC);
    sqlite3_bind_int64(insert, 2, site);
    sqlite3_bind_int64(insert, 3, ts);
    sqlite3_bind_double(insert, 4, p);
    sqlite3_bind_int64(insert, 5, n);
    check(sqlite3_step(insert), db, "insert step");
    sqlite3_reset(insert);
    if (++in_txn == 1000) {
      check(sqlite3_exec(db, "COMMIT; BEGIN", nullptr, nullptr, nullptr), db, "commit");
      in_txn = 0;
    }
  }
  check(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), db, "commit");
  timing.stop(watch);
  Output out;
  sqlite3_stmt* all = nullptr;
  check(sqlite3_prepare_v2(db, "SELECT n1, n2 FROM illegal", -1, &all, nullptr), db, "select");
  while (sqlite3_step(all) == SQLITE_ROW) {
    out.add(sqlite3_column_int64(all, 0), sqlite3_column_int64(all, 1));
  }
  for (sqlite3_stmt* s : {probe, insert, flag, expire, all}) sqlite3_finalize(s);
  sqlite3_close(db);
  return out;
}

// ---------------------------------------------------------------------------
// native: one thread, a hash map by plate, expiry on insert. Like the plugin
// (and any join on the bus, whose output is the pairs' events), it keeps the
// windowed events themselves and reads each pair's output from its events.

Output runNative(const Workload& w, double threshold, Timing& timing) {
  struct Rec {
    int64_t ts;
    int64_t site;
    double prob;
    EventPtr event;
  };
  std::unordered_map<std::string, std::vector<Rec>> window;
  const int64_t win = w.max_time;
  Output out;
  const Stopwatch watch;
  for (const EventPtr& e : w.events) {
    const double p = e->probability();
    if (p < threshold) continue;
    const std::string& plate = e->find(kPlate)->asString();
    const int64_t site = e->find(kSite)->asInt();
    const int64_t ts = e->ts();
    std::vector<Rec>& list = window[plate];
    std::erase_if(list, [&](const Rec& r) { return ts - r.ts >= win; });
    for (const Rec& r : list) {
      const double pp = r.prob * p;
      if (ts - r.ts < std::min(w.at(static_cast<int>(r.site), static_cast<int>(site)), win) &&
          pp >= threshold) {
        out.add(r.event->find(kSeq)->asInt(), e->find(kSeq)->asInt());
      }
    }
    list.push_back(Rec{ts, site, p, e});
  }
  timing.stop(watch);
  return out;
}

// ---------------------------------------------------------------------------
// plugin: the join engine through the plugin ABI.

plugin::PluginPtr joinPlugin() {
  static plugin::PluginPtr p = [] {
    std::vector<std::string> paths;
    for (auto& d : plugin::PluginLoader::defaultSearchPaths()) paths.push_back(d);
    static plugin::PluginLoader loader(paths);
    auto r = loader.load("join");
    if (!r) {
      std::fprintf(stderr, "%s\n", r.status().message().c_str());
      std::exit(1);
    }
    return *r;
  }();
  return p;
}

class CountingSink final : public plugin::MatchSink {
 public:
  void onMatch(const plugin::Match& m) override {
    out.add(m.event(0)->find(kSeq)->asInt(), m.event(1)->find(kSeq)->asInt());
    if (on_pair) on_pair(m);
  }
  Output out;
  std::function<void(const plugin::Match&)> on_pair;
};

// Events per Detector::onEvents() call (--chunk; 0: one onEvent() call per
// event, the unbatched path).
size_t g_chunk = 1024;

// Runs the plugin, feeding the events in chunks of g_chunk. With `slices`,
// slice k is the events [k*n/slices, (k+1)*n/slices): no chunk crosses its
// end, `on_slice(k)` is called before it is fed and `on_slice(slices)` before
// flush (the pairs a sink sees belong to the slice last announced).
// `seconds` covers the events and flush, not creating the detector.
Output runPlugin(const Workload& w, std::vector<std::string> options, CountingSink& sink,
                 Timing& timing, size_t slices = 0,
                 const std::function<void(size_t)>& on_slice = nullptr) {
  static const auto query =
      *pattern::parseQuery("PATTERN AND(Reading a, Reading b) WHERE a.plate = b.plate");
  options.push_back("time_matrix=" + w.matrix_path);
  options.push_back("site=site");
  auto opts = plugin::DetectorOptions::parse(options);
  auto d = joinPlugin()->createDetector("join", query, *opts, sink);
  if (!d) {
    std::fprintf(stderr, "%s\n", d.status().message().c_str());
    std::exit(1);
  }
  const std::span<const EventPtr> events(w.events);
  const size_t n = events.size();
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    std::exit(1);
  };
  const Stopwatch watch;
  for (size_t k = 0, parts = std::max<size_t>(slices, 1); k < parts; ++k) {
    if (on_slice) on_slice(k);
    const size_t end = (k + 1) * n / parts;
    for (size_t i = k * n / parts; i < end;) {
      if (g_chunk == 0) {
        if (Status s = (*d)->onEvent(events[i]); !s) fail(s);
        ++i;
        continue;
      }
      const size_t m = std::min(g_chunk, end - i);
      if (Status s = (*d)->onEvents(events.subspan(i, m)); !s) fail(s);
      i += m;
    }
  }
  if (on_slice) on_slice(slices);
  if (Status s = (*d)->flush(); !s) std::fprintf(stderr, "%s\n", s.message().c_str());
  timing.stop(watch);
  return sink.out;
}

// The best of `runs` runs of f(timing), which returns its output and sets
// the time its work took (set-up excluded): the least wall and, separately,
// the least CPU time.
template <typename F>
Timing best(F&& f, Output& out, int runs = 9) {
  Timing least{1e100, 1e100};
  for (int r = 0; r < runs; ++r) {
    Timing t;
    out = f(t);
    least.seconds = std::min(least.seconds, t.seconds);
    least.cpu = std::min(least.cpu, t.cpu);
  }
  return least;
}

std::string params(const WorkloadSpec& s, double threshold) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "\"readings\":%zu,\"checkpoints\":%d,\"plates\":\"%s\",\"plate_count\":%d,"
                "\"threshold\":%.2f",
                s.readings, s.sites, s.gaussian ? "gaussian" : "uniform", s.plates, threshold);
  return buf;
}

void print(const char* bench, const std::string& params, const char* method, size_t readings,
           const Timing& t, const Output& out, const std::string& extra = "") {
  std::printf(
      "{\"bench\":\"%s\",\"params\":{%s,\"method\":\"%s\"%s},\"events_per_s\":%.0f,"
      "\"seconds\":%.4f,\"cpu_seconds\":%.4f,\"cpu_ns_per_reading\":%.1f,\"matches\":%llu,"
      "\"checksum\":\"%016llx\"}\n",
      bench, params.c_str(), method, extra.c_str(), static_cast<double>(readings) / t.seconds,
      t.seconds, t.cpu, t.cpu * 1e9 / static_cast<double>(readings),
      static_cast<unsigned long long>(out.pairs), static_cast<unsigned long long>(out.checksum));
  std::fflush(stdout);
}

int g_plates = 20000;
int g_runs = 9;
// Empty: all of them.
std::vector<int> g_sites;
std::vector<std::string> g_dists;
std::vector<double> g_thresholds;
std::vector<std::string> g_methods;

template <typename T>
bool selected(const std::vector<T>& chosen, const T& v) {
  return chosen.empty() || std::find(chosen.begin(), chosen.end(), v) != chosen.end();
}

int compare(size_t readings) {
  int failures = 0;
  for (int sites : {60, 150}) {
    if (!selected(g_sites, sites)) continue;
    for (bool gaussian : {false, true}) {
      if (!selected(g_dists, std::string(gaussian ? "gaussian" : "uniform"))) continue;
      WorkloadSpec spec;
      spec.sites = sites;
      spec.gaussian = gaussian;
      spec.readings = readings;
      spec.plates = g_plates;
      const Workload w = generate(spec);
      const std::vector<double> thresholds =
          g_thresholds.empty() ? std::vector<double>{0.7, 0.9} : g_thresholds;
      for (double threshold : thresholds) {
        const std::string p = params(spec, threshold);
        const std::string thr = "threshold=" + std::to_string(threshold);
        const std::string chunk = ",\"chunk\":" + std::to_string(g_chunk);
        // The methods that ran, in order: output and timing.
        struct Run {
          const char* method;
          std::string extra;
          Output out;
          Timing timing;
        };
        std::vector<Run> done;
        done.reserve(4);
        auto measure = [&](const char* name, const char* method, std::string extra, auto&& f,
                           int n) -> const Timing* {
          if (!selected(g_methods, std::string(name))) return nullptr;
          Output out;
          const Timing t = best(f, out, n);
          done.push_back(Run{method, std::move(extra), out, t});
          return &done.back().timing;
        };
        const Timing* t_sql = measure(
            "sqlite", "sqlite", "", [&](Timing& t) { return runSqlite(w, threshold, 3600, t); },
            std::max(1, g_runs / 4));
        const Timing* t_native = measure(
            "native", "native", "", [&](Timing& t) { return runNative(w, threshold, t); }, g_runs);
        const Timing* t_one = measure(
            "plugin1", "plugin", ",\"workers\":1" + chunk,
            [&](Timing& t) {
              CountingSink s;
              return runPlugin(w, {thr, "workers=1"}, s, t);
            },
            g_runs);
        const Timing* t_two = measure(
            "plugin2", "plugin", ",\"workers\":2" + chunk,
            [&](Timing& t) {
              CountingSink s;
              return runPlugin(w, {thr, "workers=2"}, s, t);
            },
            g_runs);
        for (const Run& r : done)
          print("join_compare", p, r.method, readings, r.timing, r.out, r.extra);
        bool same = true;
        for (const Run& r : done) same = same && r.out == done.front().out;
        if (!same) ++failures;
        // Ratios of readings/s (wall) and, in brackets, of CPU time.
        std::string ratios;
        auto ratio = [&](const char* name, const Timing* base, const Timing* t) {
          if (!base || !t) return;
          char buf[160];
          std::snprintf(buf, sizeof buf, ",\"%s\":%.2f,\"%s_cpu\":%.2f", name,
                        base->seconds / t->seconds, name, base->cpu / t->cpu);
          ratios += buf;
        };
        ratio("plugin1_vs_sqlite", t_sql, t_one);
        ratio("plugin2_vs_sqlite", t_sql, t_two);
        ratio("native_vs_sqlite", t_sql, t_native);
        ratio("plugin1_vs_native", t_native, t_one);
        ratio("plugin2_vs_native", t_native, t_two);
        ratio("plugin2_vs_plugin1", t_one, t_two);
        std::printf("{\"bench\":\"join_ratio\",\"params\":{%s},\"identical_output\":%s%s}\n",
                    p.c_str(), same ? "true" : "false", ratios.c_str());
        std::fflush(stdout);
      }
      std::filesystem::remove(w.matrix_path);
    }
  }
  return failures == 0 ? 0 : 1;
}

int sweeps(size_t readings) {
  const unsigned cores = std::max(2u, std::thread::hardware_concurrency());
  // Workers (1, 2, ... up to the cores, and 4) x checkpoints 30..150, threshold 0.7.
  for (bool gaussian : {false, true}) {
    for (int sites : {30, 60, 90, 120, 150}) {
      WorkloadSpec spec;
      spec.sites = sites;
      spec.gaussian = gaussian;
      spec.readings = readings;
      spec.plates = g_plates;
      const Workload w = generate(spec);
      for (double threshold : {0.7, 0.8, 0.9}) {
        for (unsigned workers = 1; workers <= std::max(cores, 4u); workers *= 2) {
          if (threshold != 0.7 && workers != 1) continue;
          Output out;
          const Timing t = best(
              [&](Timing& t) {
                CountingSink s;
                return runPlugin(w,
                                 {"threshold=" + std::to_string(threshold),
                                  "workers=" + std::to_string(workers)},
                                 s, t);
              },
              out, g_runs);
          print("join_sweep", params(spec, threshold), "plugin", readings, t, out,
                ",\"workers\":" + std::to_string(workers) + ",\"expiry\":\"on_insert\"");
        }
      }
      if (sites == 60) {
        // Batch expiry: deletion interval 30..150 min (P4's figures 9-11).
        for (int minutes : {30, 60, 90, 120, 150}) {
          Output out;
          const Timing t = best(
              [&](Timing& t) {
                CountingSink s;
                return runPlugin(w,
                                 {"threshold=0.7", "expiry=batch",
                                  "deletion_interval=" + std::to_string(minutes * 60)},
                                 s, t);
              },
              out, g_runs);
          print("join_sweep", params(spec, 0.7), "plugin", readings, t, out,
                ",\"workers\":1,\"expiry\":\"batch\",\"deletion_interval_min\":" +
                    std::to_string(minutes));
          Output sql;
          const Timing ts =
              best([&](Timing& t) { return runSqlite(w, 0.7, minutes * 60, t); }, sql, 1);
          print("join_sweep", params(spec, 0.7), "sqlite", readings, ts, sql,
                ",\"deletion_interval_min\":" + std::to_string(minutes));
        }
      }
      std::filesystem::remove(w.matrix_path);
    }
  }
  return 0;
}

int spillExperiment(size_t readings) {
  // P4 6.4: plates 1000-1999 uniform, probabilities uniform in 0.5-0.99,
  // threshold 0.7, Probability 0.8, M = 3, time matrix 60 min.
  WorkloadSpec spec;
  spec.sites = 30;
  spec.plates = 1000;
  spec.readings = readings;
  spec.min_time = spec.max_time = 3600;
  spec.alt_rate = 0;
  spec.p_lo = 0.5;
  spec.p_hi = 0.99;
  spec.cloned = 0;
  spec.legal = false;
  const Workload w = generate(spec);
  // The window holds about an hour of readings; the budget a third of it.
  const size_t window_tuples = readings * 3600 / 86400;
  const size_t budget = window_tuples * 300 / 3;
  const size_t slices = 10;
  for (const char* strategy : {"none", "window_half", "less_than_probability"}) {
    std::vector<std::string> options = {"threshold=0.7"};
    if (std::string(strategy) != "none") {
      options.insert(options.end(),
                     {std::string("spill=") + strategy, "memory_budget=" + std::to_string(budget),
                      "spill_probability=0.8", "spill_m=3"});
    }
    std::vector<uint64_t> count(slices + 1, 0);
    std::vector<double> prob(slices + 1, 0);
    size_t slice = 0;
    CountingSink sink;
    sink.on_pair = [&](const plugin::Match& m) {
      ++count[slice];
      prob[slice] += m.event(0)->probability() * m.event(1)->probability();
    };
    Timing timing;
    // Slice `slices` is the flush: the final restore.
    runPlugin(w, options, sink, timing, slices, [&](size_t k) { slice = k; });
    for (size_t s = 0; s <= slices; ++s) {
      std::printf(
          "{\"bench\":\"join_spill\",\"params\":{\"strategy\":\"%s\",\"slice\":%zu,"
          "\"slices\":%zu,\"readings\":%zu,\"memory_budget\":%zu},\"matches\":%llu,"
          "\"avg_prob\":%.4f}\n",
          strategy, s, slices, readings, budget, static_cast<unsigned long long>(count[s]),
          count[s] ? prob[s] / static_cast<double>(count[s]) : 0.0);
    }
    std::printf(
        "{\"bench\":\"join_spill_total\",\"params\":{\"strategy\":\"%s\"},\"events_per_s\":%.0f,"
        "\"matches\":%llu,\"checksum\":\"%016llx\"}\n",
        strategy, static_cast<double>(readings) / timing.seconds,
        static_cast<unsigned long long>(sink.out.pairs),
        static_cast<unsigned long long>(sink.out.checksum));
    std::fflush(stdout);
  }
  std::filesystem::remove(w.matrix_path);
  return 0;
}

// One run of `cepbus join --count` as a user types it (one worker, as the
// native loop): the wall and CPU seconds of the whole process, and the pairs
// it printed.
struct ProcessRun {
  double seconds = 0;
  double cpu = 0;
  uint64_t pairs = 0;
};

ProcessRun runCepbusJoin(const std::string& cepbus, const std::string& events, const Workload& w,
                         double threshold, const std::string& type,
                         const std::vector<std::string>& expiry) {
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("join_bench_" + std::to_string(::getpid()) + ".out"))
                              .string();
  std::vector<std::string> args = {cepbus,          "join",
                                   "--events",      events,
                                   "--key",         "plate",
                                   "--site",        "site",
                                   "--time-matrix", w.matrix_path,
                                   "--threshold",   std::to_string(threshold),
                                   "--window",      std::to_string(w.max_time),
                                   "--workers",     "1",
                                   "--type",        type,
                                   "--count"};
  args.insert(args.end(), expiry.begin(), expiry.end());
  // Built before fork(): the child only redirects and execs.
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const Stopwatch watch;
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!std::freopen(out.c_str(), "w", stdout)) ::_exit(127);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  auto seconds = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  ProcessRun run{watch.wall(), seconds(usage.ru_utime) + seconds(usage.ru_stime), 0};
  std::ifstream in(out);
  const std::string line((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(out);
  unsigned long long pairs = 0;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
      std::sscanf(line.c_str(), "{\"pairs\":%llu", &pairs) != 1) {
    std::fprintf(stderr, "join_bench: %s join --type %s failed (status %d): %s\n", cepbus.c_str(),
                 type.c_str(), status, line.c_str());
    std::exit(1);
  }
  run.pairs = pairs;
  return run;
}

// One case of the whole-process comparison: `cepbus join` with `expiry`'s
// flags (empty: expiry on insert, as the native loop) at `threshold` on the
// readings of `w`, written to `events`; whether its pairs equal the native
// join's.
bool wholeProcessCase(const std::string& cepbus, const std::string& events, const Workload& w,
                      const WorkloadSpec& spec, double threshold,
                      const std::vector<std::string>& expiry, const std::string& expiry_param) {
  const int runs = std::min(g_runs, 5);
  // Interleaved, so that a disturbance of the machine hits every method;
  // the least wall and, separately, the least CPU time of each.
  ProcessRun join{1e100, 1e100, 0}, empty{1e100, 1e100, 0};
  Timing native{1e100, 1e100};
  Output native_out;
  for (int r = 0; r < runs; ++r) {
    const ProcessRun j = runCepbusJoin(cepbus, events, w, threshold, "Reading", expiry);
    const ProcessRun e = runCepbusJoin(cepbus, events, w, threshold, "NoSuchType", expiry);
    Timing t;
    native_out = runNative(w, threshold, t);
    join = ProcessRun{std::min(join.seconds, j.seconds), std::min(join.cpu, j.cpu), j.pairs};
    empty = ProcessRun{std::min(empty.seconds, e.seconds), std::min(empty.cpu, e.cpu), 0};
    native.seconds = std::min(native.seconds, t.seconds);
    native.cpu = std::min(native.cpu, t.cpu);
  }
  const bool same = join.pairs == native_out.pairs;
  const double own = join.seconds - empty.seconds;
  const double own_cpu = join.cpu - empty.cpu;
  std::printf(
      "{\"bench\":\"join_process\",\"params\":{%s,%s,\"runs\":%d},\"cepbus_join_s\":%.4f,"
      "\"cepbus_join_no_match_s\":%.4f,\"join_minus_no_match_s\":%.4f,\"native_loop_s\":%.4f,"
      "\"join_minus_no_match_vs_native\":%.2f,\"cepbus_join_cpu_s\":%.4f,"
      "\"cepbus_join_no_match_cpu_s\":%.4f,\"native_loop_cpu_s\":%.4f,"
      "\"join_minus_no_match_vs_native_cpu\":%.2f,\"cepbus_events_per_s\":%.0f,"
      "\"pairs\":%llu,\"native_pairs\":%llu,\"same_pairs\":%s}\n",
      params(spec, threshold).c_str(), expiry_param.c_str(), runs, join.seconds, empty.seconds, own,
      native.seconds, own / native.seconds, join.cpu, empty.cpu, native.cpu, own_cpu / native.cpu,
      static_cast<double>(spec.readings) / join.seconds,
      static_cast<unsigned long long>(join.pairs),
      static_cast<unsigned long long>(native_out.pairs), same ? "true" : "false");
  std::fflush(stdout);
  return same;
}

// wholeProcess() on one distribution of plates and one number of
// checkpoints, at every threshold the sweeps use (or those chosen), with
// expiry on insert; at 60 checkpoints also with the sweeps' batch expiry
// (deletion interval 30..150 min, threshold 0.7), where the window holds up
// to an interval more. The number of cases whose pairs differ from the native
// join's.
int wholeProcessOn(size_t readings, const std::string& cepbus, bool gaussian, int sites) {
  WorkloadSpec spec;
  spec.readings = readings;
  spec.plates = g_plates;
  spec.gaussian = gaussian;
  spec.sites = sites;
  const Workload w = generate(spec);
  const std::string events = (std::filesystem::temp_directory_path() /
                              ("join_bench_" + std::to_string(::getpid()) + ".jsonl"))
                                 .string();
  {
    std::ofstream out(events);
    for (const EventPtr& e : w.events) out << encodeEvent(*e) << '\n';
  }
  int failures = 0;
  for (double threshold :
       g_thresholds.empty() ? std::vector<double>{0.7, 0.8, 0.9} : g_thresholds) {
    if (!wholeProcessCase(cepbus, events, w, spec, threshold, {}, "\"expiry\":\"on_insert\"")) {
      ++failures;
    }
  }
  if (sites == 60 && selected(g_thresholds, 0.7)) {
    for (int minutes : {30, 60, 90, 120, 150}) {
      if (!wholeProcessCase(
              cepbus, events, w, spec, 0.7,
              {"--expiry", "batch", "--deletion-interval", std::to_string(minutes * 60)},
              "\"expiry\":\"batch\",\"deletion_interval_min\":" + std::to_string(minutes))) {
        ++failures;
      }
    }
  }
  std::filesystem::remove(events);
  std::filesystem::remove(w.matrix_path);
  return failures;
}

int wholeProcess(size_t readings, const std::string& cepbus) {
  int failures = 0;
  for (bool gaussian : {false, true}) {
    if (!selected(g_dists, std::string(gaussian ? "gaussian" : "uniform"))) continue;
    for (int sites : {30, 60, 90, 120, 150}) {
      if (selected(g_sites, sites)) failures += wholeProcessOn(readings, cepbus, gaussian, sites);
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  size_t readings = 300000;
  std::string mode = "compare";
  std::string cepbus;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sweeps") {
      mode = "sweeps";
    } else if (a == "--spill") {
      mode = "spill";
    } else if (a == "--cepbus" && i + 1 < argc) {
      mode = "process";
      cepbus = argv[++i];
    } else if (a == "--readings" && i + 1 < argc) {
      readings = std::stoul(argv[++i]);
    } else if (a == "--plates" && i + 1 < argc) {
      g_plates = std::stoi(argv[++i]);
    } else if (a == "--runs" && i + 1 < argc) {
      g_runs = std::max(1, std::stoi(argv[++i]));
    } else if (a == "--checkpoints" && i + 1 < argc) {
      g_sites.push_back(std::stoi(argv[++i]));
    } else if (a == "--dist" && i + 1 < argc) {
      g_dists.push_back(argv[++i]);
    } else if (a == "--threshold" && i + 1 < argc) {
      g_thresholds.push_back(std::stod(argv[++i]));
    } else if (a == "--method" && i + 1 < argc) {
      g_methods.push_back(argv[++i]);
    } else if (a == "--chunk" && i + 1 < argc) {
      g_chunk = std::stoul(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: join_bench [--sweeps | --spill | --cepbus PATH] [--readings N]\n"
                   "                  [--plates N] [--runs N]\n"
                   "                  [--checkpoints 60|150] [--dist uniform|gaussian]\n"
                   "                  [--threshold P] [--method sqlite|native|plugin1|plugin2]\n"
                   "                  [--chunk N]\n"
                   "(--checkpoints, --dist, --threshold and --method may repeat; they filter\n"
                   " the comparison)\n");
      return 2;
    }
  }
  if (mode == "sweeps") return sweeps(readings);
  if (mode == "spill") return spillExperiment(readings);
  if (mode == "process") return wholeProcess(readings, cepbus);
  return compare(readings);
}
