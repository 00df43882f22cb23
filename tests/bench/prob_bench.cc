// PROBABILITY >= p on an uncertain stream: what pruning inside each engine
// pays. The same query (SEQ of three types in a window) runs on the nfa,
// algebra (CONTEXT unrestricted, where it prunes at every operator) and petri
// engines at thresholds 0, 0.5 and 0.9, each run in a child process so that
// its peak resident memory is its own. One JSON object per run:
// {"bench":"prob","params":{"engine":...,"threshold":...},"events_per_s":...,
//  "matches":...,"peak_rss_kb":...,"partial_matches_peak":...,
//  "partial_matches_final":...}, then per engine the speed-up of 0.9 over 0.
// The partial matches are the detector's own count (Detector::state(), in
// each engine's unit: stack entries, operand instances, tokens), the most it
// held at once and what it holds after flush().
//
// Usage: prob_bench [--events N] [--window W] (defaults 100000 and 12).

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bus/core/pattern/parser.h"
#include "bus/host/loader/plugin_loader.h"

namespace {

using namespace cepbus;

class CountingSink final : public plugin::MatchSink {
 public:
  void onMatch(const plugin::Match&) override { ++matches; }
  uint64_t matches = 0;
};

// Types A, B, C at ts 1, 2, ...; probabilities uniform in [0.6, 1]. Made a
// chunk at a time in the run's own process, so that the events the detector
// does not keep are freed and the peak RSS is the detector's, not the
// input's.
class UncertainStream {
 public:
  explicit UncertainStream(size_t n) : left_(n) {}
  // The next events, at most `max`; empty at the end.
  const std::vector<EventPtr>& next(size_t max) {
    chunk_.clear();
    for (; left_ > 0 && chunk_.size() < max; --left_) {
      const std::string type(1, static_cast<char>('A' + rng_() % 3));
      chunk_.push_back(EventBuilder(type).at(++ts_).probability(prob_(rng_)).build());
    }
    return chunk_;
  }

 private:
  std::mt19937_64 rng_{2026};
  std::uniform_real_distribution<double> prob_{0.6, 1.0};
  size_t left_;
  Timestamp ts_ = 0;
  std::vector<EventPtr> chunk_;
};

// As many events per onEvents() call as `cepbus match` reads at once.
constexpr size_t kBatch = 256;

// Sent through a pipe from the child: plain data only.
struct Run {
  double events_per_s = 0;
  uint64_t matches = 0;
  uint64_t partials_peak = 0;
  uint64_t partials_final = 0;
};

// One run in this process over `n` events; exits non-zero on an error. Only
// the detector's calls are timed, not making the events.
Run runOnce(const std::string& engine, const std::string& text, size_t n) {
  const char* dir = std::getenv("CEPBUS_BUILD_DIR");
  plugin::PluginLoader loader({std::string(dir ? dir : ".") + "/plugins"});
  auto p = loader.load(engine);
  auto q = pattern::parseQuery(text);
  if (!p || !q) {
    std::fprintf(stderr, "%s: %s\n", engine.c_str(),
                 (!p ? p.status() : q.status()).message().c_str());
    std::exit(1);
  }
  CountingSink sink;
  auto d = (*p)->createDetector(engine, *q, plugin::DetectorOptions(), sink);
  if (!d) {
    std::fprintf(stderr, "%s: %s\n", engine.c_str(), d.status().message().c_str());
    std::exit(1);
  }
  UncertainStream stream(n);
  std::chrono::steady_clock::duration busy{};
  Status s = Status::ok();
  while (s) {
    const std::vector<EventPtr>& events = stream.next(kBatch);
    if (events.empty()) break;
    const auto start = std::chrono::steady_clock::now();
    s = (*d)->onEvents(events);
    busy += std::chrono::steady_clock::now() - start;
  }
  const auto start = std::chrono::steady_clock::now();
  if (s) s = (*d)->flush();
  busy += std::chrono::steady_clock::now() - start;
  const double secs = std::chrono::duration<double>(busy).count();
  if (!s) {
    std::fprintf(stderr, "%s: %s\n", engine.c_str(), s.message().c_str());
    std::exit(1);
  }
  const std::optional<plugin::DetectorState> state = (*d)->state();
  if (!state) {
    std::fprintf(stderr, "%s: the detector does not count its partial matches\n", engine.c_str());
    std::exit(1);
  }
  return Run{static_cast<double>(n) / secs, sink.matches, state->peak_partial_matches,
             state->partial_matches};
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 100000;
  long window = 12;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--events") == 0) n = std::strtoul(argv[i + 1], nullptr, 10);
    if (std::strcmp(argv[i], "--window") == 0) window = std::strtol(argv[i + 1], nullptr, 10);
  }
  const std::string base = "PATTERN SEQ(A a, B b, C c) WITHIN " + std::to_string(window);
  for (const char* engine : {"nfa", "algebra", "petri"}) {
    double rate_at_0 = 0;
    for (const char* threshold : {"0", "0.5", "0.9"}) {
      std::string text = base + " PROBABILITY >= " + threshold;
      if (std::strcmp(engine, "algebra") == 0) text += " CONTEXT unrestricted";
      int fds[2];
      if (pipe(fds) != 0) return 1;
      const pid_t child = fork();
      if (child == 0) {
        close(fds[0]);
        const Run r = runOnce(engine, text, n);
        if (write(fds[1], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) _exit(1);
        _exit(0);
      }
      close(fds[1]);
      Run r;
      const bool got = read(fds[0], &r, sizeof r) == static_cast<ssize_t>(sizeof r);
      close(fds[0]);
      int status = 0;
      rusage usage{};
      wait4(child, &status, 0, &usage);
      if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
      if (std::strcmp(threshold, "0") == 0) rate_at_0 = r.events_per_s;
      std::printf(
          "{\"bench\":\"prob\",\"params\":{\"engine\":\"%s\",\"threshold\":%s,\"events\":%zu,"
          "\"window\":%ld},\"events_per_s\":%.0f,\"matches\":%llu,\"peak_rss_kb\":%ld,"
          "\"partial_matches_peak\":%llu,\"partial_matches_final\":%llu}\n",
          engine, threshold, n, window, r.events_per_s, static_cast<unsigned long long>(r.matches),
          usage.ru_maxrss, static_cast<unsigned long long>(r.partials_peak),
          static_cast<unsigned long long>(r.partials_final));
      if (std::strcmp(threshold, "0.9") == 0) {
        std::printf(
            "{\"bench\":\"prob_speedup\",\"params\":{\"engine\":\"%s\"},"
            "\"speedup_0.9_over_0\":%.2f}\n",
            engine, r.events_per_s / rate_at_0);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
