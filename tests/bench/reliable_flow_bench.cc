// reliable_flow_bench: journaled delivery through ReliableFlow to one target,
// with concurrent store and dispatch (concurrent_dispatch = true) against
// commit-then-dispatch (false), in the same run.
//
// The producer sends reliable exchanges as fast as the flow takes them (a
// rejection — journal backlog full — makes it yield and retry, so nothing is
// lost); the clock stops when the target has every event and every
// acknowledgement is committed. Two targets: one that acknowledges at once
// (returns OK), and one that defers its acknowledgement (DeferredAck) by
// --ack-delay-us, as the AMQP listener does until its remote subscriber
// settles. Reported per fsync setting: events/s, transactions (group commit:
// events per commit), records written and cancelled (acknowledged before the
// writer took them), and the delivery latency (send to the target's
// deliver(), under flood, so queueing included); plus, for comparison,
// best-effort delivery through the same flow's stage (no journal). Last, a
// paced run (fsync, immediate acknowledgement, 2000 events sent one at a time,
// each once the previous one arrived): the latency a subscriber sees without
// any queueing, i.e. the commit wait that concurrent dispatch removes.
//
// Usage: reliable_flow_bench [--events N] [--dir PATH] [--ack-delay-us US] [--repeat R]

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <mutex>
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

// Send times by event index (the event's timestamp), to measure delivery latency.
class Latencies {
 public:
  explicit Latencies(uint64_t n) : sent_(n), latency_ns_(n, 0) {}
  void sent(uint64_t i) { sent_[i] = Clock::now(); }
  void arrived(int64_t ts) {
    const auto i = static_cast<uint64_t>(ts);
    latency_ns_[i] =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - sent_[i]).count();
  }
  // Mean and 99th percentile in microseconds.
  std::pair<double, double> summary() {
    std::vector<int64_t> sorted = latency_ns_;
    std::sort(sorted.begin(), sorted.end());
    double sum = 0;
    for (int64_t v : sorted) sum += static_cast<double>(v);
    const size_t p99 = sorted.empty() ? 0 : (sorted.size() * 99) / 100;
    return {sorted.empty() ? 0 : sum / sorted.size() / 1000.0,
            sorted.empty() ? 0 : sorted[std::min(p99, sorted.size() - 1)] / 1000.0};
  }

 private:
  std::vector<Clock::time_point> sent_;  // written before the send, read after the dispatch
  std::vector<int64_t> latency_ns_;      // one writer per index (the target's stage)
};

class CountingTarget final : public DeliveryTarget {
 public:
  explicit CountingTarget(Latencies& latencies) : latencies_(latencies) {}
  const std::string& name() const override { return name_; }
  Status deliver(const Exchange& exchange, DeliveryContext&) override {
    latencies_.arrived(exchange.event->ts());
    count.fetch_add(1, std::memory_order_relaxed);
    return Status::ok();
  }
  std::atomic<uint64_t> count{0};

 private:
  std::string name_ = "bench.target";
  Latencies& latencies_;
};

// Takes the acknowledgement of each journaled delivery and gives it `delay`
// later from a thread of its own (a remote subscriber settling it).
class DeferringTarget final : public DeliveryTarget {
 public:
  DeferringTarget(Latencies& latencies, std::chrono::microseconds delay)
      : latencies_(latencies), delay_(delay), acker_([this] { run(); }) {}
  ~DeferringTarget() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    acker_.join();
  }
  const std::string& name() const override { return name_; }
  Status deliver(const Exchange& exchange, DeliveryContext& context) override {
    latencies_.arrived(exchange.event->ts());
    count.fetch_add(1, std::memory_order_relaxed);
    DeferredAck ack = context.deferAcknowledgement();
    if (!ack) return Status::ok();
    {
      std::lock_guard lock(mu_);
      waiting_.push_back({Clock::now() + delay_, std::move(ack)});
    }
    cv_.notify_one();
    return Status::ok();
  }
  std::atomic<uint64_t> count{0};

 private:
  struct Waiting {
    Clock::time_point due;
    DeferredAck ack;
  };
  void run() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      if (waiting_.empty()) {
        cv_.wait(lock, [&] { return stop_ || !waiting_.empty(); });
        continue;
      }
      if (Clock::now() < waiting_.front().due) {
        cv_.wait_until(lock, waiting_.front().due);
        continue;
      }
      std::vector<DeferredAck> due;
      const auto now = Clock::now();
      while (!waiting_.empty() && waiting_.front().due <= now) {
        due.push_back(std::move(waiting_.front().ack));
        waiting_.pop_front();
      }
      lock.unlock();
      for (DeferredAck& ack : due) ack(Status::ok());
      lock.lock();
    }
  }

  std::string name_ = "bench.target";
  Latencies& latencies_;
  const std::chrono::microseconds delay_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Waiting> waiting_;  // guarded by mu_, in due order
  bool stop_ = false;            // guarded by mu_
  std::thread acker_;
};

struct Params {
  std::string dir;
  uint64_t n = 0;
  bool fsync = true;
  Qos qos = Qos::kReliable;
  bool concurrent = true;
  std::chrono::microseconds ack_delay{0};  // 0: the target returns OK at once
  bool paced = false;  // send the next event only once the target has the last one
};

