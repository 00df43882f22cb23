// stage_overload_bench: a stage offered twice what its handler sustains.
//
// The handler spins for a fixed service time on one worker thread, so the
// stage sustains 1 / service_time events per second; a producer offers
// reliable events at `overload` times that rate for a bounded duration. The
// admission controller must degrade then reject the excess (never block the
// producer, never drop an accepted event) and memory must stay bounded by the
// queue capacity, not by what was offered. Prints one JSON object per
// capacity: offered, accepted, degraded, rejected, processed (events_per_s is
// the rate handled while offering), latency of the handled events (offer to
// handler return), RSS each second and the peak RSS (VmHWM).
//
// Usage: stage_overload_bench [--seconds S] [--service-us U] [--overload X]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bus/core/event.h"
#include "stages/stage.h"

namespace {

using cepbus::EventBuilder;
using cepbus::EventPtr;
using cepbus::Status;
using namespace cepbus::stages;
using Clock = std::chrono::steady_clock;

// A /proc/self/status field in kB, or -1.
long statusKb(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(in, line)) {
    if (line.compare(0, n, field) == 0 && line.size() > n && line[n] == ':') {
      return std::strtol(line.c_str() + n + 1, nullptr, 10);
    }
  }
  return -1;
}

void spinFor(std::chrono::nanoseconds d) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
  }
}

void run(size_t capacity, double seconds, std::chrono::nanoseconds service, double overload) {
  StageConfig config;
  config.name = "overload";
  config.capacity = capacity;
  Stage stage(config, [service](StageItem&) {
    spinFor(service);
    return Status::ok();
  });
  stage.start();
  const double sustainable = 1e9 / static_cast<double>(service.count());
  const double rate = sustainable * overload;
  const auto interval = std::chrono::nanoseconds(static_cast<int64_t>(1e9 / rate));
  const long rss_before_kb = statusKb("VmRSS");

  uint64_t offered = 0, accepted = 0, degraded = 0, rejected = 0;
  std::string rss_by_second;  // VmRSS (kB) at the end of each second: flat once the queue is full
  const auto start = Clock::now();
  auto next_rss = start + std::chrono::seconds(1);
  const auto end =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  auto next = start;
  while (next < end) {
    while (Clock::now() < next) {
    }
    next += interval;
    if (next >= next_rss) {
      rss_by_second += (rss_by_second.empty() ? "" : ",") + std::to_string(statusKb("VmRSS"));
      next_rss += std::chrono::seconds(1);
    }
    // A fresh event per offer, as from a network binding: memory must stay
    // bounded because rejected events are released at once.
    StageItem item;
    item.event = EventBuilder("Order")
                     .at(static_cast<cepbus::Timestamp>(offered))
                     .set("qty", cepbus::Value(static_cast<int64_t>(offered % 100)))
                     .build();
    item.reliable = true;
    item.token = offered++;
    switch (stage.offer(std::move(item))) {
      case Admission::kAccepted:
        ++accepted;
        break;
      case Admission::kDegraded:
        ++degraded;
        break;
      case Admission::kRejected:
        ++rejected;
        break;
    }
  }
  const double offer_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const long peak_kb = statusKb("VmHWM");
  const uint64_t processed_while_offering = stage.metrics().processed;
  stage.stop();
  const StageMetricsSnapshot m = stage.metrics();
  std::printf(
      "{\"bench\":\"stage_overload\",\"params\":{\"capacity\":%zu,\"seconds\":%.1f,"
      "\"service_ns\":%lld,\"sustainable_per_s\":%.0f,\"offered_per_s\":%.0f},"
      "\"events_per_s\":%.0f,\"offered\":%llu,\"accepted\":%llu,\"degraded\":%llu,"
      "\"rejected\":%llu,\"processed\":%llu,\"conserved\":%s,\"latency_p50_ns\":%llu,"
      "\"latency_p99_ns\":%llu,\"latency_max_ns\":%llu,\"rss_before_kb\":%ld,"
      "\"rss_by_second_kb\":[%s],\"peak_rss_kb\":%ld}\n",
      capacity, seconds, static_cast<long long>(service.count()), sustainable,
      offered / offer_seconds, processed_while_offering / offer_seconds,
      static_cast<unsigned long long>(offered), static_cast<unsigned long long>(accepted),
      static_cast<unsigned long long>(degraded), static_cast<unsigned long long>(rejected),
      static_cast<unsigned long long>(m.processed),
      (accepted + degraded + rejected == offered && m.processed == accepted + degraded &&
       m.offered == offered)
          ? "true"
          : "false",
      static_cast<unsigned long long>(m.latency.p50_ns),
      static_cast<unsigned long long>(m.latency.p99_ns),
      static_cast<unsigned long long>(m.latency.max_ns), rss_before_kb, rss_by_second.c_str(),
      peak_kb);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 3.0;
  double service_us = 20.0;
  double overload = 2.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--seconds") == 0) {
      seconds = std::strtod(argv[i + 1], nullptr);
    } else if (std::strcmp(argv[i], "--service-us") == 0) {
      service_us = std::strtod(argv[i + 1], nullptr);
    } else if (std::strcmp(argv[i], "--overload") == 0) {
      overload = std::strtod(argv[i + 1], nullptr);
    } else {
      std::fprintf(stderr, "usage: %s [--seconds S] [--service-us U] [--overload X]\n", argv[0]);
      return 2;
    }
  }
  const auto service = std::chrono::nanoseconds(static_cast<int64_t>(service_us * 1000));
  for (size_t capacity : {1024, 16384}) run(capacity, seconds, service, overload);
  return 0;
}
