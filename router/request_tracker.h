#pragma once

// RequestTracker: the in-out side of the broker. It hands out correlation ids,
// is the listener of every in-out exchange, completes each request exactly
// once — with the provider's reply, a fault, a rejection, or a timeout fired
// by its timer thread — and drops what arrives after that (counted as late).

#include <chrono>
#include <cstdint>
#include <functional>
#include <queue>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bus/base/mutex.h"
#include "bus/core/status.h"
#include "flows/exchange.h"

namespace cepbus::router {

// Receives the single terminal outcome of a request: kReply, kFault,
// kRejected or kTimeout. Runs on the thread that produced it (the provider's,
// a stage worker, or the tracker's timer thread) and must not throw.
using ReplyCallback = std::function<void(const flows::Outcome&)>;

// Thread-safety: every member may be called from any thread; start() and
// stop() are control-plane calls. Callbacks run without the tracker's lock.
// Ownership: owns the pending callbacks and the timer thread.
class RequestTracker final : public flows::ExchangeListener {
 public:
  RequestTracker() = default;
  ~RequestTracker() override;

  void start();
  // Ends the timer thread; every pending request completes with an
  // Unavailable fault. Idempotent.
  void stop();

  // A new correlation id whose request times out after `timeout`.
  // Unavailable when the tracker is not running.
  Result<uint64_t> track(std::chrono::nanoseconds timeout, ReplyCallback callback);
  // Completes a request; false when it had already completed (or never existed).
  bool complete(uint64_t correlation_id, const flows::Outcome& outcome);
  // Completes exchange.correlation_id with terminal outcomes; others are ignored.
  void onOutcome(const flows::Exchange& exchange, const flows::Outcome& outcome) override;

  size_t pending() const;
  uint64_t timeouts() const;
  uint64_t lateOutcomes() const;

 private:
  using Clock = std::chrono::steady_clock;
  using Deadline = std::pair<Clock::time_point, uint64_t>;

  void run() EXCLUDES(mu_);

  mutable Mutex mu_;
  CondVar cv_;
  std::unordered_map<uint64_t, ReplyCallback> pending_ GUARDED_BY(mu_);
  std::priority_queue<Deadline, std::vector<Deadline>, std::greater<>> deadlines_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  uint64_t timeouts_ GUARDED_BY(mu_) = 0;
  uint64_t late_ GUARDED_BY(mu_) = 0;
  bool running_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace cepbus::router
