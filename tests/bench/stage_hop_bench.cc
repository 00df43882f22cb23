// stage_hop_bench: the cost of one hop through a stage.
//
// A producer thread offers items to a stage whose single worker runs a
// handler that only reads the clock: the hop latency of an item is the time
// from its admission (offer() stamps enqueued_at) to the moment the handler
// sees it, recorded in a histogram. Per worker batch size and event mode:
//   max    - the producer offers as fast as it can (offerWait, so nothing is
//            rejected): the sustainable hand-off rate and its latency;
//   paced  - the producer offers at a fixed rate: the hop latency when the
//            queue is not the bottleneck; `rejected` > 0 or events_per_s below
//            the offered rate means the rate was not sustained.
// Event modes: "shared" copies an EventPtr from a pool of 4096 pre-built
// events (so both threads also bounce the event's reference count, as when a
// router fans one event out); "none" hands over items without an event (the
// hand-off alone).
//
// The first line calibrates the machine: the one-way latency of moving a
// cache line between the two threads' cores, which bounds every hand-off
// (on a VM it changes with where the host places the vCPUs).
//
// Usage: stage_hop_bench [--events N] [--seconds S]

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bus/base/stats/histogram.h"
#include "bus/core/event.h"
#include "stages/stage.h"

namespace {

using cepbus::EventBuilder;
using cepbus::EventPtr;
using cepbus::Status;
using namespace cepbus::stages;
using Clock = std::chrono::steady_clock;

struct Result {
  uint64_t handled = 0;
  uint64_t rejected = 0;
  double seconds = 0;
  cepbus::stats::HistogramSummary hop;
};

// Two threads take turns incrementing one atomic: the time per turn is the
// one-way cache-line transfer latency between their cores.
double cacheLineTransferNs() {
  constexpr long kTurns = 1'000'000;
  alignas(64) std::atomic<long> turn{0};
  std::thread other([&] {
    for (long i = 1; i < kTurns; i += 2) {
      while (turn.load(std::memory_order_acquire) != i) {
      }
      turn.store(i + 1, std::memory_order_release);
    }
  });
  const auto start = Clock::now();
  for (long i = 0; i < kTurns; i += 2) {
    while (turn.load(std::memory_order_acquire) != i) {
    }
    turn.store(i + 1, std::memory_order_release);
  }
  other.join();
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / kTurns;
}

Result run(size_t batch, uint64_t events, double rate_per_s, const std::vector<EventPtr>& pool) {
  cepbus::stats::Histogram hop;
  StageConfig config;
  config.name = "hop";
  config.capacity = 16384;
  config.batch_size = batch;
  Stage stage(config, [&hop](StageItem& item) {
    hop.recordDuration(Clock::now() - item.enqueued_at);
    return Status::ok();
  });
  stage.start();
  Result r;
  const auto interval =
      std::chrono::nanoseconds(rate_per_s > 0 ? static_cast<int64_t>(1e9 / rate_per_s) : 0);
  const auto start = Clock::now();
  auto next = start;
  for (uint64_t i = 0; i < events; ++i) {
    if (rate_per_s > 0) {
      next += interval;
      while (Clock::now() < next) {
      }
    }
    StageItem item;
    if (!pool.empty()) item.event = pool[i % pool.size()];
    item.token = i;
    const Admission a = rate_per_s > 0 ? stage.offer(std::move(item))
                                       : stage.offerWait(std::move(item), std::chrono::seconds(1));
    if (a == Admission::kRejected) ++r.rejected;
  }
  // Until the last item is handled; joining the worker is not part of a hop.
  while (stage.metrics().processed + r.rejected < events) {
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  stage.stop();
  r.handled = stage.metrics().processed;
  r.hop = hop.summary();
  return r;
}

void print(const char* mode, const char* events, size_t batch, double rate, const Result& r) {
  std::printf(
      "{\"bench\":\"stage_hop\",\"params\":{\"mode\":\"%s\",\"events\":\"%s\",\"batch\":%zu,"
      "\"offered_per_s\":%.0f,\"items\":%llu},\"events_per_s\":%.0f,\"rejected\":%llu,"
      "\"hop_p50_ns\":%llu,\"hop_p90_ns\":%llu,\"hop_p99_ns\":%llu,\"hop_max_ns\":%llu,"
      "\"hop_mean_ns\":%.0f}\n",
      mode, events, batch, rate, static_cast<unsigned long long>(r.handled + r.rejected),
      r.handled / r.seconds, static_cast<unsigned long long>(r.rejected),
      static_cast<unsigned long long>(r.hop.p50_ns), static_cast<unsigned long long>(r.hop.p90_ns),
      static_cast<unsigned long long>(r.hop.p99_ns), static_cast<unsigned long long>(r.hop.max_ns),
      r.hop.mean_ns);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t events = 5'000'000;
  double paced_seconds = 1.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--events") == 0) {
      events = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (std::strcmp(argv[i], "--seconds") == 0) {
      paced_seconds = std::strtod(argv[i + 1], nullptr);
    } else {
      std::fprintf(stderr, "usage: %s [--events N] [--seconds S]\n", argv[0]);
      return 2;
    }
  }
  std::printf(
      "{\"bench\":\"stage_hop_calibration\",\"params\":{},\"cache_line_one_way_ns\":%.1f}\n",
      cacheLineTransferNs());
  std::vector<EventPtr> shared;
  for (int i = 0; i < 4096; ++i) shared.push_back(EventBuilder("Tick").at(i).build());
  const std::vector<EventPtr> none;
  for (size_t batch : {1, 16, 64, 256}) {
    print("max", "shared", batch, 0, run(batch, events, 0, shared));
    print("max", "none", batch, 0, run(batch, events, 0, none));
  }
  for (double rate : {1'000'000.0, 2'000'000.0}) {
    const auto n = static_cast<uint64_t>(rate * paced_seconds);
    for (size_t batch : {1, 64}) {
      print("paced", "shared", batch, rate, run(batch, n, rate, shared));
      print("paced", "none", batch, rate, run(batch, n, rate, none));
    }
  }
  std::printf(
      "{\"bench\":\"stage_hop_calibration\",\"params\":{\"at\":\"end\"},"
      "\"cache_line_one_way_ns\":%.1f}\n",
      cacheLineTransferNs());
  return 0;
}
