// The event-algebra detector (P1) under CONTEXT recent: throughput for
// expressions of k = 3, 7, 15 subexpressions mixing all ten operators, the
// least-squares slope of time per event against k, and peak memory on long
// streams.
//
//   algebra_bench [--events N] [--repeat R] [--memory-only] [--with-100m]
//
// Stream: 10 event types A..J uniformly at random (mt19937 seeded 42), one
// event per time step, an integer attribute x uniform in 0..9. Throughput
// events are built before timing; the sink counts matches and reads every
// bound event. Each expression is timed R times (default 3) over N events
// (default 1,000,000) and the best run is reported (events_per_s by the wall
// clock, cpu_events_per_s by the thread's CPU time). Memory (measured
// first): each expression of k = 15 runs in a child process over 1M and 10M
// events (100M with --with-100m) built on the fly, and the child's peak RSS
// is reported.
// The detector is linked directly (not through the plugin ABI) so that k is
// read from the compiled plan.

#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "plugins/algebra/algebra_detector.h"
#include "plugins/algebra/algebra_plan.h"

namespace {

using namespace cepbus;
using plugins::algebra::AlgebraDetector;

// Every operator appears in some expression: ; + | ~ || - * selection,
// aggregation, time restriction.
const std::vector<std::string> kExpressions = {
    // k = 3
    "A ; B",
    "A + B",
    "A - B",
    "WITHIN(A*, 10)",
    // k = 7
    "(A ; B) ~ (B ; C)",
    "((A ; B) + C) - D",
    "SEQ(A a, AGG(B+ b[], sum(b[].x) >= 10), C c) WITHIN 30",
    "((A a ; B b)[a.x < b.x] | C)*",
    // k = 15
    "WITHIN((((A | B) + C)*) ; ((E ; F) ~ (F ; G)), 40)",
    "SEQ(A a, B+ b[], (C c ; D d)[c.x > d.x] - E, F || F)",
};

class ReadingSink final : public plugin::MatchSink {
 public:
  void onMatch(const plugin::Match& match) override {
    ++matches;
    for (size_t i = 0; i < match.size(); ++i) checksum += static_cast<uint64_t>(match.ts(i));
  }
  uint64_t matches = 0;
  uint64_t checksum = 0;
};

class Stream {
 public:
  Stream() : rng_(42) {}
  EventPtr next() {
    static const Symbol kX = Symbol::intern("x");
    const unsigned type = rng_() % 10;
    const int64_t x = static_cast<int64_t>(rng_() % 10);
    return EventBuilder(kTypes[type]).at(ts_++).set(kX, Value(x)).build();
  }

