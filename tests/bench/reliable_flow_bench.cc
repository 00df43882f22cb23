// reliable_flow_bench: journaled delivery through ReliableFlow to one target.
//
// The producer sends reliable exchanges as fast as the flow takes them (a
// rejection — journal backlog full — makes it yield and retry, so nothing is
// lost); the clock stops when the target has every event and every
// acknowledgement is committed. Reported per fsync setting, with the number
// of transactions (group commit: events per commit) and, for comparison,
// best-effort delivery through the same flow's stage (no journal).
//
// Usage: reliable_flow_bench [--events N] [--dir PATH]

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bus/core/event.h"
#include "flows/reliable_flow.h"

namespace {

using cepbus::EventBuilder;
using cepbus::EventPtr;
using cepbus::Status;
using cepbus::Symbol;
using namespace cepbus::flows;
using Clock = std::chrono::steady_clock;

class CountingTarget final : public DeliveryTarget {
 public:
  const std::string& name() const override { return name_; }
  Status deliver(const Exchange&) override {
    count.fetch_add(1, std::memory_order_relaxed);
    return Status::ok();
  }
  std::atomic<uint64_t> count{0};

 private:
  std::string name_ = "bench.target";
};

void run(const std::string& dir, uint64_t n, bool fsync, Qos qos) {
  const std::string path = dir + "/reliable_bench_" + (fsync ? "fsync" : "nofsync") + ".db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  ReliableFlowConfig config;
  config.journal_path = path;
  config.journal.fsync = fsync;
  config.stage.capacity = 1 << 17;
  config.writer.max_batch = 4096;
  config.writer.max_backlog = 1 << 16;
  ReliableFlow flow(config);
  CountingTarget target;
  if (!flow.attach(target).isOk() || !flow.start().isOk()) std::abort();
  DeliveryTarget* targets[] = {&target};

  // Distinct events (reliable delivery dedupes by id), built before timing.
  std::vector<Exchange> exchanges(n);
  for (uint64_t i = 0; i < n; ++i) {
    exchanges[i].event = EventBuilder("Order")
                             .at(static_cast<int64_t>(i))
                             .set(Symbol::intern("qty"), cepbus::Value(10))
                             .build();
    exchanges[i].address = Symbol::intern("orders.bench");
    exchanges[i].qos = qos;
  }
  uint64_t retries = 0, degraded = 0;
  const auto start = Clock::now();
  for (uint64_t i = 0; i < n; ++i) {
    while (true) {
      SendOutcome out = flow.send(exchanges[i], targets);
      degraded += out.degraded;
      if (out.rejected == 0) break;
      ++retries;
      std::this_thread::yield();
    }
  }
  while (target.count.load() < n ||
         (qos == Qos::kReliable && flow.reliableMetrics().acknowledged + degraded < n)) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  const ReliableMetricsSnapshot m = flow.reliableMetrics();
  flow.stop();
  std::printf(
      "{\"bench\":\"reliable_flow\",\"params\":{\"qos\":\"%s\",\"fsync\":%s},\"events\":%llu,"
      "\"seconds\":%.3f,\"events_per_s\":%.0f,\"commits\":%llu,\"events_per_commit\":%.1f,"
      "\"journaled\":%llu,\"degraded\":%llu,\"sender_retries\":%llu}\n",
      qosName(qos), fsync ? "true" : "false", static_cast<unsigned long long>(n), s, n / s,
      static_cast<unsigned long long>(m.commits),
      m.commits == 0 ? 0.0 : static_cast<double>(m.journaled + m.acknowledged) / m.commits,
      static_cast<unsigned long long>(m.journaled), static_cast<unsigned long long>(degraded),
      static_cast<unsigned long long>(retries));
  std::fflush(stdout);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t n = 200'000;
  std::string dir = std::filesystem::temp_directory_path().string();
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--events") == 0 && i + 1 < argc) {
      n = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      dir = argv[++i];
    }
  }
  run(dir, n, true, Qos::kReliable);
  run(dir, n, false, Qos::kReliable);
  run(dir, n, false, Qos::kBestEffort);
  return 0;
}