template <typename Target>
void run(const Params& p, Target& target, Latencies& latencies) {
  const std::string path = p.dir + "/reliable_bench_" + (p.fsync ? "fsync" : "nofsync") + ".db";
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  ReliableFlowConfig config;
  config.journal_path = path;
  config.journal.fsync = p.fsync;
  config.stage.capacity = 1 << 17;
  config.writer.max_batch = 4096;
  config.writer.max_backlog = 1 << 16;
  config.concurrent_dispatch = p.concurrent;
  ReliableFlow flow(config);
  if (!flow.attach(target).isOk() || !flow.start().isOk()) std::abort();
  DeliveryTarget* targets[] = {&target};

  // Distinct events (reliable delivery dedupes by id), built before timing.
  std::vector<Exchange> exchanges(p.n);
  for (uint64_t i = 0; i < p.n; ++i) {
    exchanges[i].event = EventBuilder("Order")
                             .at(static_cast<int64_t>(i))
                             .set(Symbol::intern("qty"), cepbus::Value(10))
                             .build();
    exchanges[i].address = Symbol::intern("orders.bench");
    exchanges[i].qos = p.qos;
  }
  uint64_t retries = 0, degraded = 0;
  const auto start = Clock::now();
  for (uint64_t i = 0; i < p.n; ++i) {
    latencies.sent(i);
    while (true) {
      SendOutcome out = flow.send(exchanges[i], targets);
      degraded += out.degraded;
      if (out.rejected == 0) break;
      ++retries;
      std::this_thread::yield();
    }
    while (p.paced && target.count.load() <= i) std::this_thread::yield();
  }
  while (target.count.load() < p.n ||
         (p.qos == Qos::kReliable && flow.reliableMetrics().acknowledged + degraded < p.n)) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  const ReliableMetricsSnapshot m = flow.reliableMetrics();
  flow.stop();
  const auto [mean_us, p99_us] = latencies.summary();
  const std::string ack = p.ack_delay.count() == 0
                              ? std::string("immediate")
                              : "deferred_" + std::to_string(p.ack_delay.count()) + "us";
  std::printf(
      "{\"bench\":\"reliable_flow\",\"params\":{\"qos\":\"%s\",\"fsync\":%s,"
      "\"concurrent_dispatch\":%s,\"ack\":\"%s\",\"load\":\"%s\"},\"events\":%llu,"
      "\"seconds\":%.3f,"
      "\"events_per_s\":%.0f,\"commits\":%llu,\"events_per_commit\":%.1f,\"journaled\":%llu,"
      "\"cancelled\":%llu,\"acknowledged\":%llu,\"degraded\":%llu,\"sender_retries\":%llu,"
      "\"delivery_latency_mean_us\":%.1f,\"delivery_latency_p99_us\":%.1f}\n",
      qosName(p.qos), p.fsync ? "true" : "false", p.concurrent ? "true" : "false", ack.c_str(),
      p.paced ? "paced" : "flood", static_cast<unsigned long long>(p.n), s, p.n / s,
      static_cast<unsigned long long>(m.commits),
      m.commits == 0 ? 0.0 : static_cast<double>(m.journaled + m.acknowledged) / m.commits,
      static_cast<unsigned long long>(m.journaled), static_cast<unsigned long long>(m.cancelled),
      static_cast<unsigned long long>(m.acknowledged), static_cast<unsigned long long>(degraded),
      static_cast<unsigned long long>(retries), mean_us, p99_us);
  std::fflush(stdout);
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
}

void run(const Params& p) {
  Latencies latencies(p.n);
  if (p.ack_delay.count() == 0) {
    CountingTarget target(latencies);
    run(p, target, latencies);
  } else {
    DeferringTarget target(latencies, p.ack_delay);
    run(p, target, latencies);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Params p;
  p.n = 200'000;
  p.dir = std::filesystem::temp_directory_path().string();
  int repeat = 1;
  std::chrono::microseconds delay{200};
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--events") == 0 && i + 1 < argc) {
      p.n = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      p.dir = argv[++i];
    } else if (std::strcmp(argv[i], "--ack-delay-us") == 0 && i + 1 < argc) {
      delay = std::chrono::microseconds(std::strtoll(argv[++i], nullptr, 10));
    } else if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      repeat = std::max(1, std::atoi(argv[++i]));
    }
  }
  for (int r = 0; r < repeat; ++r) {
    // Interleaved, so that both settings see the same machine load.
    for (bool fsync : {true, false}) {
      for (std::chrono::microseconds ack : {std::chrono::microseconds(0), delay}) {
        for (bool concurrent : {true, false}) {
          Params q = p;
          q.fsync = fsync;
          q.ack_delay = ack;
          q.concurrent = concurrent;
          run(q);
        }
      }
    }
    Params q = p;
    q.fsync = false;
    q.qos = Qos::kBestEffort;
    run(q);
    // Delivery latency without queueing: what a subscriber waits for each event.
    for (bool concurrent : {true, false}) {
      Params paced = p;
      paced.n = std::min<uint64_t>(p.n, 2000);
      paced.paced = true;
      paced.concurrent = concurrent;
      run(paced);
    }
  }
  return 0;
}