 private:
  static inline const Symbol kTypes[10] = {
      Symbol::intern("A"), Symbol::intern("B"), Symbol::intern("C"), Symbol::intern("D"),
      Symbol::intern("E"), Symbol::intern("F"), Symbol::intern("G"), Symbol::intern("H"),
      Symbol::intern("I"), Symbol::intern("J")};
  std::mt19937 rng_;
  Timestamp ts_ = 0;
};

std::shared_ptr<const plugins::algebra::Plan> compile(const std::string& expr) {
  auto q = pattern::parseQuery("PATTERN " + expr);
  if (!q) {
    std::fprintf(stderr, "%s: %s\n", expr.c_str(), q.status().message().c_str());
    std::exit(1);
  }
  auto plan = plugins::algebra::compilePlan(*q, plugin::DetectorOptions());
  if (!plan) {
    std::fprintf(stderr, "%s: %s\n", expr.c_str(), plan.status().message().c_str());
    std::exit(1);
  }
  return *plan;
}

double cpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

struct Point {
  double k;
  double ns_per_event;
};

Point throughput(const std::string& expr, const std::vector<EventPtr>& events, int repeat) {
  auto plan = compile(expr);
  double best_wall = 1e300;
  double best_cpu = 1e300;
  uint64_t matches = 0;
  size_t retained = 0;
  for (int r = 0; r < repeat; ++r) {
    ReadingSink sink;
    AlgebraDetector d(plan, sink);
    const double c0 = cpuSeconds();
    const auto w0 = std::chrono::steady_clock::now();
    for (const EventPtr& e : events) {
      if (!d.onEvent(e)) std::exit(2);
    }
    if (!d.flush()) std::exit(2);
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
    const double cpu = cpuSeconds() - c0;
    best_wall = std::min(best_wall, wall);
    best_cpu = std::min(best_cpu, cpu);
    matches = sink.matches;
    retained = d.retainedInstances();
  }
  const double n = static_cast<double>(events.size());
  std::printf(
      "{\"bench\":\"algebra_throughput\",\"params\":{\"expr\":%s,\"k\":%zu,\"context\":\"recent\","
      "\"events\":%zu,\"types\":10},\"events_per_s\":%.0f,\"cpu_events_per_s\":%.0f,"
      "\"ns_per_event\":%.1f,\"matches\":%llu,\"retained_at_end\":%zu}\n",
      quoted(expr).c_str(), plan->nodes.size(), events.size(), n / best_wall, n / best_cpu,
      best_cpu / n * 1e9, static_cast<unsigned long long>(matches), retained);
  std::fflush(stdout);
  return Point{static_cast<double>(plan->nodes.size()), best_cpu / n * 1e9};
}

// Runs `expr` over `n` events built on the fly in a child process; the
// child's peak RSS in KiB.
void memory(const std::string& expr, uint64_t n) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    auto plan = compile(expr);
    ReadingSink sink;
    AlgebraDetector d(plan, sink);
    Stream stream;
    size_t max_retained = 0;
    for (uint64_t i = 0; i < n; ++i) {
      if (!d.onEvent(stream.next())) _exit(2);
      if ((i & 0xffff) == 0) max_retained = std::max(max_retained, d.retainedInstances());
    }
    if (!d.flush()) _exit(2);
    std::printf(
        "{\"bench\":\"algebra_memory\",\"params\":{\"expr\":%s,\"k\":%zu,\"context\":"
        "\"recent\",\"events\":%llu},\"matches\":%llu,\"max_retained_sampled\":%zu,",
        quoted(expr).c_str(), plan->nodes.size(), static_cast<unsigned long long>(n),
        static_cast<unsigned long long>(sink.matches), max_retained);
    std::fflush(stdout);
    _exit(0);
  }
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  std::printf("\"peak_rss_kib\":%ld,\"exit\":%d}\n", usage.ru_maxrss,
              WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  size_t events = 1000000;
  int repeat = 3;
  bool memory_only = false;
  bool with_100m = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--events") == 0 && i + 1 < argc) {
      events = std::stoull(argv[++i]);
    } else if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      repeat = std::stoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--memory-only") == 0) {
      memory_only = true;
    } else if (std::strcmp(argv[i], "--with-100m") == 0) {
      with_100m = true;
    } else {
      std::fprintf(stderr, "usage: %s [--events N] [--repeat R] [--memory-only] [--with-100m]\n",
                   argv[0]);
      return 1;
    }
  }
  // Memory first: a child forked later would share (and count) the
  // throughput stream's pages.
  std::vector<uint64_t> sizes = {1000000, 10000000};
  if (with_100m) sizes.push_back(100000000);
  for (uint64_t n : sizes) {
    for (size_t i = kExpressions.size() - 2; i < kExpressions.size(); ++i) {
      memory(kExpressions[i], n);
    }
  }
  if (!memory_only) {
    std::vector<EventPtr> stream;
    stream.reserve(events);
    Stream gen;
    for (size_t i = 0; i < events; ++i) stream.push_back(gen.next());
    std::vector<Point> points;
    for (const std::string& e : kExpressions) points.push_back(throughput(e, stream, repeat));
    // Least squares: ns per event = intercept + slope * k.
    double sk = 0, st = 0, skk = 0, skt = 0;
    for (const Point& p : points) {
      sk += p.k;
      st += p.ns_per_event;
      skk += p.k * p.k;
      skt += p.k * p.ns_per_event;
    }
    const double m = static_cast<double>(points.size());
    const double slope = (m * skt - sk * st) / (m * skk - sk * sk);
    const double intercept = (st - slope * sk) / m;
    std::printf(
        "{\"bench\":\"algebra_slope\",\"params\":{\"context\":\"recent\",\"points\":%zu},"
        "\"ns_per_event_per_k\":%.2f,\"intercept_ns\":%.1f}\n",
        points.size(), slope, intercept);
  }
  return 0;
}
