#pragma once

// OutputBacklog: the composite events of a detector's reliable queries
// (output_qos=reliable) that the bus refused for now, kept in the order they
// were made until it takes them.
//
// The bus refuses a reliable publish for now when admission says no: a
// target's stage is full, a subscriber fell behind and its flow holds back
// as much as its stage holds, a route is paused. An AMQP publisher hears
// that as a released delivery and sends again; a CEP query has no sender to
// hand it back to, so it keeps the composite here instead of losing it, and
// its detector waits while the backlog is not empty (services/cep/
// cep_service.h): its stage's queue fills and admission pushes back on
// whatever feeds the query — the SEDA answer to a slow consumer. Composites
// never overtake one another: while one is held, later ones are held behind
// it. A refusal that will not pass by waiting (no such target, a failed
// delivery) is final, as for a best-effort composite.
//
// Thread-safety: every member may be called from any thread. publish()
// calls come from one thread at a time (the detector's); retry() and
// drain() may run beside them, and one retry at a time publishes.
// Ownership: owns the exchanges it holds; the callbacks must outlive it.

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>

#include "bus/base/mutex.h"
#include "flows/abstract_flow.h"
#include "flows/exchange.h"

namespace cepbus::services::cep {

class OutputBacklog {
 public:
  using Publish = std::function<flows::SendOutcome(const flows::Exchange&)>;
  // A composite the bus will not get: its refusal was final, or the
  // backlog gave up on it (abandon()).
  using Lost = std::function<void(const flows::Exchange&, const flows::SendOutcome&)>;

  OutputBacklog(Publish publish, Lost lost);

  // True for a refusal that may pass later: Rejected (admission, a full
  // buffer) or Unavailable (a paused route, a target away for now).
  static bool retryable(const flows::SendOutcome& out);

  // Publishes `exchange` unless composites are held (it waits behind
  // them), and holds it when the bus refuses it for now. True when it is
  // held: the caller sees to it that retry() or drain() runs later.
  bool publish(flows::Exchange exchange);
  // Publishes the held composites in order until the bus refuses one
  // again; true when none is left. Returns false at once while another
  // thread is retrying.
  bool retry();
  // retry() until none is left or `deadline` passed, waiting between
  // attempts (from 100 µs, doubling up to 20 ms); true when none is left.
  bool drain(std::chrono::steady_clock::time_point deadline);
  // Gives up on every held composite: each one is lost.
  void abandon();

  // Lock-free: read before and after every detector call.
  size_t size() const { return size_.load(std::memory_order_acquire); }
  bool empty() const { return size() == 0; }
  // Composites that had to wait, since it was made.
  uint64_t heldTotal() const;

 private:
  const Publish publish_;
  const Lost lost_;
  mutable Mutex mu_;
  std::deque<flows::Exchange> held_ GUARDED_BY(mu_);
  std::atomic<size_t> size_{0};            // held_.size(), written under mu_
  bool retrying_ GUARDED_BY(mu_) = false;  // a retry() is publishing held_.front()
  uint64_t held_total_ GUARDED_BY(mu_) = 0;
};

}  // namespace cepbus::services::cep
